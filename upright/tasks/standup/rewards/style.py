"""Style-group reward terms: posture constraints that shape HOW the robot stands up.

Each term returns (N,) float32, UNWEIGHTED (indicators are 0/1; the sign and weight come from the
:class:`~upright.managers.reward.RewardTerm`). Joint subsets are index lists on the state's J axis
(:data:`upright.robots.g1.POLICY_JOINT_NAMES` order), resolved from names by
:func:`upright.tasks.standup.joints.joint_ids`. Stage gates compare the pelvis height
``state.base_height`` (m) with H_stage1 = 0.45 m / H_stage2 = 0.65 m (strictly greater); with
``relative_to_feet=True`` they compare pelvis z minus mean foot z (HoST slope: 0.4 / 0.6 m).

Terrain- and posture-specific terms (HoST's ``legged_gym/legged_gym/envs/g1/g1_config_ground_prone.py`` and
the platform, wall and slope configs beside it):
:func:`feet_stumble` (platform, slope, wall), :func:`lower_body_deviation` (platform, wall),
:func:`hip_pitch_deviation` and :func:`thigh_orientation` (prone). Which terms a variant uses is chosen by
:func:`upright.tasks.standup.rewards.standup_reward_terms`.

Source: HoST's style rewards, ground config: InternRobotics/HoST at commit 70bb580949a3,
``legged_gym/legged_gym/envs/g1/g1_config_ground.py`` (weights) and ``legged_gym/legged_gym/envs/base/host_ground.py``
(terms); Huang et al., "Learning Humanoid Standing-up Control across Diverse Postures", RSS 2025, arXiv 2502.08378,
Table I.
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
HIP_PITCH_IDS = tuple(joint_ids(["left_hip_pitch_joint", "right_hip_pitch_joint"]))
_LOWER_BODY = ("hip_roll", "hip_pitch", "hip_yaw", "knee")
LOWER_BODY_LEFT_IDS = tuple(joint_ids([f"left_{j}_joint" for j in _LOWER_BODY]))
LOWER_BODY_RIGHT_IDS = tuple(joint_ids([f"right_{j}_joint" for j in _LOWER_BODY]))
"""Hip roll, hip pitch, hip yaw, knee of each leg (aligned): the joints :func:`lower_body_deviation` compares."""
LOWER_BODY_MIRROR = (-1.0, 1.0, -1.0, 1.0)
"""Sign that maps a left joint angle onto its right mirror image (G1: roll and yaw axes are mirrored, pitch
and knee are not), aligned with :data:`LOWER_BODY_LEFT_IDS`."""
SHOULDER_ROLL_IDS = tuple(joint_ids(["left_shoulder_roll_joint", "right_shoulder_roll_joint"]))
"""(left, right): order matters for :func:`shoulder_roll_deviation`."""


def stage_height_of(state: StandupState, relative_to_feet: bool = False) -> torch.Tensor:
    """(N,) height (m) that the stage gates compare: pelvis z, or pelvis z minus mean foot z (HoST slope)."""
    return state.base_height_above_feet if relative_to_feet else state.base_height


def _gate(state: StandupState, stage_height: float, relative_to_feet: bool = False) -> torch.Tensor:
    """(N,) float 1 where the pelvis is above ``stage_height`` (m), see :func:`stage_height_of`."""
    return (stage_height_of(state, relative_to_feet) > stage_height).float()


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
    relative_to_feet: bool = False,
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
    return (per_foot.sum(dim=1) * _gate(state, stage_height, relative_to_feet)).float()


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


def _cos_to_vertical(top: torch.Tensor, bottom: torch.Tensor) -> torch.Tensor:
    """Cosine of the angle between each leg segment ``top - bottom`` ((N, 2, 3) world positions, m) and the world
    z axis: 1 when ``top`` is straight above ``bottom``. (N, 2)."""
    segment = top - bottom
    return segment[..., 2] / segment.norm(dim=-1).clamp(min=1e-6)


def shank_orientation(
    state: StandupState,
    lower: float = 0.8,
    margin: float = 1.0,
    value_at_margin: float = 0.1,
    stage_height: float = H_STAGE1,
    relative_to_feet: bool = False,
) -> torch.Tensor:
    """Vertical shanks: f_tol(mean_legs (knee - ankle)_z / |knee - ankle|, [lower, inf), margin, v) * 1(h > H1).

    The cosine of each shank's angle to the world z axis, averaged over the legs. (N,) in [0, 1].
    """
    cos_z = _cos_to_vertical(state.knee_pos, state.ankle_pos)
    value = tolerance(cos_z.mean(dim=1), lower, math.inf, margin, value_at_margin)
    return (value * _gate(state, stage_height, relative_to_feet)).float()


def base_ang_vel(
    state: StandupState, scale: float = 2.0, stage_height: float = H_STAGE1, relative_to_feet: bool = False
) -> torch.Tensor:
    """exp(-scale |w_xy|^2) * 1(h > H1), w = base-frame angular velocity (rad/s). (N,) in [0, 1]."""
    value = torch.exp(-scale * state.base_ang_vel[:, :2].square().sum(dim=1))
    return (value * _gate(state, stage_height, relative_to_feet)).float()


def feet_stumble(state: StandupState, ratio: float = 3.0) -> torch.Tensor:
    """1(any foot with |F_xy| > ratio * |F_z|): a foot pushed sideways, e.g. against a box edge or ramp.

    F = net contact force on the foot (``state.feet_contact_force``, world frame, N). A foot in the air
    (F = 0) does not count. HoST spec §3(b), weight -25 on platform, slope and wall. (N,) 0/1.
    """
    f = state.feet_contact_force
    return (f[..., :2].norm(dim=-1) > ratio * f[..., 2].abs()).any(dim=1).float()


def lower_body_asymmetry(
    state: StandupState,
    left_ids: Sequence[int] = LOWER_BODY_LEFT_IDS,
    right_ids: Sequence[int] = LOWER_BODY_RIGHT_IDS,
    mirror: Sequence[float] = LOWER_BODY_MIRROR,
) -> torch.Tensor:
    """sum_j var(mirror_j q_L,j, q_R,j) = sum_j (mirror_j q_L,j - q_R,j)^2 / 2 (unbiased variance of the pair), rad^2.

    0 when the legs are mirror images. ``left_ids``, ``right_ids`` and ``mirror`` are aligned. (N,) >= 0.
    """
    sign = torch.as_tensor(mirror, dtype=state.q.dtype, device=state.q.device)
    left = state.q[:, list(left_ids)] * sign
    return (left - state.q[:, list(right_ids)]).square().sum(dim=1) / 2.0


def lower_body_deviation(state: StandupState, scale: float = 2.0) -> torch.Tensor:
    """L/R symmetry of the legs: exp(-scale * :func:`lower_body_asymmetry`) (rad^2), not gated. (N,) in (0, 1].

    HoST ``style_lower_body_deviation``, weight +1 on platform and wall (spec §3(b): "L/R symmetry"). The spec
    does not give the formula; this one is an INTERPRETATION following a public HoST-derived Isaac Gym code base
    (``_reward_lower_body_deviation``: hip roll, pitch, yaw and knee; left roll and yaw negated; variance over
    the two legs, summed; exp(-2 x)).
    """
    return torch.exp(-scale * lower_body_asymmetry(state)).float()


def hip_pitch_deviation(
    state: StandupState,
    joint_ids: Sequence[int] = HIP_PITCH_IDS,
    max_threshold: float = 2.5,
    min_threshold: float = 1.6,
) -> torch.Tensor:
    """1(max_LR |q| > max_threshold OR min_LR |q| > min_threshold) over the two hip-pitch joints (rad). (N,) 0/1.

    HoST ground-prone ``hip_pitch_deviation``, weight -10 (spec §3 "Ground-prone config"). The spec gives no
    formula or thresholds; this INTERPRETATION uses the form of the hip yaw/roll terms with upright's thresholds:
    one hip pitched near the G1 limit (|q| > 2.5 rad; range -2.53..2.88) or both hips folded past ~92 deg
    (|q| > 1.6 rad), i.e. a jack-knifed posture.
    """
    return _pair_deviation(state, joint_ids, max_threshold, min_threshold)


def thigh_orientation(
    state: StandupState,
    lower: float = 0.8,
    margin: float = 1.0,
    value_at_margin: float = 0.1,
    stage_height: float = H_STAGE1,
    relative_to_feet: bool = False,
) -> torch.Tensor:
    """Vertical thighs: f_tol(min_legs (hip - knee)_z / |hip - knee|, [lower, inf), margin, v) * 1(h > H1).

    The cosine of each thigh's angle to the world z axis (hip-roll origin above the knee = 1), the worse leg
    counted. HoST ground-prone ``thigh_ori``, weight +10, replacing the shank-orientation and ankle-parallel
    terms (spec §3 "Ground-prone config"). The spec gives no formula; this INTERPRETATION mirrors
    :func:`shank_orientation` (same tolerance and H1 gate) with the minimum over legs, as in a public
    HoST-derived code base. (N,) in [0, 1].
    """
    cos_z = _cos_to_vertical(state.hip_pos, state.knee_pos)
    value = tolerance(cos_z.amin(dim=1), lower, math.inf, margin, value_at_margin)
    return (value * _gate(state, stage_height, relative_to_feet)).float()
