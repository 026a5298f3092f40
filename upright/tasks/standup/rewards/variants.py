"""What the standup reward differs in per terrain and per posture (HoST's per-terrain configs, spec §3).

HoST trains one policy per terrain/posture, each config changing a few reward terms and weights of the
ground (supine) set. :data:`TERRAIN_REWARDS` holds the per-terrain values, :data:`PRONE_REWARDS` the
ground-prone changes (``cfg/g1_config_ground_prone.py``); :func:`upright.tasks.standup.rewards.standup_reward_terms`
builds the term list from them. Prone changes apply to every terrain that has a prone start (ground; upright's
slope-prone combines the slope and prone changes, an upright extension).
"""

from __future__ import annotations

from dataclasses import dataclass

from upright.tasks.standup.rewards.style import H_STAGE1, H_STAGE2


@dataclass(frozen=True)
class TerrainRewards:
    """Reward settings of one terrain (spec §3 in brackets)."""

    knee_deviation_weight: float
    """Weight of the knee-deviation indicator [§3(b)]: -0.25 ground, -10 platform, slope, wall."""
    feet_stumble: bool
    """Add feet stumble, -25 · 1(any foot |F_xy| > 3|F_z|) [§3(b)]: platform, slope, wall."""
    lower_body_deviation: bool
    """Add the style L/R-symmetry term ``style_lower_body_deviation``, +1 [§3(b)]: platform, wall."""
    target_height: float
    """Post-task target height, m [§3(d)]: 0.75 ground (platform: not stated, ground's), 0.725 wall, 0.70 slope."""
    stage1_height: float = H_STAGE1
    """H_stage1, m [§3]: 0.45; slope 0.4."""
    stage2_height: float = H_STAGE2
    """H_stage2, m [§3]: 0.65; slope 0.6."""
    relative_to_feet: bool = False
    """Stage gates and target height use pelvis z minus mean foot z instead of pelvis z [§3, §4]: slope."""


TERRAIN_REWARDS: dict[str, TerrainRewards] = {
    "ground": TerrainRewards(
        knee_deviation_weight=-0.25, feet_stumble=False, lower_body_deviation=False, target_height=0.75
    ),
    "platform": TerrainRewards(
        knee_deviation_weight=-10.0, feet_stumble=True, lower_body_deviation=True, target_height=0.75
    ),
    "wall": TerrainRewards(
        knee_deviation_weight=-10.0, feet_stumble=True, lower_body_deviation=True, target_height=0.725
    ),
    "slope": TerrainRewards(
        knee_deviation_weight=-10.0,
        feet_stumble=True,
        lower_body_deviation=False,
        target_height=0.70,
        stage1_height=0.4,
        stage2_height=0.6,
        relative_to_feet=True,
    ),
}
"""Per-terrain reward settings (keys: :data:`upright.tasks.standup.terrains.TERRAIN_NAMES`)."""


@dataclass(frozen=True)
class PostureRewards:
    """Reward changes of a start posture relative to supine (spec §3 "Ground-prone config")."""

    group_weights: tuple[float, float, float, float]
    """Advantage weights of (task, regularization, style, post_task): supine [2.5, 0.1, 1, 1], prone [1, 0.1, 1, 1]."""
    hip_max_threshold: float
    """Hip yaw/roll deviation: max_LR |q| threshold, rad (supine 1.4, prone 0.9)."""
    hip_min_threshold: float
    """Hip yaw/roll deviation: min_LR |q| threshold, rad (supine 0.9, prone 0.8)."""
    style_ang_vel_weight: float
    """Weight of the style base-angular-velocity term (supine 1, prone 25)."""
    prone_terms: bool
    """Prone: add hip-pitch deviation (-10), thigh orientation (+10, replacing shank orientation and ankle
    parallel) and post-task ``target_lower_body_deviation`` (+10)."""


POSTURE_REWARDS: dict[str, PostureRewards] = {
    "supine": PostureRewards(
        (2.5, 0.1, 1.0, 1.0), hip_max_threshold=1.4, hip_min_threshold=0.9, style_ang_vel_weight=1.0, prone_terms=False
    ),
    "prone": PostureRewards(
        (1.0, 0.1, 1.0, 1.0), hip_max_threshold=0.9, hip_min_threshold=0.8, style_ang_vel_weight=25.0, prone_terms=True
    ),
}
"""Per-posture reward settings (keys: :data:`upright.tasks.standup.terrains.POSTURE_NAMES`)."""
