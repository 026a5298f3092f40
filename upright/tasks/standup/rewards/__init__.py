"""HoST standup rewards: named terms and four groups for :class:`upright.managers.reward.RewardManager`.

Every terrain and posture; what differs per variant is in :mod:`.variants`.

HoST (Huang et al., RSS 2025) trains one critic per reward group; the PPO combines the four
normalized advantages with :data:`GROUP_WEIGHTS`. The shared manager produces the per-group rewards
(N, 4) in :data:`REWARD_GROUPS` order; group weights are NOT applied there.

Per group (:data:`GROUPS`; HoST ``compute_reward`` in ``legged_gym/legged_gym/envs/base/host_ground.py``,
InternRobotics/HoST at commit 70bb580949a3; ``reward_group_weights`` in
``legged_gym/legged_gym/envs/g1/g1_config_ground.py``):

- ``task``: the PRODUCT of ``weight * term`` over its terms (head height x orientation, weights 1),
  range 0..1, not multiplied by dt.
- every other group: the SUM of ``weight * dt * term`` over its terms.

Term functions live in :mod:`.task`, :mod:`.style`, :mod:`.regularization` and :mod:`.post_task`; each
returns the unweighted (N,) value.
"""

from __future__ import annotations

from upright.managers.reward import RewardGroup, RewardTerm
from upright.tasks.standup.rewards import post_task, regularization, style, task
from upright.tasks.standup.rewards.variants import POSTURE_REWARDS, TERRAIN_REWARDS

GROUPS: tuple[RewardGroup, ...] = (
    RewardGroup("task", combine="product", scale_by_dt=False),
    RewardGroup("regularization"),
    RewardGroup("style"),
    RewardGroup("post_task"),
)
"""The four groups (one critic each), in column order: task = product of ``weight * term`` (not x dt), the others
= sum of ``weight * dt * term`` (HoST ``compute_reward``)."""

REWARD_GROUPS: tuple[str, ...] = tuple(g.name for g in GROUPS)
"""Names of :data:`GROUPS` ("task", "regularization", "style", "post_task"), in the column order of
:meth:`upright.managers.reward.RewardManager.compute`."""

GROUP_WEIGHTS: tuple[float, ...] = (2.5, 0.1, 1.0, 1.0)
"""HoST ``reward_group_weights`` (ground supine; prone: ``POSTURE_REWARDS["prone"].group_weights``), aligned
with :data:`REWARD_GROUPS`. Used by the PPO to combine per-group advantages, A = sum_i w_i * normalized(A_i);
NOT applied to the rewards."""


