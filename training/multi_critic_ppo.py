"""Multi-critic PPO (HoST, Huang et al., "Learning Humanoid Standing-up Control across Diverse Postures", RSS 2025).

The reward is split into G groups (HoST: task, regularization, style, post-task). Each group has its own critic and
its own GAE; each group's advantage is normalised over the whole rollout and the policy is trained on the weighted
sum ``A = sum_g w_g * Ahat_g`` (no re-normalisation after the sum). The value loss is rsl_rl's clipped loss applied
element-wise to the (B, G) values and averaged over batch and critics. Method and constants:
``/work/shared/reference/host_standup.md`` section 3 ("Multi-critic PPO").

:class:`MultiCriticPPO` plugs into rsl_rl's unmodified ``OnPolicyRunner`` through
``cfg["algorithm"]["class_name"] = "upright.training.multi_critic_ppo:MultiCriticPPO"``. The environment must put the
per-group rewards, float (N, G), in ``extras["reward_groups"]``; the scalar reward returned by ``env.step`` is used
only by the runner's logger.
"""

from __future__ import annotations

import torch
from collections.abc import Sequence
from tensordict import TensorDict

from rsl_rl.algorithms import PPO
from rsl_rl.env import VecEnv
from rsl_rl.extensions import resolve_symmetry_config
from rsl_rl.models import MLPModel
from rsl_rl.utils import resolve_class, resolve_obs_groups

from .multi_critic_model import MultiCriticModel
from .multi_critic_storage import MultiCriticRolloutStorage

DEFAULT_GROUP_WEIGHTS: tuple[float, ...] = (2.5, 0.1, 1.0, 1.0)
"""HoST ``reward_group_weights`` for (task, regularization, style, post-task) (host_standup.md section 3)."""

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


