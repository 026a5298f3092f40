"""Regularization-group reward terms: penalties on effort, jerk and limit violations.

Each term returns (N,) float32, UNWEIGHTED and non-negative; the (negative) weight comes from the
:class:`~upright.managers.reward.RewardTerm`. Sums run over all J = 23 policy joints.

Source: HoST's regularization rewards (Huang et al., "Learning Humanoid Standing-up Control across Diverse Postures",
RSS 2025, arXiv 2502.08378), with the code weights of the ground config where they differ from the paper's:
InternRobotics/HoST at commit 70bb580949a3, ``legged_gym/legged_gym/envs/g1/g1_config_ground.py`` (weights) and
``legged_gym/legged_gym/envs/base/host_ground.py`` (terms).
"""

from __future__ import annotations

import torch

from upright.tasks.standup.state import StandupState


def joint_acc(state: StandupState) -> torch.Tensor:
    """|ddq|^2 summed over joints, (rad/s^2)^2. (N,)."""
    return state.ddq.square().sum(dim=1).float()


def action_rate(state: StandupState) -> torch.Tensor:
    """|a_t - a_{t-1}|^2 summed over joints. (N,)."""
    return (state.action - state.last_action).square().sum(dim=1).float()


def action_smoothness(state: StandupState) -> torch.Tensor:
    """|a_t - 2 a_{t-1} + a_{t-2}|^2 summed over joints. (N,)."""
    return (state.action - 2.0 * state.last_action + state.last_last_action).square().sum(dim=1).float()


def torques(state: StandupState) -> torch.Tensor:
    """|tau|^2 summed over joints, (N·m)^2. (N,)."""
    return state.tau.square().sum(dim=1).float()


def joint_power(state: StandupState) -> torch.Tensor:
    """sum_j |tau_j| |dq_j|, W. (N,)."""
    return (state.tau.abs() * state.dq.abs()).sum(dim=1).float()


def joint_vel(state: StandupState) -> torch.Tensor:
    """|dq|^2 summed over joints, (rad/s)^2. (N,)."""
    return state.dq.square().sum(dim=1).float()


def target_pos_error(state: StandupState) -> torch.Tensor:
    """|p_target - q|^2 summed over joints, rad^2 (PD-target tracking error). (N,)."""
    return (state.p_target - state.q).square().sum(dim=1).float()


def joint_pos_limits(state: StandupState) -> torch.Tensor:
    """Sum over joints of the amount (rad) by which q lies outside [q_soft_lower, q_soft_upper]. (N,)."""
    below = (state.q_soft_lower - state.q).clamp(min=0.0)
    above = (state.q - state.q_soft_upper).clamp(min=0.0)
    return (below + above).sum(dim=1).float()


def joint_vel_limits(state: StandupState, soft_factor: float = 0.9) -> torch.Tensor:
    """sum_j clip(|dq_j| - soft_factor * dq_limit_j, 0, 1), rad/s (each joint's excess capped at 1). (N,)."""
    excess = state.dq.abs() - soft_factor * state.dq_limit
    return excess.clamp(min=0.0, max=1.0).sum(dim=1).float()
