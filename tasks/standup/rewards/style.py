"""Style-group reward terms: posture constraints that shape HOW the robot stands up.

Each term returns (N,) float32, UNWEIGHTED (indicators are 0/1; the sign and weight come from the
:class:`~upright.tasks.standup.rewards.RewardTerm`). Joint subsets are index lists on the state's J axis
(:data:`upright.robots.g1.POLICY_JOINT_NAMES` order), resolved from names by
:func:`upright.tasks.standup.joints.joint_ids`. Stage gates compare the pelvis height
``state.base_height`` (m) with H_stage1 = 0.45 m / H_stage2 = 0.65 m (strictly greater).

Source: HoST spec section 3(b) (``/work/shared/reference/host_standup.md``), ground config
(``cfg/g1_config_ground.py``); Huang et al., RSS 2025, Table I.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from upright.tasks.standup.joints import joint_ids
from upright.tasks.standup.rewards.tolerance import tolerance
from upright.tasks.standup.state import StandupState

H_STAGE1 = 0.45
"""HoST ``target_base_height_phase1``: pelvis height (m) above which stage-1 style terms apply."""
H_STAGE2 = 0.65
"""HoST ``target_base_height_phase3``: pelvis height (m) above which standing terms apply."""

WAIST_YAW_IDS = tuple(joint_ids("waist_yaw_joint"))
HIP_YAW_IDS = tuple(joint_ids(["left_hip_yaw_joint", "right_hip_yaw_joint"]))
HIP_ROLL_IDS = tuple(joint_ids(["left_hip_roll_joint", "right_hip_roll_joint"]))
KNEE_IDS = tuple(joint_ids(["left_knee_joint", "right_knee_joint"]))
SHOULDER_ROLL_IDS = tuple(joint_ids(["left_shoulder_roll_joint", "right_shoulder_roll_joint"]))
"""(left, right): order matters for :func:`shoulder_roll_deviation`."""


def _gate(state: StandupState, stage_height: float) -> torch.Tensor:
    """(N,) float 1 where the pelvis is above ``stage_height`` (m)."""
    return (state.base_height > stage_height).float()


def waist_yaw_deviation(
    state: StandupState, joint_ids: Sequence[int] = WAIST_YAW_IDS, threshold: float = 1.4
) -> torch.Tensor:
    """1(|q_waist_yaw| > threshold rad). With several joints: 1(max |q| > threshold). (N,) 0/1."""
    return (state.q[:, list(joint_ids)].abs().amax(dim=1) > threshold).float()


def _pair_deviation(
    state: StandupState, joint_ids: Sequence[int], max_threshold: float, min_threshold: float
) -> torch.Tensor:
    q_abs = state.q[:, list(joint_ids)].abs()
    return ((q_abs.amax(dim=1) > max_threshold) | (q_abs.amin(dim=1) > min_threshold)).float()


def hip_yaw_deviation(
    state: StandupState,
    joint_ids: Sequence[int] = HIP_YAW_IDS,
    max_threshold: float = 1.4,
    min_threshold: float = 0.9,
) -> torch.Tensor:
    """1(max_LR |q| > max_threshold OR min_LR |q| > min_threshold) over the two hip-yaw joints (rad). (N,) 0/1."""
    return _pair_deviation(state, joint_ids, max_threshold, min_threshold)


def hip_roll_deviation(
    state: StandupState,
    joint_ids: Sequence[int] = HIP_ROLL_IDS,
    max_threshold: float = 1.4,
    min_threshold: float = 0.9,
) -> torch.Tensor:
    """1(max_LR |q| > max_threshold OR min_LR |q| > min_threshold) over the two hip-roll joints (rad). (N,) 0/1."""
    return _pair_deviation(state, joint_ids, max_threshold, min_threshold)


def knee_deviation(
    state: StandupState,
    joint_ids: Sequence[int] = KNEE_IDS,
    max_threshold: float = 2.85,
    min_threshold: float = -0.06,
) -> torch.Tensor:
    """1(max_LR |q| > max_threshold OR min_LR q < min_threshold) over the two knees (rad; signed min). (N,) 0/1."""
    q = state.q[:, list(joint_ids)]
    return ((q.abs().amax(dim=1) > max_threshold) | (q.amin(dim=1) < min_threshold)).float()


def shoulder_roll_deviation(
    state: StandupState, joint_ids: Sequence[int] = SHOULDER_ROLL_IDS, threshold: float = 0.02
) -> torch.Tensor:
    """1(q_L < -threshold OR q_R > threshold): an arm rolled inwards. ``joint_ids`` = (left, right). (N,) 0/1."""
    left, right = joint_ids
    return ((state.q[:, left] < -threshold) | (state.q[:, right] > threshold)).float()


def foot_displacement(
    state: StandupState,
    scale: float = 2.0,
    min_sq_distance: float = 0.3,
    max_foot_height: float = 0.3,
    stage_height: float = H_STAGE2,
) -> torch.Tensor:
    """Feet under the pelvis once standing, summed over the two feet.

    sum_feet exp(-scale * clamp(|base_xy - foot_xy|^2, min=min_sq_distance)) * 1(foot z < max_foot_height)
    * 1(h_pelvis > stage_height). Distances in m (squared: m^2). The clamp caps each foot's value at
    exp(-0.6) ~ 0.549 (HoST code).

    Returns:
        (N,) in [0, 2 exp(-scale * min_sq_distance)].
    """
    sq_dist = (state.base_pos[:, None, :2] - state.feet_pos[:, :, :2]).square().sum(dim=-1)  # (N, 2)
    per_foot = torch.exp(-scale * sq_dist.clamp(min=min_sq_distance)) * (state.feet_pos[:, :, 2] < max_foot_height)
    return (per_foot.sum(dim=1) * _gate(state, stage_height)).float()


def ankle_parallel(state: StandupState, scale: float = 10.0, threshold: float = 0.05) -> torch.Tensor:
    """1(mean over feet of var(scale * z of the 5 sole points) < threshold): soles parallel to the floor.

    ``torch.var`` default (unbiased, divisor 4 for 5 points), as HoST's code. z in m. (N,) 0/1.
    """
    var = torch.var(scale * state.ankle_points[..., 2], dim=-1)  # (N, 2)
    return (var.mean(dim=1) < threshold).float()


def feet_distance(state: StandupState, threshold: float = 0.9) -> torch.Tensor:
    """1(horizontal distance |p_L - p_R|_xy > threshold m) between the two foot sites. (N,) 0/1.

    Horizontal (xy) distance, so a foot lifted off the floor is not counted as "apart".
    """
    dist = (state.feet_pos[:, 0, :2] - state.feet_pos[:, 1, :2]).norm(dim=-1)
    return (dist > threshold).float()


def shank_orientation(
    state: StandupState,
    lower: float = 0.8,
    margin: float = 1.0,
    value_at_margin: float = 0.1,
    stage_height: float = H_STAGE1,
) -> torch.Tensor:
    """Vertical shanks: f_tol(mean_legs (knee - ankle)_z / |knee - ankle|, [lower, inf), margin, v) * 1(h > H1).

    The cosine of each shank's angle to the world z axis, averaged over the legs. (N,) in [0, 1].
    """
    shank = state.knee_pos - state.ankle_pos  # (N, 2, 3)
    cos_z = shank[..., 2] / shank.norm(dim=-1).clamp(min=1e-6)
    value = tolerance(cos_z.mean(dim=1), lower, math.inf, margin, value_at_margin)
    return (value * _gate(state, stage_height)).float()


def base_ang_vel(state: StandupState, scale: float = 2.0, stage_height: float = H_STAGE1) -> torch.Tensor:
    """exp(-scale |w_xy|^2) * 1(h > H1), w = base-frame angular velocity (rad/s). (N,) in [0, 1]."""
    value = torch.exp(-scale * state.base_ang_vel[:, :2].square().sum(dim=1))
    return (value * _gate(state, stage_height)).float()
