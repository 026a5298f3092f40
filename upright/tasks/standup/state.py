"""The per-env-step robot state that the standup task's observation, reward and termination terms read.

The env fills one :class:`StandupState` per env step from the physics backend (all envs at once,
torch tensors). Unit tests build one by hand (:func:`StandupState.zeros`). Shapes use N = number of
envs and J = 23 policy joints (:data:`upright.robots.g1.POLICY_JOINT_NAMES` order). All tensors are
float32 unless noted. World frame is z-up with the floor at z = 0.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass
class StandupState:
    """Robot state after an env step (or at reset). See module docstring for N and J."""

    q: torch.Tensor
    """(N, J) joint positions, rad."""
    dq: torch.Tensor
    """(N, J) joint velocities, rad/s."""
    ddq: torch.Tensor
    """(N, J) joint accelerations, rad/s², finite difference of dq over one env step (0.02 s)."""
    tau: torch.Tensor
    """(N, J) actuator torques at the last physics substep, N·m."""
    p_target: torch.Tensor
    """(N, J) PD position targets applied during the last env step, rad (p_target = q + β·a)."""
    action: torch.Tensor
    """(N, J) policy action a_t (dimensionless, nominally in [-1, 1])."""
    last_action: torch.Tensor
    """(N, J) a_{t-1}."""
    last_last_action: torch.Tensor
    """(N, J) a_{t-2}."""
    q_soft_lower: torch.Tensor
    """(J,) soft lower position limits (0.9 x the URDF lower limit, HoST;
    :func:`upright.robots.g1.soft_position_limits`), rad."""
    q_soft_upper: torch.Tensor
    """(J,) soft upper position limits (0.9 x the URDF upper limit), rad."""
    dq_limit: torch.Tensor
    """(J,) joint velocity limits (URDF, not yet scaled by 0.9), rad/s."""
    base_pos: torch.Tensor
    """(N, 3) pelvis position, world frame, m."""
    base_quat: torch.Tensor
    """(N, 4) pelvis orientation quaternion (w, x, y, z), world frame."""
    base_lin_vel: torch.Tensor
    """(N, 3) pelvis linear velocity in the pelvis (base) frame, m/s."""
    base_ang_vel: torch.Tensor
    """(N, 3) pelvis angular velocity in the pelvis (base) frame (IMU gyro), rad/s."""
    projected_gravity: torch.Tensor
    """(N, 3) unit gravity vector in the base frame; (0, 0, -1) when upright."""
    head_pos: torch.Tensor
    """(N, 3) head keyframe position (torso + 0.45 m), world frame, m."""
    feet_pos: torch.Tensor
    """(N, 2, 3) left/right foot site positions, world frame, m."""
    knee_pos: torch.Tensor
    """(N, 2, 3) left/right knee joint positions, world frame, m."""
    hip_pos: torch.Tensor
    """(N, 2, 3) left/right hip-roll joint origins (upper end of the thigh), world frame, m."""
    ankle_pos: torch.Tensor
    """(N, 2, 3) left/right ankle-roll joint positions, world frame, m."""
    ankle_points: torch.Tensor
    """(N, 2, 5, 3) five points on each sole (ankle-roll origin + 4 corners), world frame, m."""
    feet_contact_force: torch.Tensor
    """(N, 2, 3) left/right net contact force on each foot, world frame, N (from the last physics substep;
    :mod:`upright.tasks.standup.foot_contact`). Standing on flat ground: about (0, 0, +weight share)."""
    beta: torch.Tensor
    """(N,) action scale β (implicit motion speed bound), starts at 1.0."""
    episode_step: torch.Tensor
    """(N,) int64 env steps since the episode started."""

    @property
    def num_envs(self) -> int:
        """Number of envs N."""
        return self.q.shape[0]

    @property
    def head_height(self) -> torch.Tensor:
        """(N,) head height above the mean foot height, m (HoST's head-height measure)."""
        return self.head_pos[:, 2] - self.feet_pos[:, :, 2].mean(dim=1)

    @property
    def base_height(self) -> torch.Tensor:
        """(N,) pelvis height z, m (HoST's stage thresholds use it on flat ground)."""
        return self.base_pos[:, 2]

    @property
    def base_height_above_feet(self) -> torch.Tensor:
        """(N,) pelvis z minus the mean foot-site z, m (HoST's slope stage thresholds and target height, spec §3)."""
        return self.base_pos[:, 2] - self.feet_pos[:, :, 2].mean(dim=1)

    @classmethod
    def zeros(cls, num_envs: int, num_joints: int = 23, device: str | torch.device = "cpu") -> StandupState:
        """A state of zeros (upright gravity, identity quaternion, β = 1) for building test cases."""
        n, j = num_envs, num_joints
        z = lambda *s: torch.zeros(*s, device=device)  # noqa: E731
        state = cls(
            q=z(n, j),
            dq=z(n, j),
            ddq=z(n, j),
            tau=z(n, j),
            p_target=z(n, j),
            action=z(n, j),
            last_action=z(n, j),
            last_last_action=z(n, j),
            q_soft_lower=torch.full((j,), -2.0, device=device),
            q_soft_upper=torch.full((j,), 2.0, device=device),
            dq_limit=torch.full((j,), 30.0, device=device),
            base_pos=z(n, 3),
            base_quat=z(n, 4),
            base_lin_vel=z(n, 3),
            base_ang_vel=z(n, 3),
            projected_gravity=z(n, 3),
            head_pos=z(n, 3),
            feet_pos=z(n, 2, 3),
            knee_pos=z(n, 2, 3),
            hip_pos=z(n, 2, 3),
            ankle_pos=z(n, 2, 3),
            ankle_points=z(n, 2, 5, 3),
            feet_contact_force=z(n, 2, 3),
            beta=torch.ones(n, device=device),
            episode_step=torch.zeros(n, dtype=torch.int64, device=device),
        )
        state.base_quat[:, 0] = 1.0
        state.projected_gravity[:, 2] = -1.0
        return state

    def field_names(self) -> list[str]:
        """Names of all tensor fields."""
        return [f.name for f in fields(self)]