class MultiCriticPPO(PPO):
    """PPO with one critic per reward group and HoST's weighted combination of normalised group advantages.

    Reuses rsl_rl's :class:`~rsl_rl.algorithms.PPO` for acting, the update (the clipped value loss there works
    element-wise on the (B, G) values/returns and ``.mean()`` averages over batch and critics; the (B, 1) combined
    advantage is squeezed as usual), the adaptive-KL learning rate, entropy bonus, gradient clipping,
    ``save``/``load`` (actor, critic, optimizer) and export. Not supported: RND, per-mini-batch advantage
    normalisation, recurrent critics.
    """

    critic: MultiCriticModel
    """The G critics, values (B, G)."""

    storage: MultiCriticRolloutStorage
    """Rollout storage with (T, N, G) rewards/values/returns."""

    group_weights: torch.Tensor
    """Group weights w_g, float (G,)."""

    group_names: list[str]
    """Names of the reward groups, used for the per-group entries of the loss dict."""

    def __init__(
        self,
        actor: MLPModel,
        critic: MultiCriticModel,
        storage: MultiCriticRolloutStorage,
        group_weights: Sequence[float] = DEFAULT_GROUP_WEIGHTS,
        group_names: Sequence[str] | None = None,
        **kwargs,
    ) -> None:
        """Initialize the algorithm.

        Args:
            actor: Policy model.
            critic: Multi-critic model with ``num_critics == len(group_weights)``.
            storage: Multi-critic storage with ``num_groups == len(group_weights)``.
            group_weights: Weight of each group's normalised advantage (default HoST [2.5, 0.1, 1.0, 1.0]).
            group_names: Optional group names for logging; default ``group0``, ``group1``, ...
            **kwargs: All other arguments of :class:`~rsl_rl.algorithms.PPO` (clip_param, gamma, lam, ...).
        """
        if kwargs.get("rnd_cfg"):
            raise ValueError("MultiCriticPPO does not support RND (intrinsic rewards are not split into groups).")
        if kwargs.get("normalize_advantage_per_mini_batch"):
            raise ValueError("MultiCriticPPO normalises each group's advantages over the whole rollout (HoST).")
        num_groups = len(group_weights)
        if getattr(critic, "num_critics", None) != num_groups:
            raise ValueError(
                f"MultiCriticPPO: critic has {getattr(critic, 'num_critics', None)} critics, "
                f"but group_weights has {num_groups} entries."
            )
        if critic.is_recurrent:
            raise ValueError("MultiCriticPPO does not support recurrent critics.")
        if storage.num_groups != num_groups:
            raise ValueError(f"MultiCriticPPO: storage has {storage.num_groups} groups, expected {num_groups}.")
        if group_names is not None and len(group_names) != num_groups:
            raise ValueError(f"MultiCriticPPO: {len(group_names)} group names for {num_groups} groups.")
        super().__init__(actor, critic, storage, **kwargs)
        self.group_weights = torch.tensor(list(group_weights), dtype=torch.float32, device=self.device)
        self.group_names = list(group_names) if group_names is not None else [f"group{i}" for i in range(num_groups)]

    def process_env_step(
        self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, torch.Tensor]
    ) -> None:
        """Record one step, learning from the group rewards ``extras["reward_groups"]`` (float (N, G)).

        ``rewards`` ((N,), the env's weighted sum) is ignored here; the runner logs it. Timeouts
        (``extras["time_outs"]``, (N,)) are bootstrapped per critic: ``r_g += gamma * V_g(s_t) * timeout``.
        """
        if "reward_groups" not in extras:
            raise KeyError("MultiCriticPPO needs the per-group rewards, float (N, G), in extras['reward_groups'].")
        group_rewards = extras["reward_groups"].to(device=self.device, dtype=torch.float32)
        expected = (self.storage.num_envs, self.storage.num_groups)
        if tuple(group_rewards.shape) != expected:
            raise ValueError(f"extras['reward_groups'] must have shape {expected}, got {tuple(group_rewards.shape)}.")
        if "time_outs" in extras:
            time_outs = extras["time_outs"].to(self.device).reshape(-1, 1).to(group_rewards.dtype)
            group_rewards = group_rewards + self.gamma * self.transition.values * time_outs  # type: ignore
        # The parent's own timeout bootstrap assumes a scalar reward: bootstrap here and hide the key from it.
        parent_extras = {key: value for key, value in extras.items() if key != "time_outs"}
        super().process_env_step(obs, group_rewards, dones, parent_extras)

    def compute_returns(self, obs: TensorDict) -> None:
        """Per-group GAE, per-group rollout normalisation and the weighted combined advantage (T, N, 1)."""
        st = self.storage
        last_values = self.critic(obs).detach()
        returns, advantages = compute_group_gae(st.rewards, st.values, st.dones, last_values, self.gamma, self.lam)
        st.returns.copy_(returns)
        st.group_advantages.copy_(normalize_group_advantages(advantages))
        st.advantages.copy_(combine_group_advantages(advantages, self.group_weights))

    def update(self) -> dict[str, float]:
        """Run rsl_rl's PPO update; add ``value_mse_<group>`` entries to the loss dict.

        ``value_mse_<group>`` is the mean squared error between the critic values recorded during the rollout and
        the GAE returns of that group, over the whole rollout, before the update (free to compute; the parent's
        ``value`` entry is the clipped training loss averaged over groups, mini-batches and epochs).
        """
        st = self.storage
        value_mse = (st.returns - st.values).pow(2).mean(dim=(0, 1)).tolist()
        loss_dict = super().update()
        for name, mse in zip(self.group_names, value_mse):
            loss_dict[f"value_mse_{name}"] = mse
        return loss_dict

    @staticmethod
    def construct_algorithm(obs: TensorDict, env: VecEnv, cfg: dict, device: str) -> MultiCriticPPO:
        """Build actor, G-critic model and multi-critic storage from the runner config, then the algorithm.

        ``cfg["algorithm"]["group_weights"]`` (default HoST's) sets G; ``cfg["critic"]["num_critics"]`` is filled in
        with G (an explicit different value is an error). Classes are resolved by name with rsl_rl's
        ``resolve_class``, as in :meth:`rsl_rl.algorithms.PPO.construct_algorithm`.
        """
        alg_class, alg_cfg = resolve_class(cfg["algorithm"])
        actor_class, actor_cfg = resolve_class(cfg["actor"])
        critic_class, critic_cfg = resolve_class(cfg["critic"])
        if alg_cfg.get("rnd_cfg"):
            raise ValueError("MultiCriticPPO does not support RND.")
        if alg_cfg.pop("share_cnn_encoders", None):
            raise ValueError("MultiCriticPPO does not support share_cnn_encoders (MultiCriticModel is an MLP).")

        cfg["obs_groups"] = resolve_obs_groups(obs, cfg["obs_groups"], ["actor", "critic"])
        alg_cfg = resolve_symmetry_config(alg_cfg, env)

        num_groups = len(alg_cfg.setdefault("group_weights", list(DEFAULT_GROUP_WEIGHTS)))
        if critic_cfg.setdefault("num_critics", num_groups) != num_groups:
            raise ValueError(
                f"critic num_critics={critic_cfg['num_critics']} does not match len(group_weights)={num_groups}."
            )

        actor: MLPModel = actor_class(obs, cfg["obs_groups"], "actor", env.num_actions, **actor_cfg).to(device)
        print(f"Actor Model: {actor}")
        critic: MultiCriticModel = critic_class(obs, cfg["obs_groups"], "critic", 1, **critic_cfg).to(device)
        print(f"Critic Model: {critic}")

        storage = MultiCriticRolloutStorage(
            env.num_envs, cfg["num_steps_per_env"], obs, [env.num_actions], num_groups, device
        )
        alg: MultiCriticPPO = alg_class(
            actor, critic, storage, device=device, **alg_cfg, multi_gpu_cfg=cfg.get("multi_gpu")
        )
        alg.compile(cfg.get("torch_compile_mode"))
        return alg
