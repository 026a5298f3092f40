"""HoST's per-step actor observation (76-D for the 23 policy joints) as named terms.

Each term is a function of :class:`~upright.tasks.standup.state.StandupState` returning an unscaled
(N, D) float32 tensor. :data:`OBSERVATION_TERMS` lists them in order with HoST's scales and noise
(HoST ``compute_observations``; noise from paper Table VIII). The same table is written into the ONNX
metadata so a deployed policy rebuilds exactly this vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from upright.tasks.standup.state import StandupState


def base_ang_vel(state: StandupState) -> torch.Tensor:
    """(N, 3) pelvis IMU angular velocity, base frame, rad/s."""
    return state.base_ang_vel


def projected_gravity(state: StandupState) -> torch.Tensor:
    """(N, 3) unit gravity in the base frame (dimensionless)."""
    return state.projected_gravity


def joint_pos(state: StandupState) -> torch.Tensor:
    """(N, J) absolute joint positions (not minus the default pose, as in HoST), rad."""
    return state.q


def joint_vel(state: StandupState) -> torch.Tensor:
    """(N, J) joint velocities, rad/s."""
    return state.dq


def last_action(state: StandupState) -> torch.Tensor:
    """(N, J) the action applied in the last env step (dimensionless)."""
    return state.action


def action_scale(state: StandupState) -> torch.Tensor:
    """(N, 1) the action scale β."""
    return state.beta.unsqueeze(-1)


@dataclass(frozen=True)
class ObservationTerm:
    """One observation term: ``scale * func(state) + U(-noise, noise)``."""

    name: str
    """Term name (written into the ONNX metadata)."""
    func: Callable[[StandupState], torch.Tensor]
    """Returns the unscaled (N, D) term."""
    scale: float
    """Multiplier applied before noise."""
    noise: float
    """Half-width of the uniform noise added to the *scaled* value."""


OBSERVATION_TERMS: tuple[ObservationTerm, ...] = (
    ObservationTerm("base_ang_vel", base_ang_vel, 0.25, 0.2 * 0.25),  # ±0.2 rad/s raw
    ObservationTerm("projected_gravity", projected_gravity, 1.0, 0.05),
    ObservationTerm("joint_pos", joint_pos, 1.0, 0.01),
    ObservationTerm("joint_vel", joint_vel, 0.05, 1.5 * 0.05),  # ±1.5 rad/s raw
    ObservationTerm("last_action", last_action, 1.0, 0.0),
    ObservationTerm("action_scale", action_scale, 1.0, 0.025),
)
"""HoST's actor observation terms, in order (HoST spec §2, paper Table VIII)."""

HISTORY_LENGTH = 6
"""Frames stacked, oldest first (HoST ``num_actor_history``; the paper's "History5")."""

OBS_CLIP = 100.0
"""Observations are clipped to ±100 (HoST ``clip_observations``)."""


def compute_observation(
    state: StandupState, noise: bool, generator: torch.Generator | None = None, noise_scale: float = 1.0
) -> torch.Tensor:
    """Concatenate the scaled (and optionally noised) terms into one (N, 76) float32 frame.

    Args:
        state: current state.
        noise: add the uniform noise of each term.
        generator: optional torch RNG for the noise (any device: the noise is drawn on the generator's device and
            moved to the state's); None draws from torch's global RNG.
        noise_scale: multiplier of every term's noise half-width (``env.disturbance.obs_noise_scale``; 1 = HoST).
    """
    parts = []
    for term in OBSERVATION_TERMS:
        value = term.func(state) * term.scale
        if noise and term.noise > 0 and noise_scale > 0:
            rng_device = generator.device if generator is not None else value.device
            u = torch.rand(value.shape, generator=generator, device=rng_device).to(value.device) * 2.0 - 1.0
            value = value + (noise_scale * term.noise) * u
        parts.append(value)
    return torch.cat(parts, dim=-1).clamp(-OBS_CLIP, OBS_CLIP)


def observation_dims(num_joints: int) -> list[int]:
    """Width of each term for ``num_joints`` policy joints (76 total for 23 joints)."""
    return [3, 3, num_joints, num_joints, num_joints, 1]
