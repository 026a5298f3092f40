"""Post-task-group reward terms: hold a good standing posture once up.

EVERY term is multiplied by 1(h_pelvis > H_stage2 = 0.65 m) (``stage_height`` param, strictly greater; with
``relative_to_feet=True`` h is pelvis z minus mean foot z, HoST slope: H2 = 0.6 m).
Each term returns (N,) float32 in [0, 1], UNWEIGHTED (weight from the
:class:`~upright.managers.reward.RewardTerm`).

Source: HoST's post-task ("target") rewards, code values: InternRobotics/HoST at commit 70bb580949a3,
``legged_gym/legged_gym/envs/base/host_ground.py`` with ``legged_gym/legged_gym/envs/g1/g1_config_ground.py``
(e.g. |h - 0.75| rather than the square in the paper, Huang et al., "Learning Humanoid Standing-up Control across
Diverse Postures", RSS 2025, arXiv 2502.08378).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from upright.robots.g1 import POLICY_JOINT_NAMES
from upright.tasks.standup.joints import joint_ids
from upright.tasks.standup.rewards.style import H_STAGE2, lower_body_asymmetry, stage_height_of
from upright.tasks.standup.state import StandupState

UPPER_BODY_IDS = tuple(
    joint_ids(
        [
            "waist_yaw_joint",
            "left_(shoulder_.*|elbow|wrist_roll)_joint",
            "right_(shoulder_.*|elbow|wrist_roll)_joint",
        ]
    )
)
"""waist_yaw + the 10 arm joints (5 per arm), 11 indices."""
_TARGET_BY_NAME = {"left_shoulder_roll_joint": 0.3, "right_shoulder_roll_joint": -0.3}
UPPER_BODY_TARGET = tuple(_TARGET_BY_NAME.get(POLICY_JOINT_NAMES[i], 0.0) for i in UPPER_BODY_IDS)
"""HoST target angles (rad) for :data:`UPPER_BODY_IDS`: shoulder roll +0.3 left / -0.3 right, else 0."""


def _gate(state: StandupState, stage_height: float, relative_to_feet: bool = False) -> torch.Tensor:
    return (stage_height_of(state, relative_to_feet) > stage_height).float()


def ang_vel_xy(
    state: StandupState, scale: float = 2.0, stage_height: float = H_STAGE2, relative_to_feet: bool = False
) -> torch.Tensor:
    """exp(-scale |w_xy|^2) * 1(h > H2), w = base-frame angular velocity (rad/s). (N,)."""
    value = torch.exp(-scale * state.base_ang_vel[:, :2].square().sum(dim=1))
    return (value * _gate(state, stage_height, relative_to_feet)).float()


def lin_vel_xy(
    state: StandupState, scale: float = 5.0, stage_height: float = H_STAGE2, relative_to_feet: bool = False
) -> torch.Tensor:
    """exp(-scale |v_xy|^2) * 1(h > H2), v = base-frame linear velocity (m/s). (N,)."""
    value = torch.exp(-scale * state.base_lin_vel[:, :2].square().sum(dim=1))
    return (value * _gate(state, stage_height, relative_to_feet)).float()


def orientation(
    state: StandupState, scale: float = 5.0, stage_height: float = H_STAGE2, relative_to_feet: bool = False
) -> torch.Tensor:
    """exp(-scale |g_xy|^2) * 1(h > H2), g = projected gravity (unit, base frame): level pelvis. (N,)."""
    value = torch.exp(-scale * state.projected_gravity[:, :2].square().sum(dim=1))
    return (value * _gate(state, stage_height, relative_to_feet)).float()


def base_height(
    state: StandupState,
    target: float = 0.75,
    scale: float = 20.0,
    stage_height: float = H_STAGE2,
    relative_to_feet: bool = False,
) -> torch.Tensor:
    """exp(-scale |h - target|) * 1(h > H2), h = pelvis z (m; slope: above the mean foot z, ``relative_to_feet``);
    absolute value as in HoST's code. Target 0.75 m (ground, platform), 0.725 (wall), 0.70 (slope), spec §3(d).
    (N,)."""
    value = torch.exp(-scale * (stage_height_of(state, relative_to_feet) - target).abs())
    return (value * _gate(state, stage_height, relative_to_feet)).float()


def upper_body_posture(
    state: StandupState,
    joint_ids: Sequence[int] = UPPER_BODY_IDS,
    target: Sequence[float] = UPPER_BODY_TARGET,
    scale: float = 0.1,
    stage_height: float = H_STAGE2,
    relative_to_feet: bool = False,
) -> torch.Tensor:
    """exp(-scale |q_upper - q_target|^2) * 1(h > H2) over waist yaw + the 10 arm joints (rad). (N,).

    ``target`` (rad) is aligned with ``joint_ids``.
    """
    q_target = torch.as_tensor(target, dtype=state.q.dtype, device=state.q.device)
    sq_err = (state.q[:, list(joint_ids)] - q_target).square().sum(dim=1)
    return (torch.exp(-scale * sq_err) * _gate(state, stage_height, relative_to_feet)).float()


def feet_height_diff(
    state: StandupState,
    scale: float = 20.0,
    min_diff: float = 0.02,
    stage_height: float = H_STAGE2,
    relative_to_feet: bool = False,
) -> torch.Tensor:
    """exp(-scale * max(|z_L - z_R|, min_diff)) * 1(h > H2), foot-site heights in m. (N,) <= exp(-0.4)."""
    diff = (state.feet_pos[:, 0, 2] - state.feet_pos[:, 1, 2]).abs().clamp(min=min_diff)
    return (torch.exp(-scale * diff) * _gate(state, stage_height, relative_to_feet)).float()


def lower_body_deviation(
    state: StandupState, scale: float = 2.0, stage_height: float = H_STAGE2, relative_to_feet: bool = False
) -> torch.Tensor:
    """exp(-scale * L/R asymmetry of the legs, rad^2) * 1(h > H2). (N,) in [0, 1].

    HoST ground-prone ``target_lower_body_deviation``, weight 10 (spec §3 "Ground-prone config"). The spec gives
    no formula; this INTERPRETATION is the style-group symmetry term
    (:func:`~upright.tasks.standup.rewards.style.lower_body_deviation`, same asymmetry measure
    :func:`~upright.tasks.standup.rewards.style.lower_body_asymmetry`) gated like every post-task term.
    """
    value = torch.exp(-scale * lower_body_asymmetry(state))
    return (value * _gate(state, stage_height, relative_to_feet)).float()
