"""HoST's L2C2 smoothness term of multi-critic PPO (:mod:`upright.training.multi_critic_ppo`, spec section 5;
Kobayashi 2022): its weights, the mixed states and the two loss terms."""

from __future__ import annotations

import torch
from rsl_rl.models import MLPModel
from tensordict import TensorDict

from .multi_critic_model import MultiCriticModel

HOST_SMOOTHNESS_LOWER_BOUND: float = 0.1
"""HoST ``smoothness_lower_bound`` (spec section 5)."""

HOST_SMOOTHNESS_UPPER_BOUND: float = 1.0
"""HoST ``smoothness_upper_bound`` (spec section 5)."""

HOST_VALUE_SMOOTHNESS_COEF: float = 0.1
"""HoST ``value_smoothness_coef``, the ratio lambda_V / lambda_pi (spec section 5; 0.25 for the wall task)."""

HOST_L2C2_POLICY_COEF: float = HOST_SMOOTHNESS_UPPER_BOUND * (
    HOST_SMOOTHNESS_LOWER_BOUND / (HOST_SMOOTHNESS_UPPER_BOUND - HOST_SMOOTHNESS_LOWER_BOUND)
)
"""HoST's policy L2C2 weight lambda_pi = upper * lower / (upper - lower) = 0.111 (spec section 5; paper: 1)."""

HOST_L2C2_VALUE_COEF: float = HOST_VALUE_SMOOTHNESS_COEF * HOST_L2C2_POLICY_COEF
"""HoST's value L2C2 weight lambda_V = value_smoothness_coef * lambda_pi = 0.0111 (spec section 5; paper: 0.1)."""


def sample_l2c2_mix_weights(dones: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """L2C2 interpolation weights: ``u ~ U(-1, 1)`` per transition, ``u = 0`` where the episode ended after it.

    Args:
        dones: (B,) or (B, 1), any numeric/bool dtype; nonzero where s_t was terminal (then s_{t+1} is the first
            observation of a new episode and must not be mixed in).
        generator: Optional torch generator (default: torch's global one).

    Returns:
        float32 (B, 1) on ``dones.device``, values in [-1, 1) (as HoST: ``(rand - 0.5) * 2 * (1 - done)``).
    """
    not_done = 1.0 - dones.reshape(-1, 1).float()
    u = torch.rand(not_done.shape, generator=generator, device=dones.device) * 2.0 - 1.0
    return u * not_done


def mix_observations(obs: TensorDict, next_obs: TensorDict, u: torch.Tensor) -> TensorDict:
    """Mixed state of L2C2, ``obs + u * (next_obs - obs)``, for every observation group.

    Args:
        obs: s_t, TensorDict (B, ...) of float groups.
        next_obs: s_{t+1}, TensorDict with the same groups and shapes.
        u: Interpolation weights, float (B, 1) (or (B,)), broadcast over each group's feature dimensions.

    Returns:
        TensorDict (B, ...) with the groups of ``obs``.
    """
    batch = obs.batch_size[0]
    mixed = {}
    for key, value in obs.items():
        weight = u.reshape(batch, *([1] * (value.dim() - 1))).to(value.dtype)
        mixed[key] = value + weight * (next_obs[key] - value)
    return TensorDict(mixed, batch_size=obs.batch_size, device=obs.device)


def l2c2_losses(
    actor: MLPModel,
    critic: MultiCriticModel,
    mean_actions: torch.Tensor,
    values: torch.Tensor,
    mixed_obs: TensorDict,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two unweighted L2C2 terms of HoST (spec section 5), gradients flowing into both sides.

    ``mixed_obs`` goes through the models' ``forward``, i.e. through the same empirical observation normaliser as
    s_t; in rsl_rl 5.5.1 ``forward`` only applies the normaliser (its statistics change only in
    ``update_normalization``), so this does not update it.

    Args:
        actor: Policy model; ``actor(mixed_obs)`` is its deterministic output, the action mean mu(s_mix) (B, A).
        critic: Multi-critic model; ``critic(mixed_obs)`` is V(s_mix), (B, G).
        mean_actions: mu(s_t), float (B, A), from the update's forward pass (keeps its graph).
        values: V(s_t), float (B, G), from the update's forward pass (keeps its graph).
        mixed_obs: s_mix, TensorDict (B, ...) (see :func:`mix_observations`).

    Returns:
        ``(policy_term, value_term)``: scalar float tensors ``mean_B sum_A (mu(s_t) - mu(s_mix))^2`` and
        ``mean_B sum_G (V(s_t) - V(s_mix))^2`` (squared L2 norms, averaged over the batch, as HoST).
    """
    policy_term = (mean_actions - actor(mixed_obs)).square().sum(dim=-1).mean()
    value_term = (values - critic(mixed_obs)).square().sum(dim=-1).mean()
    return policy_term, value_term
