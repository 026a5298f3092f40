"""HoST's per-step actor observation (76-D for the 23 policy joints) as named terms of
:class:`upright.managers.observation.ObservationTerm`.

Each term is a function of :class:`~upright.tasks.standup.state.StandupState` returning an unscaled
(N, D) float32 tensor. :data:`OBSERVATION_TERMS` lists them in order with HoST's scales and noise
(HoST ``compute_observations``; noise from paper Table VIII). The same table is written into the ONNX
metadata so a deployed policy rebuilds exactly this vector. :func:`observation_frame` builds one frame with
:func:`upright.managers.observation.compute_frame` and zeroes it during the unactuated start; the env stacks
:data:`HISTORY_LENGTH` of them in an :class:`upright.managers.observation.ObservationHistory`.
"""

from __future__ import annotations

import torch

from upright.managers.observation import ObservationTerm, compute_frame
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
    return [3, 3, num_joints, num_joints, num_joints, 1]
