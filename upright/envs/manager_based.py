"""The env core: one batched ``rsl_rl`` ``VecEnv`` whose env step runs the task's managers in a fixed order.

One env step (:meth:`ManagerBasedRlEnv.step`), for N envs at once:

1. the action term turns the policy's (N, A) action into actuator targets (:class:`upright.managers.action.ActionTerm`);
2. the event terms act on them and on the simulation for this step (domain randomisation of the actuation, an action
   delay, external forces): ``event(env, ctrl) -> ctrl``, in order;
3. the simulation steps ``decimation`` physics steps with the targets held (any :mod:`upright.sim` backend: native
   MuJoCo, MJX, MuJoCo Warp);
4. the state is read (the task's ``_read_state``) and the post-physics terms update what depends on it
   (``term(env, state)``, e.g. a latch);
5. rewards, one column per group for multi-critic PPO (:class:`upright.managers.reward.RewardManager`);
6. terminations (:class:`upright.managers.termination.TerminationManager`) and the time limit (a truncation);
7. the task's metrics of the step and of the episodes that end (``_log_step``);
8. the curriculum terms, for the envs whose episode ended (``term(env, env_ids, state)``);
9. resets of those envs (the task's ``reset_envs``: its reset events);
10. observations, with history where the task keeps one (:mod:`upright.managers.observation`).

A task's env subclasses :class:`ManagerBasedRlEnv`: its ``__init__`` builds the scene and the simulation, sets the
attributes listed in :class:`ManagerBasedRlEnv` and ends with :meth:`ManagerBasedRlEnv.reset_all`; it implements
``_read_state`` and ``reset_envs``. Nothing in this module knows a robot or a task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from upright.managers.action import ActionTerm
from upright.managers.episode import EpisodeStats
from upright.managers.reward import RewardManager
from upright.managers.termination import TerminationManager

EventTerm = Callable[[Any, torch.Tensor], torch.Tensor]
"""``event(env, ctrl) -> ctrl``: acts before the physics steps of an env step (may change the targets)."""
PostPhysicsTerm = Callable[[Any, Any], None]
"""``term(env, state)``: runs after the physics steps, before the rewards."""
CurriculumTerm = Callable[[Any, torch.Tensor, Any], None]
"""``term(env, env_ids, state)``: runs for the (M,) int64 envs whose episode ended, before they are reset."""


class ManagerBasedRlEnv(VecEnv):
    """N envs of one task, stepped together by its managers (module docstring).

    What a task's ``__init__`` sets before :meth:`reset_all`:

    - ``cfg`` (with ``decimation``, physics steps per env step), ``device``, ``num_envs`` N, ``num_actions`` A,
      ``step_dt`` (control period, s), ``max_episode_length`` (env steps), ``sim`` (an :mod:`upright.sim` backend),
      ``rng`` (the env's ``torch.Generator``);
    - ``episode`` (:class:`~upright.managers.episode.EpisodeStats`), ``reward_manager`` and ``reward_group_names``,
      ``action_term``, ``event_terms``, ``post_physics_terms``, ``termination_manager``, ``curriculum_terms``,
      ``observation_manager`` (``update(env)``, ``get() -> {group: (N, D)}``), and optionally ``curriculum`` (with
      ``state_dict``/``load_state_dict``; checkpoints keep it).
    """

    cfg: Any
    device: torch.device
    num_envs: int
    num_actions: int
    step_dt: float
    max_episode_length: int
    sim: Any
    rng: torch.Generator
    episode: EpisodeStats
    reward_manager: RewardManager
    reward_group_names: tuple[str, ...]
    action_term: ActionTerm
    event_terms: Sequence[EventTerm] = ()
    post_physics_terms: Sequence[PostPhysicsTerm] = ()
    termination_manager: TerminationManager
    curriculum_terms: Sequence[CurriculumTerm] = ()
    observation_manager: Any
    curriculum: Any = None
    """Per-env curriculum state kept in checkpoints (``state_dict``/``load_state_dict``), or None (nothing kept)."""
    truncated: torch.Tensor | None = None

    # ------------------------------------------------------------------ what a task implements
    def _read_state(self) -> Any:
        """The task's state dataclass of the simulation's current state (every term reads it)."""
        raise NotImplementedError

    def reset_envs(self, env_ids: torch.Tensor) -> None:
        """Start new episodes in ``env_ids`` (M,) int64 (the task's reset events; clears the episode's buffers)."""
        raise NotImplementedError

    def _log_step(self, state: Any, group_rewards: torch.Tensor, dones: torch.Tensor) -> dict[str, torch.Tensor]:
        """Log scalars of the env step (``extras["episode"]``): by default the per-step means of the reward groups
        and terms over the episodes that end now (``Episode_Reward/...``)."""
        return self.episode.finished_means(dones)

    # ------------------------------------------------------------------ the env step
    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Advance all envs by one env step (module docstring, steps 1-10).

        Args:
            actions: (N, A) float32 policy actions.

        Returns:
            obs (``get_observations()``), rewards (N,) (the sum over the groups, for logging), dones (N,) int64, and
            extras: ``time_outs`` (N,) bool (episodes that ended at their time limit without a terminal state, the
            ones PPO bootstraps: :attr:`truncated`), ``reward_groups`` (N, G) float32,
            ``episode`` (log scalars) and, when the action term reports it, ``action_applied`` (N,) bool.

        Raises:
            ValueError: ``actions`` of the wrong shape (from the action term).
        """
        ctrl = self.action_term.process(self, actions)
        for event in self.event_terms:
            ctrl = event(self, ctrl)
        self.sim.step(ctrl, self.cfg.decimation)
        self.episode.length += 1  # not through episode_length_buf: its setter means "set from outside"

        state = self._read_state()
        for term in self.post_physics_terms:
            term(self, state)
        group_rewards, terms = self.reward_manager.compute(state, self.num_envs, self.device)
        terminated = self.termination_manager.compute(state, self.num_envs, self.device)
        time_outs = self.episode.length >= self.max_episode_length
        dones = terminated | time_outs
        self.truncated = time_outs & ~terminated
        """(N,) bool: episodes that ended at the last step at their time limit without a terminal state (gymnasium's
        truncated; also ``extras["time_outs"]``: an episode that reaches a terminal state at its last step is not
        bootstrapped)."""
        self.episode.add({f"group/{g}": group_rewards[:, i] for i, g in enumerate(self.reward_group_names)} | terms)
        log = self._log_step(state, group_rewards, dones)
        if bool(dones.any()):  # which term ended each finished episode (time-outs are none of them)
            for name, hit in self.termination_manager.last.items():
                log[f"Episode_Termination/{name}"] = hit[dones].float()
        self.last_state = state
        """State at the end of the last env step, before resets (evaluation and logging read it)."""

        done_ids = dones.nonzero(as_tuple=False).flatten()
        if done_ids.numel() > 0:
            for term in self.curriculum_terms:
                term(self, done_ids, state)
            self.reset_envs(done_ids)
            state = self._read_state()
        self.state = state
        """State after the resets: what the next observation and action read."""
        self.update_observations()
        extras = {"time_outs": self.truncated, "reward_groups": group_rewards, "episode": log}
        applied = self.action_term.applied(self)
        if applied is not None:
            extras["action_applied"] = applied
        return self.get_observations(), group_rewards.sum(dim=1), dones.long(), extras

    # ------------------------------------------------------------------ resets and observations
    def reset_all(self) -> None:
        """Start a new episode in every env at once (all at env step 0) and build the first observation."""
        self.reset_envs(torch.arange(self.num_envs, device=self.device))
        self.state = self._read_state()
        self.update_observations()

    def reset(self) -> tuple[TensorDict, dict]:
        """Gymnasium-style reset of every env: (observations, empty extras)."""
        self.reset_all()
        return self.get_observations(), {}

    def update_observations(self) -> None:
        """Compute the observation groups from :attr:`state` (pushing a frame into the history where kept)."""
        self.observation_manager.update(self)

    def get_observations(self) -> TensorDict:
        """The observation groups (``actor``, ``critic``, ...), each (N, D) float32 on :attr:`device`."""
        return TensorDict(self.observation_manager.get(), batch_size=[self.num_envs], device=self.device)

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """(N,) int64 env steps of each env's current episode (rsl-rl's ``init_at_random_ep_len`` writes it)."""
        return self.episode.length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.episode.length = value.to(self.device, torch.long)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Training state kept in checkpoints: the per-env curriculum ({} without one)."""
        return {} if self.curriculum is None else {"curriculum": self.curriculum.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` (on resume)."""
        if "curriculum" in state and self.curriculum is not None:
            self.curriculum.load_state_dict(state["curriculum"])

    def close(self) -> None:
        """Release the backend."""
        self.sim.close()
