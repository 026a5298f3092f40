"""Actor and critic models for multi-critic PPO (HoST, Huang et al., RSS 2025).

Both classes subclass rsl_rl's :class:`~rsl_rl.models.MLPModel` and keep its constructor signature, so
``MultiCriticPPO.construct_algorithm`` (and rsl_rl's own ``PPO.construct_algorithm`` pattern) can build them from a
config dict by class name, e.g. ``"upright.training.multi_critic_model:TanhActorModel"``.

Network shapes of HoST (Huang et al., "Learning Humanoid Standing-up Control across Diverse Postures", RSS 2025, arXiv
2502.08378; code: public repository InternRobotics/HoST at commit 70bb580949a3,
``rsl_rl/rsl_rl/modules/actor_critic.py``):

- actor: MLP obs -> [512, 256, 128] (ELU) -> num_actions, followed by Tanh on the mean; state-independent std 0.8;
- critics: 4 separate MLPs obs -> [512, 256] (ELU) -> 1, one per reward group.

Not HoST: ``shared_trunk=True`` (``train.critic_shared_trunk``) builds one trunk obs -> [512, 256] (ELU) with a
linear head per group (obs -> [512, 256] -> 4), which costs about a quarter of the critic FLOPs
(``benchmarks/bench_ppo_update.py`` measures the update time).
"""

from __future__ import annotations

import torch
import torch.nn as nn
from rsl_rl.models import MLPModel
from rsl_rl.modules import MLP
from tensordict import TensorDict


class ParallelMLPHeads(nn.ModuleList):
    """Independent MLPs applied to the same input, outputs concatenated on the last dimension.

    Input: float tensor ``(B, D)``. Output: float tensor ``(B, sum of the heads' output dims)``; with G heads of
    output dim 1 that is ``(B, G)``, column g being head g.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run every head on ``x`` and concatenate the outputs along the last dimension."""
        outputs: list[torch.Tensor] = []
        for head in self:
            outputs.append(head(x))
        return torch.cat(outputs, dim=-1)


class MultiCriticModel(MLPModel):
    """G independent value MLPs sharing one observation normaliser; ``forward`` returns values of shape (B, G).

    The G critic MLPs (each ``latent -> hidden_dims -> 1`` with the given activation) replace ``MLPModel.mlp`` by a
    :class:`ParallelMLPHeads`, so everything else in :class:`MLPModel` (observation selection and normalisation,
    ``update_normalization``, ``forward``, state dict handling) is reused unchanged. The model is deterministic (no
    distribution) and non-recurrent.
    """

    num_critics: int
    """Number of critics G, one per reward group."""
    shared_trunk: bool
    """True: one hidden-layer trunk with G linear heads; False (HoST): G separate MLPs."""

    def __init__(
        self,
        obs: TensorDict,
        obs_groups: dict[str, list[str]],
        obs_set: str,
        output_dim: int = 1,
        hidden_dims: tuple[int, ...] | list[int] = (512, 256),
        activation: str = "elu",
        obs_normalization: bool = False,
        num_critics: int = 4,
        shared_trunk: bool = False,
    ) -> None:
        """Initialize the multi-critic model.

        Args:
            obs: Observation TensorDict (each used group float ``(N, D_i)``).
            obs_groups: Mapping from observation sets to lists of observation groups.
            obs_set: Observation set used by this model (normally ``"critic"``).
            output_dim: Output dimension of each critic; must be 1 (kept for rsl_rl's constructor pattern).
            hidden_dims: Hidden layer sizes of every critic MLP (HoST: [512, 256]).
            activation: Activation of every critic MLP (HoST: ELU).
            obs_normalization: Whether to normalise observations (one normaliser shared by all critics).
            num_critics: Number of critics G (HoST: 4, one per reward group).
            shared_trunk: One trunk ``latent -> hidden_dims`` (activation after each layer) and G linear heads, in
                place of G separate MLPs (not HoST; about 1/G of the critic FLOPs).

        Raises:
            ValueError: ``output_dim`` is not 1 or ``num_critics`` < 1.
        """
        if output_dim != 1:
            raise ValueError(f"MultiCriticModel: each critic outputs one value, got output_dim={output_dim}.")
        if num_critics < 1:
            raise ValueError(f"MultiCriticModel: num_critics must be >= 1, got {num_critics}.")
        super().__init__(obs, obs_groups, obs_set, 1, hidden_dims, activation, obs_normalization, None)
        self.num_critics = num_critics
        self.shared_trunk = shared_trunk
        if shared_trunk:  # one MLP whose last linear layer has G outputs: a shared trunk with G linear heads
            self.mlp = MLP(self._get_latent_dim(), num_critics, hidden_dims, activation)
        else:  # G independent MLPs on the shared normalised latent, replacing MLPModel's single MLP
            self.mlp = ParallelMLPHeads(
                [MLP(self._get_latent_dim(), 1, hidden_dims, activation) for _ in range(num_critics)]
            )

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict``, with a clear error when the checkpoint's critic layout differs.

        Raises:
            ValueError: the checkpoint has separate critics and this model a shared trunk, or the reverse.
        """
        saved_shared = not any(k.startswith("mlp.0.0.") for k in state_dict) and any(
            k.startswith("mlp.") for k in state_dict
        )
        if saved_shared != self.shared_trunk:
            have, want = (
                ("a shared trunk", "separate critics") if saved_shared else ("separate critics", "a shared trunk")
            )
            raise ValueError(
                f"The checkpoint's critic has {have} but this run builds {want}: set "
                f"train.critic_shared_trunk={str(saved_shared).lower()} to resume it, or start a new run."
            )
        return super().load_state_dict(state_dict, strict=strict, assign=assign)


class TanhActorModel(MLPModel):
    """rsl_rl ``MLPModel`` whose MLP output (the Gaussian mean) passes through Tanh, as in HoST's actor.

    The Tanh is appended to ``self.mlp`` (an ``nn.Sequential``), so the deterministic output, the distribution mean
    and the JIT/ONNX exports (which deep-copy ``model.mlp``) all include it. Sampled actions are *not* squashed:
    they are ``Normal(tanh(mlp(x)), std)`` samples, as in HoST. Only distributions whose MLP input equals the
    action dimension (e.g. ``GaussianDistribution``, state-independent std) are accepted, so the Tanh acts on the
    mean alone; parameter names in the state dict are the same as for a plain ``MLPModel`` (Tanh has none).
    """

    def __init__(
        self,
        obs: TensorDict,
        obs_groups: dict[str, list[str]],
        obs_set: str,
        output_dim: int,
        hidden_dims: tuple[int, ...] | list[int] = (512, 256, 128),
        activation: str = "elu",
        obs_normalization: bool = False,
        distribution_cfg: dict | None = None,
    ) -> None:
        """Initialize the model; arguments as :class:`~rsl_rl.models.MLPModel` (HoST: hidden [512, 256, 128], ELU)."""
        super().__init__(
            obs, obs_groups, obs_set, output_dim, hidden_dims, activation, obs_normalization, distribution_cfg
        )
        if self.distribution is not None and self.distribution.input_dim != output_dim:
            raise ValueError(
                "TanhActorModel needs a distribution whose MLP input is the mean only (input_dim == output_dim,"
                f" e.g. GaussianDistribution); got {type(self.distribution).__name__} with input_dim"
                f" {self.distribution.input_dim}."
            )
        self.mlp.append(nn.Tanh())
