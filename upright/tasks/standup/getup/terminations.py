"""Termination terms of the get-up MDP (besides the standup env's velocity explosion and time-out).

mujocolab/mjlab_playground's get-up episodes end only on time-out. :func:`fell_after_rise` is upright's optional
addition (``env.getup.fall_termination``): it ends an episode at the event that makes it a failure under HoST's ground
criterion (pelvis above 0.7 m, then below 0.5 m; HoST spec §7, ``scripts/eval/eval_*.py`` of InternRobotics/HoST).
Without it, sitting back down and rising again is a cheap detour
under the get-up reward (``docs/experiments/2026-11-27_getup_plateau_levers.md`` §1).
"""

from __future__ import annotations

import torch

from upright.tasks.standup.state import StandupState


def fell_after_rise(
    state: StandupState, rose: torch.Tensor, unknown_start: torch.Tensor, fall_height: float = 0.5
) -> torch.Tensor:
    """Envs whose pelvis fell below ``fall_height`` after it had risen in an earlier step of the episode.

    Args:
        state: the state after the env step; ``state.base_pos[:, 2]`` is the pelvis height, m (world z, ground at 0).
        rose: (N,) bool, the episode's pelvis passed the success height (0.7 m on the ground) at an actuated step
            before this one (the env's ``host_above``, updated in place).
        unknown_start: (N,) bool, the episode clock was set from outside (rsl-rl's ``init_at_random_ep_len``; the env's
            ``clock_set``, updated in place): such an episode counts as actuated from its first step, so a dropped
            start "rises" at 0.8 m and would end on landing. These never end here.
        fall_height: m (HoST's ground criterion: 0.5 m).

    Returns:
        (N,) bool.
    """
    return rose & ~unknown_start & (state.base_pos[:, 2] < fall_height)
