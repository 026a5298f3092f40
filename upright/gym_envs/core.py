"""Task-independent gymnasium wrappers over an upright batched env (the rsl-rl ``VecEnv`` every task implements).

* :class:`BatchedTask`: what a task's adapter provides: build its batched env, reseed it in place, rebuild the
  observation an episode ended on, and the two spaces. One per task (:mod:`upright.gym_envs.standup`,
  :mod:`upright.gym_envs.lift`).
* :class:`UprightVectorEnv`: a :class:`gymnasium.vector.VectorEnv` over the task's N envs: one batched simulation
  stepped by one call, not N Python envs. Autoreset mode ``SAME_STEP`` (declared in ``metadata``): the step on which
  an env's episode ends returns the next episode's first observation, and the observation the episode ended on is in
  ``infos["final_obs"]``, as :class:`gymnasium.vector.SyncVectorEnv` does in that mode.
* :class:`UprightEnv`: a :class:`gymnasium.Env` over one env of the batch (N = 1).

Their input checks (:func:`check_overrides`, actions, seeds, reward weights) live in
:mod:`upright.gym_envs.core_checks`.

Observations, rewards and flags are numpy arrays (float32 observations, float64 rewards as gymnasium's own vector
envs, bool flags), or torch tensors on the task's device with ``as_torch=True`` (vector env only).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from upright.gym_envs.core_checks import _as_actions, _seed_from, _weights
from upright.gym_envs.core_checks import (
    check_overrides as check_overrides,  # re-exported: the task adapters import it here
)


class BatchedTask(ABC):
    """An upright task's batched env (:attr:`env`, an rsl-rl ``VecEnv``: ``get_observations()["actor"]`` (N, D),
    ``step(actions) -> obs, rewards, dones, extras`` with ``extras["time_outs"]`` and ``extras["reward_groups"]``)
    plus what the gymnasium wrappers need from it.

    Subclasses set :attr:`env`, :attr:`reward_group_names`, :attr:`step_dt` and implement the abstract methods.
    """

    env: Any
    """The task's batched env."""
    reward_group_names: tuple[str, ...]
    """Names of the columns of ``extras["reward_groups"]`` (one critic each in ``train.py``)."""
    step_dt: float
    """Control period, s."""

    @property
    def num_envs(self) -> int:
        return int(self.env.num_envs)

    @property
    def device(self) -> torch.device:
        return torch.device(self.env.device)

    @abstractmethod
    def observation_bounds(self) -> tuple[float, float, int]:
        """(low, high, D): every observation lies in [low, high]^D (float32)."""

    @abstractmethod
    def action_bounds(self) -> tuple[float, float, int]:
        """(low, high, A): actions the env accepts (it clips to these bounds)."""

    @abstractmethod
    def reseed(self, seed: int) -> None:
        """Make :attr:`env` what a freshly built env with ``seed`` is, every episode started anew."""

    @abstractmethod
    def reset_all(self) -> None:
        """Start a new episode in every env (continuing the env's random streams)."""

    @abstractmethod
    def final_observations(self, before: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """The observations the episodes that just ended ended on (before the env's own reset replaced them).

        Args:
            before: (N, D) float32 observation returned by the previous step (or reset).
            done: (M,) int64 ids of the envs whose episode ended in the last ``env.step``.

        Returns:
            (M, D) float32.
        """

    def terminated_truncated(self, dones: torch.Tensor, extras: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Split the step's ``dones`` (N,) into gymnasium's (terminated, truncated), two (N,) bool tensors.

        ``truncated``: the episode hit its time limit without reaching a terminal state; ``terminated``: it reached
        one (a fall, a diverged simulation), time limit or not.
        """
        dones = dones.bool()
        truncated = self.env.truncated.bool() & dones  # the env core's: time-outs that were not terminal
        return dones & ~truncated, truncated

    def render_qpos(self, env_id: int) -> np.ndarray:
        """(nq,) float64 generalised positions of env ``env_id``, for the renderer."""
        return self.env.sim.state.qpos[env_id].detach().to("cpu", torch.float64).numpy()

    @property
    def render_model(self):
        """The compiled ``mujoco.MjModel`` the renderer draws."""
        return self.env.model

    def render_body(self) -> int:
        """Body id the render camera tracks (the robot's root)."""
        return 0

    def close(self) -> None:
        self.env.close()


class UprightVectorEnv(VectorEnv):
    """N envs of an upright task as one :class:`gymnasium.vector.VectorEnv` (see the module doc).

    Args:
        task: the task's batched env and adapter.
        as_torch: return torch tensors on the task's device (observations (N, D) float32, rewards (N,) float32,
            terminated/truncated (N,) bool) instead of numpy arrays; actions may then be tensors on any device.
        render_mode: None or ``"rgb_array"`` (:meth:`render` returns one (H, W, 3) uint8 frame per env of
            ``render_env_ids``).
        render_env_ids: envs :meth:`render` draws.
        render_size: (width, height) of rendered frames, pixels.
        reward_weights: one weight per reward group: reward = Σ w_g r_g; None: the plain sum (the reward
            ``train.py`` logs).

    ``step`` returns ``infos`` with ``reward_groups`` ((N, G) float32, :attr:`reward_group_names` order; the
    multi-critic groups ``train.py`` trains on; the reward is their sum unless weights were given), and, on steps where
    episodes end, ``final_obs`` and ``final_info`` with their ``_final_obs`` / ``_final_info`` masks: numpy mode
    follows :class:`~gymnasium.vector.SyncVectorEnv` (an (N,) object array holding a (D,) float32 array for each env
    that ended, None elsewhere); torch mode gives an (N, D) tensor, zeros where the mask is False.

    Raises:
        ValueError: an unknown render mode or an env id out of range.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(
        self,
        task: BatchedTask,
        *,
        as_torch: bool = False,
        render_mode: str | None = None,
        render_env_ids: Sequence[int] = (0,),
        render_size: tuple[int, int] = (640, 480),
        reward_weights: Sequence[float] | None = None,
    ):
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or 'rgb_array' for the vector env, got {render_mode!r}")
        self.task = task
        self.num_envs = task.num_envs
        self.as_torch = bool(as_torch)
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": int(round(1.0 / task.step_dt))}
        ids = [int(i) for i in render_env_ids]
        if any(not 0 <= i < self.num_envs for i in ids):
            raise ValueError(f"render_env_ids must lie in [0, {self.num_envs - 1}], got {ids}")
        self.render_env_ids = ids
        self._renderer = None
        self._render_size = (int(render_size[0]), int(render_size[1]))
        lo, hi, d = task.observation_bounds()
        alo, ahi, a = task.action_bounds()
        self.single_observation_space = spaces.Box(lo, hi, (d,), np.float32)
        self.single_action_space = spaces.Box(alo, ahi, (a,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.reward_group_names = tuple(task.reward_group_names)
        self._weights = _weights(reward_weights, len(self.reward_group_names), task.device)
        self._obs: torch.Tensor | None = None
        self._seeded = False

    # ------------------------------------------------------------------ API
    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        """Start a new episode in every env.

        Args:
            seed: an int seeds the whole batch (the same seed gives the same episodes); None continues the current
                random streams (the first reset without any seed draws one from the OS).
            options: not supported (None or {}).

        Returns:
            (obs (N, D), infos {}).

        Raises:
            ValueError: options given, a negative seed, or several distinct seeds.
        """
        if options:
            raise ValueError(f"reset options are not supported by upright's vector env, got {sorted(options)}")
        seed = _seed_from(seed)
        super().reset(seed=seed)
        if seed is not None or not self._seeded:
            self.task.reseed(seed if seed is not None else int(self.np_random.integers(2**31 - 1)))
            self._seeded = True
        else:
            self.task.reset_all()
        self._obs = self.task.env.get_observations()["actor"].clone()
        return self._out(self._obs.clone()), {}

    def step(self, actions):
        """Advance every env one control period (``task.step_dt``, s).

        Args:
            actions: (N, A) float actions (numpy array or tensor), clipped by the env to the action space.

        Returns:
            (obs (N, D), rewards (N,), terminated (N,), truncated (N,), infos); see the class doc.

        Raises:
            RuntimeError: step before reset.
            ValueError: actions of another shape or not finite.
        """
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        task = self.task
        a = _as_actions(actions, (self.num_envs, self.single_action_space.shape[0]), task.device)
        obs_td, rewards, dones, extras = task.env.step(a)
        groups = extras["reward_groups"]
        if self._weights is not None:
            rewards = groups @ self._weights
        terminated, truncated = task.terminated_truncated(dones, extras)
        ended = (terminated | truncated).nonzero(as_tuple=False).flatten()
        before = self._obs
        self._obs = obs_td["actor"].clone()
        infos: dict[str, Any] = {}
        if ended.numel():
            final = task.final_observations(before, ended)
            infos.update(self._final(ended, final, groups))
        if self.as_torch:
            infos["reward_groups"] = groups.clone()
            infos["_reward_groups"] = torch.ones(self.num_envs, dtype=torch.bool, device=groups.device)
            return self._obs.clone(), rewards.float(), terminated, truncated, infos
        infos["reward_groups"] = groups.detach().cpu().numpy().copy()
        infos["_reward_groups"] = np.ones(self.num_envs, dtype=bool)
        return (
            self._obs.cpu().numpy().copy(),
            rewards.detach().cpu().numpy().astype(np.float64),
            terminated.cpu().numpy(),
            truncated.cpu().numpy(),
            infos,
        )

    def _final(self, ended: torch.Tensor, final: torch.Tensor, groups: torch.Tensor) -> dict[str, Any]:
        n = self.num_envs
        if self.as_torch:
            mask = torch.zeros(n, dtype=torch.bool, device=final.device)
            mask[ended] = True
            obs = torch.zeros(n, final.shape[1], device=final.device)
            obs[ended] = final
            info = {"reward_groups": groups.clone(), "_reward_groups": mask.clone()}
            return {"final_obs": obs, "_final_obs": mask, "final_info": info, "_final_info": mask.clone()}
        ids = ended.cpu().numpy()
        mask = np.zeros(n, dtype=bool)
        mask[ids] = True
        obs = np.full(n, None, dtype=object)
        rows = final.detach().cpu().numpy()
        for k, i in enumerate(ids):
            obs[i] = rows[k].copy()
        info = {"reward_groups": groups.detach().cpu().numpy().copy(), "_reward_groups": mask.copy()}
        return {"final_obs": obs, "_final_obs": mask, "final_info": info, "_final_info": mask.copy()}

    def _out(self, obs: torch.Tensor):
        return obs if self.as_torch else obs.cpu().numpy()

    def render(self) -> tuple[np.ndarray, ...] | None:
        """Frames of the envs of ``render_env_ids``: a tuple of (H, W, 3) uint8 (``rgb_array``), else None.

        Raises:
            RuntimeError: no OpenGL context (the message names the packages for EGL or OSMesa).
        """
        if self.render_mode != "rgb_array":
            return None
        if self._renderer is None:
            from upright.gym_envs.render import FrameRenderer

            self._renderer = FrameRenderer(self.task.render_model, self.task.render_body(), *self._render_size)
        return tuple(self._renderer.rgb(self.task.render_qpos(i)) for i in self.render_env_ids)

    def close_extras(self, **kwargs: Any) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        if self.task is not None:
            self.task.close()
            self.task = None  # type: ignore[assignment]


class UprightEnv(gymnasium.Env):
    """One env of an upright task as a :class:`gymnasium.Env` (a batch of N = 1 underneath).

    Args:
        task: the task's batched env and adapter, built with one env.
        render_mode: None, ``"rgb_array"`` (:meth:`render` returns (H, W, 3) uint8) or ``"human"`` (a MuJoCo window,
            refreshed at every step and reset; without a display it warns once and shows nothing).
        render_size: (width, height) of ``rgb_array`` frames, pixels.
        reward_weights: one weight per reward group: reward = Σ w_g r_g; None: the plain sum (the reward
            ``train.py`` logs).

    ``step`` returns the observation the step ended on, also when the episode ended (then the underlying batch has
    already started the next episode, which the following :meth:`reset` without a seed returns). ``info`` holds
    ``reward_groups``: (G,) float32, :attr:`reward_group_names` order.

    Raises:
        ValueError: a batch of other than one env, or an unknown render mode.
    """

    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": 50}

    def __init__(
        self,
        task: BatchedTask,
        *,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (640, 480),
        reward_weights: Sequence[float] | None = None,
    ):
        if task.num_envs != 1:
            raise ValueError(f"UprightEnv wraps one env, got a batch of {task.num_envs}; use UprightVectorEnv")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None, 'rgb_array' or 'human', got {render_mode!r}")
        self.task = task
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": int(round(1.0 / task.step_dt))}
        lo, hi, d = task.observation_bounds()
        alo, ahi, a = task.action_bounds()
        self.observation_space = spaces.Box(lo, hi, (d,), np.float32)
        self.action_space = spaces.Box(alo, ahi, (a,), np.float32)
        self.reward_group_names = tuple(task.reward_group_names)
        self._weights = _weights(reward_weights, len(self.reward_group_names), task.device)
        self._render_size = (int(render_size[0]), int(render_size[1]))
        self._renderer = None
        self._window = None
        self._obs: torch.Tensor | None = None
        self._episode_over = False
        self._pending_start = False
        self._seeded = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start a new episode.

        Args:
            seed: re-seeds every random stream of the env (start states, domain randomisation, observation noise):
                the same seed and actions give the same trajectory. None continues the streams (the first reset
                without a seed draws one from the OS).
            options: not supported (None or {}).

        Returns:
            (obs (D,) float32, info {}).

        Raises:
            ValueError: options given, or a negative seed.
        """
        if options:
            raise ValueError(f"reset options are not supported by upright envs, got {sorted(options)}")
        seed = _seed_from(seed)
        super().reset(seed=seed)
        if seed is not None or not self._seeded:
            self.task.reseed(seed if seed is not None else int(self.np_random.integers(2**31 - 1)))
            self._seeded = True
        elif not self._pending_start:
            self.task.reset_all()
        self._pending_start = self._episode_over = False
        self._obs = self.task.env.get_observations()["actor"].clone()
        if self.render_mode == "human":
            self._show()
        return self._obs[0].cpu().numpy().copy(), {}

    def step(self, action):
        """Advance one control period.

        Args:
            action: (A,) float action, clipped by the env to the action space.

        Returns:
            (obs (D,) float32, reward float, terminated bool, truncated bool, info).

        Raises:
            RuntimeError: step before reset, or after the episode ended without a reset.
            ValueError: an action of another shape or not finite.
        """
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        if self._episode_over:
            raise RuntimeError("the episode has ended (terminated or truncated): call reset() before step()")
        task = self.task
        a = _as_actions(action, self.action_space.shape, task.device).unsqueeze(0)
        obs_td, rewards, dones, extras = task.env.step(a)
        groups = extras["reward_groups"]
        reward = groups @ self._weights if self._weights is not None else rewards
        terminated, truncated = task.terminated_truncated(dones, extras)
        term, trunc = bool(terminated[0]), bool(truncated[0])
        if term or trunc:
            obs = task.final_observations(self._obs, torch.zeros(1, dtype=torch.long, device=task.device))[0]
            self._episode_over = self._pending_start = True
        else:
            obs = obs_td["actor"][0]
        self._obs = obs_td["actor"].clone()
        info = {"reward_groups": groups[0].detach().cpu().numpy().copy()}
        if self.render_mode == "human":
            self._show()
        return obs.detach().cpu().numpy().copy(), float(reward[0]), term, trunc, info

    def render(self) -> np.ndarray | None:
        """(H, W, 3) uint8 frame of the env (``rgb_array``); None in ``human`` mode (the window is refreshed by
        step and reset) and without a render mode.

        Raises:
            RuntimeError: no OpenGL context for ``rgb_array`` (the message names the packages for EGL or OSMesa).
        """
        if self.render_mode == "rgb_array":
            if self._renderer is None:
                from upright.gym_envs.render import FrameRenderer

                self._renderer = FrameRenderer(self.task.render_model, self.task.render_body(), *self._render_size)
            return self._renderer.rgb(self.task.render_qpos(0))
        if self.render_mode == "human":
            self._show()
        return None

    def _show(self) -> None:
        if self._window is None:
            from upright.gym_envs.render import HumanWindow

            self._window = HumanWindow(self.task.render_model, self.task.render_body())
        self._window.show(self.task.render_qpos(0))

    def close(self) -> None:
        """Release the renderer, the window and the simulation (a second call does nothing)."""
        for attr in ("_renderer", "_window"):
            obj = getattr(self, attr, None)
            if obj is not None:
                obj.close()
                setattr(self, attr, None)
        if getattr(self, "task", None) is not None:
            self.task.close()
            self.task = None  # type: ignore[assignment]
