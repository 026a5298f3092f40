"""The reach task's actor/critic observation (32 values per env step): joint positions relative to home, joint
velocities, the gripper site, the commanded target and the last action, as named terms of
:class:`upright.managers.observation.ObservationTerm` (the joint and gripper terms are the lift task's: the same
Panda). Noise (with ``env.obs_noise``): ±0.01 rad on positions and ±0.01 on the scaled velocities (Isaac Lab's
reach); none on the target, a command."""

from __future__ import annotations

import torch

from upright.managers.observation import ObservationTerm
from upright.tasks.lift.observations import gripper_pos, joint_pos_rel, joint_vel
from upright.tasks.reach.state import ReachState


def target_pos(state: ReachState) -> torch.Tensor:
    """(N, 3) the commanded point, world frame (robot base at the origin), m."""
    return state.target_pos


def last_action(state: ReachState) -> torch.Tensor:
    """(N, 8) the policy's action of the last env step (dimensionless)."""
    return state.action


OBSERVATION_TERMS: tuple[ObservationTerm, ...] = (
    ObservationTerm("joint_pos", joint_pos_rel, noise=0.01),
    ObservationTerm("joint_vel", joint_vel, scale=0.1, noise=0.01),
    ObservationTerm("gripper_pos", gripper_pos),
    ObservationTerm("target_pos", target_pos),
    ObservationTerm("last_action", last_action),
)
"""The frame's terms, in order (9 + 9 + 3 + 3 + 8 = 32 values)."""

OBS_CLIP = 100.0
"""Frames are clipped to ±100."""

ROBOT_MEASURABLE_TERMS: dict[str, str] = {
    "joint_pos": "joint encoders",
    "joint_vel": "joint encoders",
    "gripper_pos": "forward kinematics of the encoders",
    "target_pos": "the operator's command (a point in the base frame)",
    "last_action": "the policy's own previous output",
}
"""The sensor or source behind each term: every term is available on the robot."""