def standup_reward_terms(terrain: str = "ground", posture: str = "supine") -> list[RewardTerm]:
    """HoST's reward terms of ``terrain`` x ``posture`` with the code weights of spec section 3.

    The ground-supine set (27 terms) plus the variant's changes (:mod:`.variants`):

    - every terrain: knee-deviation weight (-0.25 ground, -10 otherwise) and post-task target height
      (0.75 m ground/platform, 0.725 wall, 0.70 slope);
    - platform, slope, wall: ``style/feet_stumble`` (-25);
    - platform, wall: ``style/lower_body_deviation`` (+1, L/R symmetry);
    - slope: stage thresholds H1/H2 = 0.4/0.6 m on pelvis z minus mean foot z (also the target height);
    - prone: hip yaw/roll thresholds 0.9/0.8 rad, style angular velocity weight 25, ``style/hip_pitch_deviation``
      (-10), ``style/thigh_orientation`` (+10) instead of ``style/shank_orientation`` and ``style/ankle_parallel``,
      ``post_task/lower_body_deviation`` (+10). Prone's group weights [1, 0.1, 1, 1] are a PPO setting
      (``train.group_weights``, set by ``posture=prone``), not part of the terms.

    Args:
        terrain: ground | platform | wall | slope.
        posture: supine | prone (the terrain must support it).

    Returns:
        Terms (:class:`upright.managers.reward.RewardTerm`) in :data:`REWARD_GROUPS` order (task, regularization,
        style, post-task), for a :class:`~upright.managers.reward.RewardManager` with :data:`GROUPS`. Joint subsets
        are resolved from joint names (:func:`upright.tasks.standup.joints.joint_ids`).

    Raises:
        ValueError: unknown terrain or posture, or a posture the terrain lacks (the message lists the valid ones).
    """
    from upright.tasks.standup.terrains.settings import check_variant  # here: terrains import task modules

    check_variant(terrain, posture)
    ter, pos = TERRAIN_REWARDS[terrain], POSTURE_REWARDS[posture]
    rel = {"relative_to_feet": True} if ter.relative_to_feet else {}
    h1, h2 = {"stage_height": ter.stage1_height, **rel}, {"stage_height": ter.stage2_height, **rel}
    hip = {"max_threshold": pos.hip_max_threshold, "min_threshold": pos.hip_min_threshold}
    tol = {"lower": 0.8, "margin": 1.0, "value_at_margin": 0.1, **h1}
    terms = [
        # (a) task: product, weight 1 each.
        RewardTerm(
            "head_height", task.head_height, "task", 1.0, {"target": 1.0, "margin": 1.0, "value_at_margin": 0.1}
        ),
        RewardTerm(
            "orientation", task.orientation, "task", 1.0, {"target": 0.99, "margin": 1.0, "value_at_margin": 0.05}
        ),
        # (c) regularization.
        RewardTerm("joint_acc", regularization.joint_acc, "regularization", -2.5e-7),
        RewardTerm("action_rate", regularization.action_rate, "regularization", -0.01),
        RewardTerm("action_smoothness", regularization.action_smoothness, "regularization", -0.01),
        RewardTerm("torques", regularization.torques, "regularization", -2.5e-6),
        RewardTerm("joint_power", regularization.joint_power, "regularization", -2.5e-5),
        RewardTerm("joint_vel", regularization.joint_vel, "regularization", -1e-3),
        RewardTerm("target_pos_error", regularization.target_pos_error, "regularization", -2.5e-4),
        RewardTerm("joint_pos_limits", regularization.joint_pos_limits, "regularization", -100.0),
        RewardTerm("joint_vel_limits", regularization.joint_vel_limits, "regularization", -1.0, {"soft_factor": 0.9}),
        # (b) style.
        RewardTerm(
            "waist_yaw_deviation",
            style.waist_yaw_deviation,
            "style",
            -10.0,
            {"joint_ids": style.WAIST_YAW_IDS, "threshold": 1.4},
        ),
        RewardTerm(
            "hip_yaw_deviation", style.hip_yaw_deviation, "style", -10.0, {"joint_ids": style.HIP_YAW_IDS, **hip}
        ),
        RewardTerm(
            "hip_roll_deviation", style.hip_roll_deviation, "style", -10.0, {"joint_ids": style.HIP_ROLL_IDS, **hip}
        ),
        RewardTerm(
            "knee_deviation",
            style.knee_deviation,
            "style",
            ter.knee_deviation_weight,
            {"joint_ids": style.KNEE_IDS, "max_threshold": 2.85, "min_threshold": -0.06},
        ),
        RewardTerm(
            "shoulder_roll_deviation",
            style.shoulder_roll_deviation,
            "style",
            -2.5,
            {"joint_ids": style.SHOULDER_ROLL_IDS, "threshold": 0.02},
        ),
        RewardTerm(
            "foot_displacement",
            style.foot_displacement,
            "style",
            2.5,
            {"scale": 2.0, "min_sq_distance": 0.3, "max_foot_height": 0.3, **h2},
        ),
        RewardTerm("ankle_parallel", style.ankle_parallel, "style", 20.0, {"scale": 10.0, "threshold": 0.05}),
        RewardTerm("feet_distance", style.feet_distance, "style", -10.0, {"threshold": 0.9}),
        RewardTerm("shank_orientation", style.shank_orientation, "style", 10.0, tol),
        RewardTerm("base_ang_vel", style.base_ang_vel, "style", pos.style_ang_vel_weight, {"scale": 2.0, **h1}),
    ]
    if pos.prone_terms:
        terms = [t for t in terms if t.key not in ("style/ankle_parallel", "style/shank_orientation")]
        terms += [
            RewardTerm(
                "hip_pitch_deviation",
                style.hip_pitch_deviation,
                "style",
                -10.0,
                {"joint_ids": style.HIP_PITCH_IDS, "max_threshold": 2.5, "min_threshold": 1.6},
            ),
            RewardTerm("thigh_orientation", style.thigh_orientation, "style", 10.0, tol),
        ]
    if ter.feet_stumble:
        terms.append(RewardTerm("feet_stumble", style.feet_stumble, "style", -25.0, {"ratio": 3.0}))
    if ter.lower_body_deviation:
        terms.append(RewardTerm("lower_body_deviation", style.lower_body_deviation, "style", 1.0, {"scale": 2.0}))
    # (d) post-task: every term gated by 1(h > H2).
    terms += [
        RewardTerm("ang_vel_xy", post_task.ang_vel_xy, "post_task", 10.0, {"scale": 2.0, **h2}),
        RewardTerm("lin_vel_xy", post_task.lin_vel_xy, "post_task", 10.0, {"scale": 5.0, **h2}),
        RewardTerm("orientation", post_task.orientation, "post_task", 10.0, {"scale": 5.0, **h2}),
        RewardTerm(
            "base_height", post_task.base_height, "post_task", 10.0, {"target": ter.target_height, "scale": 20.0, **h2}
        ),
        RewardTerm(
            "upper_body_posture",
            post_task.upper_body_posture,
            "post_task",
            10.0,
            {"joint_ids": post_task.UPPER_BODY_IDS, "target": post_task.UPPER_BODY_TARGET, "scale": 0.1, **h2},
        ),
        RewardTerm(
            "feet_height_diff", post_task.feet_height_diff, "post_task", 2.5, {"scale": 20.0, "min_diff": 0.02, **h2}
        ),
    ]
    if pos.prone_terms:
        terms.append(
            RewardTerm("lower_body_deviation", post_task.lower_body_deviation, "post_task", 10.0, {"scale": 2.0, **h2})
        )
    return terms


__all__ = [
    "GROUPS",
    "GROUP_WEIGHTS",
    "POSTURE_REWARDS",
    "REWARD_GROUPS",
    "TERRAIN_REWARDS",
    "standup_reward_terms",
]
