"""Rollout storage for multi-critic PPO: one reward / value / return column per reward group.

Extends rsl_rl's :class:`~rsl_rl.storage.RolloutStorage` (training type ``"rl"``); rsl_rl's unchanged
``mini_batch_generator`` then yields ``values`` and ``returns`` of shape (B, G) and ``advantages`` of shape (B, 1).
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rsl_rl.storage import RolloutStorage


class MultiCriticRolloutStorage(RolloutStorage):
    """Rollout storage with per-group rewards, values and returns.

    Shapes (T = transitions per env, N = envs, G = reward groups), all float32 on ``device``:

    - ``rewards``, ``values``, ``returns``, ``group_advantages``: (T, N, G);
    - ``advantages``: (T, N, 1), the combined advantage used by the PPO surrogate;
    - everything else as in :class:`~rsl_rl.storage.RolloutStorage`.
    """

    num_groups: int
    """Number of reward groups G (= number of critics)."""

    group_advantages: torch.Tensor
    """Per-group advantages normalised over the whole rollout, (T, N, G); kept for logging."""

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
