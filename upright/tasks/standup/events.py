"""The standup task's event terms (before the physics steps of each env step) and its curriculum term.

- :func:`torso_wrench`: the curriculum's upward pull on the torso once actuated and the pelvis near upright, and
  the terrain's push along world x during the unactuated phase (``env.passive_push_force``; wall and slope);
- :func:`actuation_randomization`: the randomiser's per-step actuation (Kp/Kd factors, motor strength, torque
  offset, action delay, pushes; :class:`~upright.tasks.standup.randomization.StandupRandomizer`);
- :func:`pull_force_curriculum`: HoST's pull-force and β curricula, stepped for the envs whose episode ended.
"""

from __future__ import annotations

import torch


def torso_wrench(env, ctrl: torch.Tensor) -> torch.Tensor:
    """Set the torso's wrench for this env step from the state at its start, gated per env (N): pull force +z and
    push force +x, world frame, N; skips the backend call when no force is applied now or before. Returns ``ctrl``."""
    actuated = env._actuated()
    force = env.curriculum.pull_force(env.state.projected_gravity, actuated)
    push = torch.where(actuated, 0.0, float(env.cfg.passive_push_force))
    if force.any() or push.any() or env.pull_force.any() or env.push_force.any():
        wrench = torch.zeros(env.num_envs, 1, 6, device=env.device)
        wrench[:, 0, 0] = push
        wrench[:, 0, 2] = force
        env.sim.set_body_wrench([env._torso_body], wrench)
    env.pull_force, env.push_force = force, push
    return ctrl


def actuation_randomization(env, ctrl: torch.Tensor) -> torch.Tensor:
    """The randomiser's actuation for this env step from ``ctrl`` (N, 29) PD targets, rad: ``ctrl`` itself (N, 29)
    when no delay is drawn anywhere, else (decimation, N, 29) delayed per-substep targets, rad; torque dropout and
    pushes applied (:meth:`~upright.tasks.standup.randomization.StandupRandomizer.before_physics`)."""
    return env.randomizer.before_physics(ctrl, env.action_term.applied(env))


def pull_force_curriculum(env, env_ids: torch.Tensor, state) -> None:
    """HoST's curricula for the (M,) envs whose episode ended, from their head height at the last step."""
    env.curriculum.on_reset(env_ids, state.head_height[env_ids])
