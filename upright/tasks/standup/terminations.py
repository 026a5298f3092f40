"""Standup episode terminations: velocity explosion, time-out, and the terrain-specific falls.

HoST has no contact-based termination; on the ground an episode ends on a time-out (500 steps,
bootstrapped by the PPO) or when the simulation blows up after the unactuated phase. Platform, wall
and slope add height checks (:class:`TerrainTermination`, :func:`terrain_fall`).

Source: HoST's ``check_termination`` in ``legged_gym/legged_gym/envs/base/host_ground.py`` (InternRobotics/HoST at
commit 70bb580949a3), with the limits ``curriculum.dof_vel_limit`` / ``base_vel_limit`` of
``legged_gym/legged_gym/envs/g1/g1_config_ground.py`` and the height checks of HoST's platform, wall and slope variants;
Huang et al., "Learning Humanoid Standing-up Control across Diverse Postures", RSS 2025, arXiv 2502.08378.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from upright.tasks.standup.state import StandupState


def velocity_explosion(
    state: StandupState,
    max_joint_vel: float = 300.0,
    max_base_lin_vel: float = 20.0,
    unactuated_steps: int = 30,
) -> torch.Tensor:
    """Envs whose velocities blew up, checked only after the unactuated phase.

    True where ``state.episode_step > unactuated_steps`` AND (max_j |dq_j| > ``max_joint_vel`` rad/s OR
    |v_base| > ``max_base_lin_vel`` m/s, the full 3-D base linear velocity norm).

    Returns:
        (N,) bool.
    """
    exploded = (state.dq.abs().amax(dim=1) > max_joint_vel) | (state.base_lin_vel.norm(dim=1) > max_base_lin_vel)
    return exploded & (state.episode_step > unactuated_steps)


def time_out(episode_step: torch.Tensor, max_episode_length: int = 500) -> torch.Tensor:
    """Envs that reached the episode length: ``episode_step >= max_episode_length``.

    Args:
        episode_step: (N,) int, env steps taken so far in the episode (after the current step).
        max_episode_length: steps per episode (HoST 10 s / 0.02 s = 500).

    Returns:
        (N,) bool. With ``>=`` an episode lasts exactly ``max_episode_length`` steps (legged_gym's
        ``>`` would allow one more).
    """
    return episode_step >= max_episode_length


@dataclass(frozen=True)
class TerrainTermination:
    """Height checks of one terrain (HoST spec §7, ``check_termination`` of the terrain configs).

    Heights are world z, m, with the ground plane at z = 0; None disables a check. An env terminates
    when ANY enabled check fires.
    """

    base_z_min: float | None = None
    """Pelvis z below this (platform: 0.2 m, the robot fell off the box onto the ground)."""
    head_z_min: float | None = None
    """Head keyframe z below this (wall: 0.2 m, the robot slid down and lies flat)."""
    feet_z_max: float | None = None
    """Mean foot z above this (platform and wall: 0.35 m, the robot climbs the box or the ramp)."""
    base_above_feet_min: float | None = None
    """Pelvis z minus mean foot z below this (slope: -0.1 m, head-down on the slope)."""


GROUND_TERMINATION = TerrainTermination()
"""Ground: no height checks."""
PLATFORM_TERMINATION = TerrainTermination(base_z_min=0.2, feet_z_max=0.35)
"""Platform (spec §7): pelvis z < 0.2 m or mean foot z > 0.35 m."""
WALL_TERMINATION = TerrainTermination(head_z_min=0.2, feet_z_max=0.35)
"""Wall (spec §7): head z < 0.2 m or mean foot z > 0.35 m."""
SLOPE_TERMINATION = TerrainTermination(base_above_feet_min=-0.1)
"""Slope (spec §7): pelvis height relative to the feet < -0.1 m."""


def terrain_fall(state: StandupState, checks: TerrainTermination, unactuated_steps: int = 30) -> torch.Tensor:
    """Envs that fail a terrain height check, checked (like :func:`velocity_explosion`) only after the
    unactuated phase, i.e. where ``state.episode_step > unactuated_steps``; the robot is still settling
    under gravity before that (the spec does not say whether HoST gates these checks).

    Returns:
        (N,) bool.
    """
    base_z, head_z = state.base_pos[:, 2], state.head_pos[:, 2]
    feet_z = state.feet_pos[:, :, 2].mean(dim=1)
    fell = torch.zeros_like(base_z, dtype=torch.bool)
    if checks.base_z_min is not None:
        fell |= base_z < checks.base_z_min
    if checks.head_z_min is not None:
        fell |= head_z < checks.head_z_min
    if checks.feet_z_max is not None:
        fell |= feet_z > checks.feet_z_max
    if checks.base_above_feet_min is not None:
        fell |= (base_z - feet_z) < checks.base_above_feet_min
    return fell & (state.episode_step > unactuated_steps)
