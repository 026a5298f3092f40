"""Standup episode terminations (HoST ground): velocity explosion and time-out.

HoST has no contact-based termination on the ground; an episode ends on a time-out (500 steps,
bootstrapped by the PPO) or when the simulation blows up after the unactuated phase.

Source: HoST spec section 7 (``/work/shared/reference/host_standup.md``), ``check_termination``.
"""

from __future__ import annotations

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
