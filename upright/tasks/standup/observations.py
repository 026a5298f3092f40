"""HoST's per-step actor observation (76-D for the 23 policy joints) as named terms of
:class:`upright.managers.observation.ObservationTerm`.

Each term is a neutral function of :mod:`upright.policy_io.obs_terms` (the daemon evaluates the same functions on
numpy readings), here called on a :class:`~upright.tasks.standup.state.StandupState` and returning an unscaled
(N, D) float32 tensor. :data:`OBSERVATION_TERMS` lists them in order with HoST's scales and noise
(HoST ``compute_observations``; noise from paper Table VIII). The same table is written into the ONNX
metadata so a deployed policy rebuilds exactly this vector. :func:`observation_frame` builds one frame with
:func:`upright.managers.observation.compute_frame` and zeroes it during the unactuated start; the env stacks
:data:`HISTORY_LENGTH` of them in an :class:`upright.managers.observation.ObservationHistory`.
"""

from __future__ import annotations

import torch

from upright.managers.observation import ObservationTerm, compute_frame
from upright.policy_io.obs_terms import (
    action_scale,
    base_ang_vel,
    joint_pos,
    joint_vel,
    last_action,
    projected_gravity,
    term_widths,
)
from upright.tasks.standup.state import StandupState

OBSERVATION_TERMS: tuple[ObservationTerm, ...] = (
    ObservationTerm("base_ang_vel", base_ang_vel, 0.25, 0.2 * 0.25),  # ±0.2 rad/s raw
    ObservationTerm("projected_gravity", projected_gravity, 1.0, 0.05),
    ObservationTerm("joint_pos", joint_pos, 1.0, 0.01),
    ObservationTerm("joint_vel", joint_vel, 0.05, 1.5 * 0.05),  # ±1.5 rad/s raw
    ObservationTerm("last_action", last_action, 1.0, 0.0),
    ObservationTerm("action_scale", action_scale, 1.0, 0.025),
)
"""HoST's actor observation terms, in order (HoST spec §2, paper Table VIII)."""

_TERM_NAMES = tuple(t.name for t in OBSERVATION_TERMS)

HISTORY_LENGTH = 6
"""Frames stacked, oldest first (HoST ``num_actor_history``; the paper's "History5")."""

OBS_CLIP = 100.0
"""Observations are clipped to ±100 (HoST ``clip_observations``)."""


def observation_frame(
    state: StandupState, passive: torch.Tensor, noise_scale: float = 0.0, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One (N, 76) float32 frame of :data:`OBSERVATION_TERMS` (scaled, noised, clipped to ±:data:`OBS_CLIP`), zero in
    the envs still in their unactuated start (HoST pushes zero frames then).

    Args:
        state: current state.
        passive: (N,) bool, the envs whose episode has not yet reached ``env.unactuated_steps``.
        noise_scale: multiplier of every term's noise half-width (0: no noise; 1 = HoST;
            ``env.disturbance.obs_noise_scale`` sets others).
        generator: torch RNG of the noise (any device: drawn on the generator's device and moved to the state's);
            None draws from torch's global RNG.
    """
    frame = compute_frame(OBSERVATION_TERMS, state, noise_scale, generator, OBS_CLIP)
    return torch.where(passive.unsqueeze(-1), torch.zeros_like(frame), frame)


def observation_dims(num_joints: int) -> list[int]:
    """Width of each term for ``num_joints`` policy joints (76 total for 23 joints)."""
    return term_widths(_TERM_NAMES, num_joints)


def history_frame(env) -> torch.Tensor:
    """The env's current (N, 76) frame (:func:`observation_frame`): zero in its unactuated start, noised with the
    randomiser's scale (0 with ``env.obs_noise=false``) from the env's generator."""
    scale = env.randomizer.obs_noise_scale(bool(env.cfg.obs_noise))
    passive = env.episode_length_buf < env.cfg.unactuated_steps
    return observation_frame(env.state, passive, scale, env.rng)
