"""Observation terms of the get-up MDP and the state they read.

Actor (mujocolab/mjlab_playground ``g1-getup``, ``getup_env_cfg.py`` and ``config/g1/env_cfgs.py``; noise is uniform
and additive, on only in training): pelvis gyro (±0.2 rad/s), projected gravity (±0.05), joint positions as the
encoders report them, i.e. with a per-env constant encoder bias (±0.03 rad), joint velocities (±1.5 rad/s) and the
last action. The actor's terms are the standup task's own functions (the neutral terms of
:mod:`upright.policy_io.obs_terms`), with scale 1, so the deploy daemon builds them from the robot's readings as it does
for HoST's policies; every term names the G1 sensor behind it (:data:`ACTOR_SENSORS`, from the neutral terms).

Two differences from mjlab_playground, both from the robot: its 29-DoF G1 observes the TORSO's projected gravity
because its waist's roll and pitch decouple torso and pelvis; upright's policy drives the 23 joints of HoST's G1, whose
waist roll and pitch are held, so the torso's gravity is the pelvis IMU's rotated by the waist yaw the policy already
observes, and the pelvis IMU (the G1's main IMU) gives it. Joint positions are absolute (HoST's term) rather than minus
the default pose: a constant offset that the actor's observation normalisation removes.

Critic: noise-free and bias-free, with the torso's projected gravity and the pelvis's linear velocity (simulator
state; the critic is not exported). One frame, no history.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from upright.managers.observation import ObservationTerm
from upright.policy_io import obs_terms
from upright.tasks.standup.state import StandupState


@dataclass
class GetupState(StandupState):
    """:class:`~upright.tasks.standup.state.StandupState` plus what the get-up terms read (N envs, J = 23)."""

    torso_pos: torch.Tensor
    """(N, 3) torso_link origin, world frame, m (``framepos`` sensor ``torso_pos``)."""
    torso_projected_gravity: torch.Tensor
    """(N, 3) unit gravity in the torso IMU frame (site ``imu_in_torso``); (0, 0, -1) when the torso is upright."""
    q_encoder: torch.Tensor
    """(N, J) joint positions as the encoders report them (true q + the env's encoder bias), rad."""
    default_q: torch.Tensor
    """(J,) default joint angles of the policy joints, rad."""
    self_collision_force: torch.Tensor
    """(N,) largest self-contact force magnitude at the last physics substep, N (``contact`` sensor
    ``self_collision``: the pelvis subtree against itself)."""

    def as_measured(self) -> GetupState:
        """This state with ``q`` as the encoders report it (``q_encoder``): what the actor observes."""
        return dataclasses.replace(self, q=self.q_encoder)

    @property
    def torso_tilt_error(self) -> torch.Tensor:
        """(N,) |g_torso - (0, 0, -1)|² (0 upright, 4 upside down; dimensionless)."""
        g = self.torso_projected_gravity
        return g[:, 0] ** 2 + g[:, 1] ** 2 + (g[:, 2] + 1.0) ** 2


def torso_projected_gravity(state: GetupState) -> torch.Tensor:
    """(N, 3) unit gravity vector in the torso IMU frame (torso IMU orientation); (0, 0, -1) upright."""
    return state.torso_projected_gravity


def base_lin_vel(state: GetupState) -> torch.Tensor:
    """(N, 3) pelvis linear velocity, pelvis frame, m/s (simulator state; critic only)."""
    return state.base_lin_vel


def joint_pos_rel_true(state: GetupState) -> torch.Tensor:
    """(N, J) true joint positions minus the default pose, rad (critic)."""
    return state.q - state.default_q


ACTOR_TERMS: tuple[ObservationTerm, ...] = (
    ObservationTerm("base_ang_vel", obs_terms.base_ang_vel, 1.0, 0.2),
    ObservationTerm("projected_gravity", obs_terms.projected_gravity, 1.0, 0.05),
    ObservationTerm("joint_pos", obs_terms.joint_pos, 1.0, 0.03),
    ObservationTerm("joint_vel", obs_terms.joint_vel, 1.0, 1.5),
    ObservationTerm("last_action", obs_terms.last_action, 1.0, 0.0),
)
"""Actor terms in order, scale 1, noise half-widths of mjlab_playground ``g1-getup``; evaluated on the state as the
encoders report it (:meth:`GetupState.as_measured`)."""

_ACTOR_NAMES = tuple(t.name for t in ACTOR_TERMS)

CRITIC_TERMS: tuple[ObservationTerm, ...] = (
    ObservationTerm("base_ang_vel", obs_terms.base_ang_vel),
    ObservationTerm("torso_projected_gravity", torso_projected_gravity),
    ObservationTerm("joint_pos_rel", joint_pos_rel_true),
    ObservationTerm("joint_vel", obs_terms.joint_vel),
    ObservationTerm("last_action", obs_terms.last_action),
    ObservationTerm("base_lin_vel", base_lin_vel),
)
"""Critic terms in order: true joint positions relative to the default pose, the torso's gravity and the pelvis's
linear velocity."""

ACTOR_SENSORS: dict[str, str] = {name: obs_terms.TERMS_BY_NAME[name].sensor for name in _ACTOR_NAMES}
"""The G1 sensor behind each actor term."""

OBS_CLIP = 100.0
"""Observations are clipped to ±100 (as the standup task)."""


def observation_dims(num_joints: int) -> list[int]:
    """Width of each actor term for ``num_joints`` policy joints (3 + 3 + 3·J: 75 for 23 joints)."""
    return obs_terms.term_widths(_ACTOR_NAMES, num_joints)
