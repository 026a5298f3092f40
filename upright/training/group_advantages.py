"""Per-group advantages of multi-critic PPO (:mod:`upright.training.multi_critic_ppo`, HoST): GAE for every reward
group, each group's normalisation over the whole rollout, and their weighted combination."""

from __future__ import annotations

from collections.abc import Sequence

import torch

ADVANTAGE_EPS: float = 1e-8
"""Denominator guard of the per-group advantage normalisation (HoST / rsl_rl)."""


def compute_group_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation, independently for every reward group.

    Args:
        rewards: float (T, N, G), already bootstrapped on timeouts.
        values: float (T, N, G), critic values V_g(s_t) recorded during the rollout.
        dones: (T, N) or (T, N, 1), any numeric/bool dtype; nonzero where the episode ended after step t
            (the value of the next state is then not used).
        last_values: float (N, G), V_g of the observation after the last step.
        gamma: Discount factor (HoST 0.99).
        lam: GAE lambda (HoST 0.95).

    Returns:
        ``(returns, advantages)``, both float (T, N, G), with ``returns = advantages + values``.
    """
    num_steps, num_envs = rewards.shape[:2]
    not_done = 1.0 - dones.reshape(num_steps, num_envs, 1).to(rewards.dtype)
    advantages = torch.zeros_like(rewards)
    advantage = torch.zeros_like(last_values)
    next_values = last_values
    for step in reversed(range(num_steps)):
        delta = rewards[step] + gamma * not_done[step] * next_values - values[step]
        advantage = delta + gamma * lam * not_done[step] * advantage
        advantages[step] = advantage
        next_values = values[step]
    return advantages + values, advantages


def normalize_group_advantages(advantages: torch.Tensor, eps: float = ADVANTAGE_EPS) -> torch.Tensor:
    """Normalise each group's advantages over the whole rollout: ``(A_g - mean(A_g)) / (std(A_g) + eps)``.

    Args:
        advantages: float (..., G); statistics are taken over all leading dimensions (e.g. T and N).
        eps: Denominator guard (1e-8).

    Returns:
        float tensor of the same shape. ``std`` is the unbiased (Bessel-corrected) one, as ``torch.std`` in rsl_rl.
    """
    flat = advantages.reshape(-1, advantages.shape[-1])
    return (advantages - flat.mean(dim=0)) / (flat.std(dim=0) + eps)


def combine_group_advantages(
    advantages: torch.Tensor, weights: torch.Tensor | Sequence[float], eps: float = ADVANTAGE_EPS
) -> torch.Tensor:
    """HoST advantage combination: ``A = sum_g w_g * normalize(A_g)``, not re-normalised after the sum.

    Args:
        advantages: Raw per-group advantages, float (T, N, G).
        weights: Group weights, G floats (HoST: 2.5, 0.1, 1.0, 1.0).
        eps: Denominator guard of the per-group normalisation.

    Returns:
        Combined advantages, float (T, N, 1).
    """
    weights = torch.as_tensor(weights, dtype=advantages.dtype, device=advantages.device)
    return (normalize_group_advantages(advantages, eps) * weights).sum(dim=-1, keepdim=True)
