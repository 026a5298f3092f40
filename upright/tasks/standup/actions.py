"""The standup task's action term: joint position targets of the G1's 23 policy joints.

``env.action_mode=relative`` (HoST): p_target = q + β·a, q the measured angles at the start of the env step;
``absolute``: p_target = q0 + β·a about the default pose q0. The action is clipped to ±``env.action_clip`` first
and is ignored (0, targets at the measured q) while an env is not actuated (the unactuated start after a reset,
:meth:`~upright.tasks.standup.env.StandupEnv._actuated`). The 6 held joints target their default angles. The
targets are computed once per env step and held while the motors' PD runs (MuJoCo ``position`` actuators).
"""

from __future__ import annotations

import torch

from upright.managers.action import ActionTerm

ACTION_MODES = ("relative", "absolute")
"""Values of ``env.action_mode`` of the standup task."""


class G1JointPositionAction(ActionTerm):
    """Position targets for the G1's policy joints (module docstring).

    Args:
        mode: ``relative`` or ``absolute``.
        num_actions: policy joints J (23).

    Raises:
        ValueError: an unknown ``mode``.
    """

    def __init__(self, mode: str, num_actions: int):
        if mode not in ACTION_MODES:
            raise ValueError(f"env.action_mode must be 'relative' (HoST) or 'absolute', got {mode!r}")
        self.mode = mode
        self.num_actions = num_actions
        self._applied: torch.Tensor | None = None

    def process(self, env, actions: torch.Tensor) -> torch.Tensor:
        """(N, 29) targets of every G1 joint, rad; updates the env's ``actions``, ``last_actions``,
        ``last_last_actions``, ``prev_dq`` and ``p_target`` (N, 23)."""
        if tuple(actions.shape) != (env.num_envs, self.num_actions):
            raise ValueError(
                f"actions must be (N, {self.num_actions}) = ({env.num_envs}, {self.num_actions}), "
                f"got {tuple(actions.shape)}"
            )
        a = actions.to(env.device).clamp(-env.cfg.action_clip, env.cfg.action_clip)
        actuated = env._actuated().unsqueeze(-1)
        a = torch.where(actuated, a, torch.zeros_like(a))
        env.last_last_actions.copy_(env.last_actions)
        env.last_actions.copy_(env.actions)
        env.actions.copy_(a)
        env.prev_dq = env.state.dq
        q_policy = env.state.q
        beta = env.beta.unsqueeze(-1)
        if self.mode == "absolute":  # the unactuated phase stays limp: targets at the measured angles
            default = env.default_pose[env._policy_ids]
            env.p_target = torch.where(actuated, default + beta * a, q_policy)
        else:
            env.p_target = q_policy + beta * a
        ctrl = env.default_pose.expand(env.num_envs, -1).clone()
        ctrl[:, env._policy_ids] = env.p_target
        self._applied = actuated.squeeze(-1)
        return ctrl

    def applied(self, env) -> torch.Tensor | None:
        """(N,) bool: False in the envs whose action was ignored (unactuated start)."""
        return self._applied
