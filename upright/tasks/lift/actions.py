"""The lift task's action term: moves the Panda's 8 position targets (7 arm joints, the finger) each env step.

- ``env.action_mode=delta`` (MuJoCo Playground ``PandaPickCube``): a ∈ [-1, 1]^8, ctrl ← clip(ctrl + 0.04·a, ctrl
  range), rad and m;
- ``ee_delta``: a ∈ [-1, 1]^4 moves the gripper site by ``ee_action_scale``·a[:3] m (world frame) through damped
  least-squares differential IK on the arm's targets (:class:`~upright.tasks.lift.ik.DifferentialIK`, with the
  anti-windup bounds ``ee_max_lead`` / ``ee_max_lead_down``) and the finger target by ``action_scale``·a[3] m; with
  ``ee_gravity_compensation`` the arm's targets sent to the actuators are q_c + g(q_c)/Kp.

The term reads and writes the env's ``ctrl`` (N, 8) (the commanded targets), ``actions`` and ``last_actions``. It is
not lift-specific past the Panda: a push task on the same arm reuses it with its own config.
"""

from __future__ import annotations

import numpy as np
import torch

from upright.managers.action import ActionTerm
from upright.robots import panda

ACTION_MODES = ("delta", "ee_delta")
"""Values of ``env.action_mode`` (:class:`~upright.tasks.lift.config.LiftEnvCfg`)."""


class PandaTargetAction(ActionTerm):
    """Delta position targets of the Panda, in joint space or at the gripper site (module docstring).

    Args:
        cfg: the env config (``action_mode``, ``action_scale``, ``action_clip``, ``ee_*``, ``curriculum``).
        model: the compiled scene (the IK's model; ``ee_delta`` only).
        device: torch device of the env.

    Raises:
        ValueError: an unknown ``cfg.action_mode``.
    """

    def __init__(self, cfg, model, device: torch.device):
        if cfg.action_mode not in ACTION_MODES:
            raise ValueError(f"env.action_mode must be one of {list(ACTION_MODES)}, got {cfg.action_mode!r}")
        self.cfg = cfg
        self.device = device
        self.num_ctrl = len(panda.ACTUATOR_NAMES)
        """Position targets (8: 7 arm joints, the finger)."""
        self.num_actions = self.num_ctrl if cfg.action_mode == "delta" else 4
        """Width of the policy's action: 8 (``delta``) or 4 (``ee_delta``: site dx, dy, dz, finger)."""
        self.ik = None
        if cfg.action_mode == "ee_delta":
            from upright.tasks.lift.ik import DifferentialIK

            self.ik = DifferentialIK(model)
        self.kp_arm = torch.tensor(panda.KP[:7], device=device)
        """(7,) nominal arm Kp, N·m/rad (gravity compensation divides by it)."""
        self._frames: tuple | None = None
        """:meth:`ctrl_frames` of the arm targets ``_frames_ctrl`` (numpy), kept between env steps: the next IK step
        and the ``ee_lead`` observation read the same frames."""
        self._frames_ctrl: torch.Tensor | None = None

    def process(self, env, actions: torch.Tensor) -> torch.Tensor:
        """(N, 8) targets sent to the actuators (:meth:`applied_ctrl` of the new ``env.ctrl``)."""
        if tuple(actions.shape) != (env.num_envs, self.num_actions):
            raise ValueError(
                f"actions must be (N, {self.num_actions}) = ({env.num_envs}, {self.num_actions}) for "
                f"env.action_mode={self.cfg.action_mode}, got {tuple(actions.shape)}"
            )
        a = actions.to(self.device, torch.float32).clamp(-self.cfg.action_clip, self.cfg.action_clip)
        env.last_actions.copy_(env.actions)
        env.actions.copy_(a)
        env.ctrl = torch.minimum(torch.maximum(env.ctrl + self.ctrl_step(env, a), env.ctrl_lower), env.ctrl_upper)
        return self.applied_ctrl(env, env.ctrl)

    def applied_ctrl(self, env, ctrl: torch.Tensor) -> torch.Tensor:
        """(M, 8) position targets sent to the actuators for commanded targets ``ctrl`` (M, 8): ``ctrl`` itself, or
        with ``env.ee_gravity_compensation`` the arm's q_c + g(q_c) / Kp clipped to the control range."""
        if self.ik is None or not self.cfg.ee_gravity_compensation:
            return ctrl
        out = ctrl.clone()
        out[:, :7] += self.ik.gravity_torques(ctrl[:, :7], ctrl[:, 7]) / self.kp_arm
        return torch.minimum(torch.maximum(out, env.ctrl_lower), env.ctrl_upper)

    def ctrl_step(self, env, actions: torch.Tensor) -> torch.Tensor:
        """(N, 8) change of the position targets (rad, finger m) for clipped ``actions`` (N, A), before the clip to
        the control range."""
        cfg = self.cfg
        if self.ik is None:
            return cfg.action_scale * actions
        step = torch.zeros(actions.shape[0], self.num_ctrl, device=self.device)
        translation, frames = cfg.ee_action_scale * actions[:, :3], self.ctrl_frames(env)
        if cfg.ee_max_lead is not None or cfg.ee_max_lead_down is not None:  # anti-windup (config docstrings)
            from upright.tasks.lift.ik import bound_lead, bound_lead_down

            measured = env.state.gripper_pos.detach().cpu().double().numpy()  # the site as MuJoCo measured it
            d = translation.detach().cpu().double().numpy()
            if cfg.ee_max_lead is not None:  # the command stays near the measured hand
                d = bound_lead(frames[0], measured, d, cfg.ee_max_lead)
            if cfg.ee_max_lead_down is not None:  # one-sided: the command not far below the hand
                down = bound_lead_down(frames[0], measured, d, cfg.ee_max_lead_down)
                gate = cfg.curriculum.ee_max_lead_down_level
                if cfg.curriculum.enabled and gate > 0.0:  # only the envs that have reached the gate's level
                    down = np.where((env.curriculum.level >= gate).cpu().numpy()[:, None], down, d)
                d = down
            translation = torch.as_tensor(d, dtype=torch.float32, device=self.device)
        step[:, :7] = self.ik.joint_step(env.ctrl[:, :7], translation, cfg.ee_min_height, frames=frames)
        step[:, 7] = cfg.action_scale * actions[:, 3]
        return step

    def ctrl_frames(self, env) -> tuple:
        """Site positions (N, 3) m, orientations (N, 3, 3) and arm Jacobians (N, 6, 7) at the arm's position targets
        ``env.ctrl[:, :7]`` (``ee_delta``; :meth:`~upright.tasks.lift.ik.DifferentialIK.site_frames`, float64
        numpy), recomputed only for the envs whose targets changed since the last call."""
        q = env.ctrl[:, :7].detach()
        if self._frames is None or self._frames_ctrl.shape != q.shape:
            changed = torch.ones(q.shape[0], dtype=torch.bool, device=q.device)
        else:
            changed = (q != self._frames_ctrl).any(dim=1)
        if bool(changed.all()):
            self._frames = tuple(np.array(a) for a in self.ik.site_frames(q.cpu().double().numpy()))
        elif bool(changed.any()):
            ids = changed.nonzero().squeeze(1).cpu().numpy()
            for full, part in zip(self._frames, self.ik.site_frames(q[changed].cpu().double().numpy())):
                full[ids] = part
        self._frames_ctrl = q.clone()
        return self._frames
