"""Rollout storage for multi-critic PPO: one reward / value / return column per reward group, plus the next
observation of every transition (for HoST's L2C2 smoothness term).

Extends rsl_rl's :class:`~rsl_rl.storage.RolloutStorage` (training type ``"rl"``). Its
:meth:`~MultiCriticRolloutStorage.mini_batch_generator` yields ``values`` and ``returns`` of shape (B, G) and
``advantages`` of shape (B, 1) and, on request, each transition's next observation and done flag.
"""

from __future__ import annotations

from collections.abc import Generator

import torch
from rsl_rl.storage import RolloutStorage
from tensordict import TensorDict


class MultiCriticRolloutStorage(RolloutStorage):
    """Rollout storage with per-group rewards, values and returns and the observation after the rollout.

    Shapes (T = transitions per env, N = envs, G = reward groups), all on ``device``:

    - ``rewards``, ``values``, ``returns``, ``group_advantages``: float32 (T, N, G);
    - ``advantages``: float32 (T, N, 1), the combined advantage used by the PPO surrogate;
    - ``last_observations``: TensorDict (N, ...), the observation after step T-1 (set by
      :meth:`set_last_observations`);
    - everything else as in :class:`~rsl_rl.storage.RolloutStorage` (``dones`` uint8 (T, N, 1)).

    Next observations are not stored a second time: s_{t+1} of transition t is ``observations[t + 1]`` for
    t < T-1 and ``last_observations`` for t = T-1. This holds because rsl_rl's ``OnPolicyRunner`` passes the
    observation returned by ``env.step`` at step t both to ``process_env_step`` and to ``act`` at step t+1 (which
    records it), and the observation after the last step to ``compute_returns``. For an env that was done at step t
    that observation is the first one of its new episode.
    """

    class Batch(RolloutStorage.Batch):
        """rsl_rl's mini-batch plus, for L2C2, each transition's next observation and done flag."""

        next_observations: TensorDict | None = None
        """Observation s_{t+1} that followed each transition, TensorDict (B, ...); None unless requested."""

        transition_dones: torch.Tensor | None = None
        """1 where the episode ended after the transition (s_{t+1} is then a new episode's), uint8 (B, 1)."""

    num_groups: int
    """Number of reward groups G (= number of critics)."""

    group_advantages: torch.Tensor
    """Per-group advantages normalised over the whole rollout, (T, N, G); kept for logging."""

    last_observations: TensorDict
    """Observation after the last step of the rollout, TensorDict (N, ...), same groups/dtypes as ``observations``."""

    has_last_observations: bool
    """Whether :meth:`set_last_observations` was called since the last :meth:`clear`."""

    def __init__(
        self,
        num_envs: int,
        num_transitions_per_env: int,
        obs: TensorDict,
        actions_shape: tuple[int, ...] | list[int],
        num_groups: int,
        device: str = "cpu",
    ) -> None:
        """Allocate the buffers; arguments as :class:`RolloutStorage` (type ``"rl"``) plus ``num_groups`` (G)."""
        super().__init__("rl", num_envs, num_transitions_per_env, obs, actions_shape, device)
        self.num_groups = num_groups
        shape = (num_transitions_per_env, num_envs, num_groups)
        self.rewards = torch.zeros(shape, device=self.device)
        self.values = torch.zeros(shape, device=self.device)
        self.returns = torch.zeros(shape, device=self.device)
        self.group_advantages = torch.zeros(shape, device=self.device)
        self.last_observations = TensorDict(
            {key: torch.zeros(*value.shape, dtype=value.dtype, device=device) for key, value in obs.items()},
            batch_size=[num_envs],
            device=self.device,
        )
        self.has_last_observations = False

    def add_transition(self, transition: RolloutStorage.Transition) -> None:
        """Add one transition whose ``rewards`` and ``values`` are float (N, G)."""
        group_rewards = transition.rewards
        expected = (self.num_envs, self.num_groups)
        if group_rewards is None or tuple(group_rewards.shape) != expected:
            got = None if group_rewards is None else tuple(group_rewards.shape)
            raise ValueError(f"MultiCriticRolloutStorage: rewards must have shape {expected}, got {got}.")
        if transition.values is None or tuple(transition.values.shape) != expected:
            got = None if transition.values is None else tuple(transition.values.shape)
            raise ValueError(f"MultiCriticRolloutStorage: values must have shape {expected}, got {got}.")
        step = self.step
        # The parent copies ``rewards.view(-1, 1)``: hand it one column (broadcast into (N, G)), then write all G.
        transition.rewards = group_rewards[:, :1]
        try:
            super().add_transition(transition)
        finally:
            transition.rewards = group_rewards
        self.rewards[step].copy_(group_rewards)

    def set_last_observations(self, obs: TensorDict) -> None:
        """Record the observation after the last step of the rollout (TensorDict (N, ...)); s_{t+1} of t = T-1."""
        self.last_observations.copy_(obs)
        self.has_last_observations = True

    def clear(self) -> None:
        """Reset the write cursor and forget the last observation."""
        super().clear()
        self.has_last_observations = False

    def flat_next_observations(self) -> TensorDict:
        """Next observation of every transition, flattened like ``observations.flatten(0, 1)``: TensorDict (T*N, ...).

        Row ``t * N + n`` is s_{t+1} of env n: ``observations[t + 1, n]``, or ``last_observations[n]`` for t = T-1.

        Raises:
            RuntimeError: the rollout is incomplete or :meth:`set_last_observations` was not called for it.
        """
        if self.step != self.num_transitions_per_env or not self.has_last_observations:
            raise RuntimeError(
                "MultiCriticRolloutStorage: next observations need a full rollout and set_last_observations() (step "
                f"{self.step}/{self.num_transitions_per_env}, last observations set: {self.has_last_observations})."
            )
        num_rows = self.num_transitions_per_env * self.num_envs
        return TensorDict(
            {
                key: torch.cat([value[1:].flatten(0, 1), self.last_observations[key]], dim=0)
                for key, value in self.observations.items()
            },
            batch_size=[num_rows],
            device=self.device,
        )

    def mini_batch_generator(
        self, num_mini_batches: int, num_epochs: int = 8, with_next_observations: bool = False
    ) -> Generator[Batch, None, None]:
        """Yield shuffled flat mini-batches, as rsl_rl's generator (same single ``randperm``, same sample order).

        Args:
            num_mini_batches: Mini-batches per epoch; each has ``T*N // num_mini_batches`` transitions.
            num_epochs: Passes over the rollout (one permutation shared by all epochs, as in rsl_rl).
            with_next_observations: Also fill ``next_observations`` (TensorDict (B, ...)) and ``transition_dones``
                (uint8 (B, 1)) of every batch (needs :meth:`set_last_observations`).

        Yields:
            :class:`MultiCriticRolloutStorage.Batch` with ``observations`` (B, ...), ``actions`` (B, A), ``values``
            and ``returns`` (B, G), ``advantages`` and ``old_actions_log_prob`` (B, 1), ``old_distribution_params``.
        """
        if self.training_type != "rl":
            raise ValueError("This function is only available for reinforcement learning training.")
        batch_size = self.num_envs * self.num_transitions_per_env
        mini_batch_size = batch_size // num_mini_batches
        indices = torch.randperm(num_mini_batches * mini_batch_size, requires_grad=False, device=self.device)

        # Flatten the data
        observations = self.observations.flatten(0, 1)
        actions = self.actions.flatten(0, 1)
        values = self.values.flatten(0, 1)
        returns = self.returns.flatten(0, 1)
        old_actions_log_prob = self.actions_log_prob.flatten(0, 1)
        advantages = self.advantages.flatten(0, 1)
        old_distribution_params = tuple(p.flatten(0, 1) for p in self.distribution_params)  # type: ignore
        if with_next_observations:
            next_observations = self.flat_next_observations()
            dones = self.dones.flatten(0, 1)

        for _ in range(num_epochs):
            for i in range(num_mini_batches):
                batch_idx = indices[i * mini_batch_size : (i + 1) * mini_batch_size]
                batch = MultiCriticRolloutStorage.Batch(
                    observations=observations[batch_idx],  # type: ignore
                    actions=actions[batch_idx],
                    values=values[batch_idx],
                    advantages=advantages[batch_idx],
                    returns=returns[batch_idx],
                    old_actions_log_prob=old_actions_log_prob[batch_idx],
                    old_distribution_params=tuple(p[batch_idx] for p in old_distribution_params),
                )
                if with_next_observations:
                    batch.next_observations = next_observations[batch_idx]
                    batch.transition_dones = dones[batch_idx]
                yield batch
