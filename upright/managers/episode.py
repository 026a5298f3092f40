"""Per-episode bookkeeping shared by every task: env steps since the episode began, and running sums of logged
per-step quantities (reward groups and terms) that become per-step means when an episode ends."""

from __future__ import annotations

import torch


class EpisodeStats:
    """Episode length and running sums of N envs.

    Args:
        num_envs: N.
        device: torch device.
    """

    def __init__(self, num_envs: int, device: torch.device | str = "cpu"):
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.length = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        """(N,) int64 env steps taken in each env's current episode."""
        self.sums: dict[str, torch.Tensor] = {}
        """Running sum per key, (N,) float32."""

    def add(self, items: dict[str, torch.Tensor]) -> None:
        """Add one env step's (N,) values of each key to the sums."""
        for key, value in items.items():
            if key not in self.sums:
                self.sums[key] = torch.zeros(self.num_envs, device=self.device)
            self.sums[key] += value.detach().float()

    def finished_means(self, dones: torch.Tensor, prefix: str = "Episode_Reward/") -> dict[str, torch.Tensor]:
        """Per-step means of every sum over the episodes ending now: ``{prefix + key: (M,)}`` for the M done envs
        (empty when none is done), in the order the keys were first added; an episode of 0 steps counts as 1.

        Args:
            dones: (N,) bool, the envs whose episode ends now.
            prefix: prepended to every key (TensorBoard ``Episode_Reward/...``).
        """
        if not bool(dones.any()):
            return {}
        steps = self.length[dones].float().clamp(min=1)
        return {prefix + key: total[dones] / steps for key, total in self.sums.items()}

    def reset(self, env_ids: torch.Tensor) -> None:
        """Zero the length and sums of ``env_ids`` (a new episode starts)."""
        self.length[env_ids] = 0
        for value in self.sums.values():
            value[env_ids] = 0.0
