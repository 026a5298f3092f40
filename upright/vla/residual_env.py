"""The env side of residual RL (:mod:`upright.vla.residual`): :class:`ResidualEnv`, the lift env whose actions are
residuals on a frozen base policy queried once per env step."""

from __future__ import annotations

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from upright.policy_io.residual_base import ResidualCfg, check_residual_cfg
from upright.vla.policy import ChunkPolicy

BASE_ACTION_TERM = "base_action"
"""Name of the observation term appended for the residual (the base's action of this step, (A,) in [-1, 1])."""


class ResidualEnv(VecEnv):
    """rsl-rl ``VecEnv`` over a lift env whose actions are residuals on a frozen base policy
    (:mod:`upright.vla.residual`).

    Observations: the env's groups, with ``actor`` and ``critic`` extended by the base's action of this step:
    (N, D + A) float32. Actions: (N, A) residuals in [-1, 1]; the env receives ``clip(a_base + α a_res)``.

    Args:
        env: the lift env (:class:`~upright.tasks.lift.env.LiftEnv`).
        base: the frozen base policy (``action_convention`` ``"delta"``, ``action_dim`` = the env's); a
            :class:`~upright.vla.remote.RemotePolicy` is asked, each step, only for the envs that need a new chunk.
        spec: the base's inputs as :func:`upright.vla.evaluate_lift.load_chunk_policy` describes them.
        cfg: α and its ramp, the instruction (:class:`ResidualCfg`).
        steps_per_iteration: env steps per training iteration (turns ``alpha_ramp_iterations`` into env steps).

    Raises:
        ValueError: a base with absolute actions or another action size, or a base reading cameras the env does not
            render (the message names the fix).
    """

    def __init__(self, env, base: ChunkPolicy, spec: dict, cfg: ResidualCfg, steps_per_iteration: int = 24):
        from upright.tasks.lift.vla_io import TASK

        check_residual_cfg(cfg, "lift")
        if getattr(base, "action_convention", "delta") != "delta":
            raise ValueError(
                "policy.base has absolute actions; the residual hook needs a base with delta actions "
                "(the lift env's convention): retrain it with upright.vla.train_bc"
            )
        if int(base.action_dim) != int(env.num_actions):
            raise ValueError(f"policy.base outputs {base.action_dim} actions, the env takes {env.num_actions}")
        cams = list(spec.get("cameras", []))
        if cams and not env.cfg.camera.enabled:
            raise ValueError(
                f"policy.base reads cameras {cams}: add env.camera.enabled=true env.camera.cameras=[{','.join(cams)}]"
            )
        self.env, self.base, self.spec, self.rcfg = env, base, spec, cfg
        self.instruction = cfg.instruction or TASK
        self.num_envs, self.num_actions = env.num_envs, env.num_actions
        self.max_episode_length, self.device, self.cfg = env.max_episode_length, env.device, env.cfg
        self.action_clip = float(env.cfg.action_clip)
        self.ramp_steps = int(cfg.alpha_ramp_iterations) * int(steps_per_iteration)
        self.env_steps = 0
        """Env steps taken so far (α's ramp reads it)."""
        if cfg.n_action_steps is not None:
            base.n_action_steps = int(cfg.n_action_steps)
        if cfg.temporal_ensemble is not None:
            base.temporal_ensemble_coeff = float(cfg.temporal_ensemble)
        self._order = list(env.cfg.camera.cameras)
        self.base.reset()
        self.base_action = torch.zeros(self.num_envs, self.num_actions, device=self.device)
        """(N, A) the base's action for the current step, in [-1, 1]."""
        self._query_base(env.get_observations())

    # ------------------------------------------------------------------ α and the base
    @property
    def alpha(self) -> float:
        """α now: ``alpha_start`` rising linearly to ``alpha`` over the ramp, then ``alpha``."""
        hi = float(self.rcfg.alpha)
        lo = hi if self.rcfg.alpha_start is None else float(self.rcfg.alpha_start)
        if self.ramp_steps <= 0:
            return hi
        return lo + (hi - lo) * min(1.0, self.env_steps / self.ramp_steps)

    def _query_base(self, obs: TensorDict) -> None:
        from upright.vla.evaluate_lift import make_batch

        batch = make_batch(self.env, obs, self.spec, self.instruction, self._order)
        with torch.no_grad():
            a = self.base.select_action(batch)
        self.base_action = a.to(self.device, torch.float32).clamp(-self.action_clip, self.action_clip)

    def _augment(self, obs: TensorDict) -> TensorDict:
        groups = {k: obs[k] for k in obs.keys()}
        for k in ("actor", "critic"):
            groups[k] = torch.cat([obs[k], self.base_action.to(obs[k].dtype)], dim=-1)
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def combine(self, residual: torch.Tensor) -> torch.Tensor:
        """(N, A) env action ``clip(a_base + α · clip(a_res, -1, 1), ±action_clip)`` for residuals (N, A)."""
        r = residual.to(self.device, torch.float32).clamp(-1.0, 1.0)
        return (self.base_action + self.alpha * r).clamp(-self.action_clip, self.action_clip)

    # ------------------------------------------------------------------ VecEnv
    @property
    def episode_length_buf(self) -> torch.Tensor:
        """The env's (N,) episode step counters."""
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf = value

    def get_observations(self) -> TensorDict:
        """The env's observations with the base action appended to ``actor`` and ``critic``."""
        return self._augment(self.env.get_observations())

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Step the env with ``combine(actions)``; reset the base's chunk queue of finished episodes and query the base
        for the next step. Logs ``Residual/alpha`` and ``Residual/abs_residual`` (mean |α a_res|)."""
        residual = actions.to(self.device, torch.float32).clamp(-1.0, 1.0)
        alpha = self.alpha
        obs, rew, dones, extras = self.env.step(self.combine(residual))
        self.env_steps += 1
        done_ids = dones.nonzero(as_tuple=False).flatten()
        if done_ids.numel() > 0:
            self.base.reset(done_ids.cpu())
        self._query_base(obs)
        log = extras.setdefault("episode", {})
        log["Residual/alpha"] = torch.tensor(alpha)
        log["Residual/abs_residual"] = (alpha * residual).abs().mean()
        return self._augment(obs), rew, dones, extras

    def reset_all(self) -> None:
        """Start a new episode everywhere (base queues cleared)."""
        self.env.reset_all()
        self.base.reset()
        self._query_base(self.env.get_observations())

    def state_dict(self) -> dict:
        """The env's state plus the env-step count (α's ramp)."""
        return {"env": self.env.state_dict(), "env_steps": self.env_steps}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        if "env" in state:
            self.env.load_state_dict(state["env"])
            self.env_steps = int(state.get("env_steps", 0))
        else:  # a checkpoint of the bare env
            self.env.load_state_dict(state)

    def close(self) -> None:
        """Close the env (and a remote base's connections)."""
        self.env.close()
        if hasattr(self.base, "close"):
            self.base.close()

    def __getattr__(self, name: str):
        # everything else (state, sim, reward_group_names, ...) is the env's
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)
