"""The per-env-step state that the lift task's observation, reward, termination and curriculum terms read.

The env fills one :class:`LiftState` per env step from the physics backend (all envs at once, torch float32 unless
noted); unit tests build one by hand (:meth:`LiftState.zeros`). N = envs. World frame: z up, the robot base at the
origin, the floor (the table top) at z = 0. Joint order :data:`upright.robots.panda.JOINT_NAMES` (7 arm hinges in
rad, 2 finger slides in m); actuator order :data:`upright.robots.panda.ACTUATOR_NAMES`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from upright.robots import panda


@dataclass
class LiftState:
    """State after an env step (or at reset). See the module docstring for frames and units."""

    q: torch.Tensor
    """(N, 9) joint positions: arm rad, fingers m."""
    dq: torch.Tensor
    """(N, 9) joint velocities: rad/s, m/s."""
    ctrl: torch.Tensor
    """(N, 8) actuator position targets now in force: arm rad, finger m."""
    action: torch.Tensor
    """(N, A) policy action of the last env step (dimensionless, in [-1, 1]; A = 8, or 4 with ``ee_delta``)."""
    last_action: torch.Tensor
    """(N, A) the action before it."""
    home_q: torch.Tensor
    """(9,) home joint positions (:data:`upright.robots.panda.HOME_QPOS`)."""
    gripper_pos: torch.Tensor
    """(N, 3) gripper site (between the fingertips), m."""
    gripper_quat: torch.Tensor
    """(N, 4) gripper site orientation (w, x, y, z)."""
    fingertip_pos: torch.Tensor
    """(N, 2, 3) left, right fingertip pad centres, m."""
    cube_pos: torch.Tensor
    """(N, 3) cube centre, m."""
    cube_quat: torch.Tensor
    """(N, 4) cube orientation (w, x, y, z)."""
    target_pos: torch.Tensor
    """(N, 3) lift target for the cube centre, m."""
    cube_start: torch.Tensor
    """(N, 3) cube centre at the start of the episode, m (resting on the floor)."""
    pad_contact: torch.Tensor
    """(N, 2) bool: the left, right finger pad touches the cube (MuJoCo contact sensors, last physics substep)."""
    floor_contact: torch.Tensor
    """(N,) bool: the hand capsule or a fingertip pad touched the floor in the last physics substep."""
    reached: torch.Tensor
    """(N,) bool: the gripper site has come within the reach threshold of the cube centre this episode (latched;
    Playground's ``reached_box``)."""
    episode_step: torch.Tensor
    """(N,) int64 env steps since the episode began."""
    command_site: torch.Tensor | None = None
    """(N, 3) the gripper site at the arm's position targets (forward kinematics of ``ctrl``), world frame, m; filled
    only with ``env.ee_observe_lead`` (None otherwise)."""

    @property
    def num_envs(self) -> int:
        """N."""
        return self.q.shape[0]

    @property
    def gripper_to_cube(self) -> torch.Tensor:
        """(N, 3) cube centre minus gripper site, m."""
        return self.cube_pos - self.gripper_pos

    @property
    def grasped(self) -> torch.Tensor:
        """(N,) bool: both finger pads touch the cube (ManiSkill's ``is_grasping`` test, by contact)."""
        return self.pad_contact.all(dim=-1)

    @property
    def cube_lift(self) -> torch.Tensor:
        """(N,) height of the cube centre above its start, m."""
        return self.cube_pos[:, 2] - self.cube_start[:, 2]

    @property
    def cube_to_target(self) -> torch.Tensor:
        """(N, 3) target minus cube centre, m."""
        return self.target_pos - self.cube_pos

    @classmethod
    def zeros(cls, num_envs: int, device: str | torch.device = "cpu") -> LiftState:
        """A state at home with the cube and target at the origin, identity orientations, for building test cases."""
        n = num_envs
        z = lambda *s: torch.zeros(*s, device=device)  # noqa: E731
        home = torch.tensor(panda.HOME_QPOS, dtype=torch.float32, device=device)
        ident = torch.tensor([1.0, 0.0, 0.0, 0.0], device=device).expand(n, 4).clone()
        return cls(
            q=home.expand(n, 9).clone(),
            dq=z(n, 9),
            ctrl=torch.tensor(panda.HOME_CTRL, device=device).expand(n, 8).clone(),
            action=z(n, 8),
            last_action=z(n, 8),
            home_q=home,
            gripper_pos=z(n, 3),
            gripper_quat=ident.clone(),
            fingertip_pos=z(n, 2, 3),
            cube_pos=z(n, 3),
            cube_quat=ident.clone(),
            target_pos=z(n, 3),
            cube_start=z(n, 3),
            pad_contact=torch.zeros(n, 2, dtype=torch.bool, device=device),
            floor_contact=torch.zeros(n, dtype=torch.bool, device=device),
            reached=torch.zeros(n, dtype=torch.bool, device=device),
            episode_step=torch.zeros(n, dtype=torch.int64, device=device),
        )
