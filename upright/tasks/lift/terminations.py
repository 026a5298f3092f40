"""Lift terminations (MuJoCo Playground ``PandaPickCube.step``): the cube leaves the 1 m box around the robot base or
falls below the floor, or the physics state is not finite. Each returns (N,) bool."""

from __future__ import annotations

import torch

from upright.tasks.lift.state import LiftState


def cube_out_of_bounds(state: LiftState, bound: float = 1.0) -> torch.Tensor:
    """Any |cube coordinate| > ``bound`` m, or cube centre below z = 0."""
    return (state.cube_pos.abs() > bound).any(dim=-1) | (state.cube_pos[:, 2] < 0.0)


def non_finite(state: LiftState) -> torch.Tensor:
    """A joint position or velocity, or the cube position, is NaN or infinite."""
    bad = ~torch.isfinite(state.q).all(dim=-1) | ~torch.isfinite(state.dq).all(dim=-1)
    return bad | ~torch.isfinite(state.cube_pos).all(dim=-1)


def success(state: LiftState, threshold: float = 0.025) -> torch.Tensor:
    """The cube centre is within ``threshold`` m of the target (ManiSkill ``PickCube`` ``goal_thresh`` = 0.025 m).
    Not a termination: episodes run on (the policy must hold the cube there)."""
    return state.cube_to_target.norm(dim=-1) < threshold


def joint_limit_violation(
    state: LiftState, lower: torch.Tensor, upper: torch.Tensor, margin: float = 0.1
) -> torch.Tensor:
    """A robot joint is more than ``margin`` (rad or m) outside its range (``lower``, ``upper``: (9,)).

    The joint limits are constraints, so a healthy state never gets there; this catches a diverged simulation,
    including MuJoCo's own recovery (on a NaN/huge acceleration the native engine resets that env to ``qpos0``,
    whose ``joint4`` = 0 lies outside its range [-3.07, -0.07] rad), which would otherwise run on as a valid episode.
    """
    return ((state.q < lower - margin) | (state.q > upper + margin)).any(dim=-1)
