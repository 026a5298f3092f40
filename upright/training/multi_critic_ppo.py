"""Multi-critic PPO (HoST, Huang et al., "Learning Humanoid Standing-up Control across Diverse Postures", RSS 2025).

The reward is split into G groups (HoST: task, regularization, style, post-task). Each group has its own critic and
its own GAE; each group's advantage is normalised over the whole rollout and the policy is trained on the weighted
sum ``A = sum_g w_g * Ahat_g`` (no re-normalisation after the sum; :mod:`upright.training.group_advantages`). The
value loss is rsl_rl's clipped loss applied element-wise to the (B, G) values and averaged over batch and critics.
Method and constants:
HoST's ``rsl_rl/rsl_rl/algorithms/ppo.py``, ``rsl_rl/rsl_rl/modules/actor_critic.py`` and
``rsl_rl/rsl_rl/storage/rollout_storage.py`` (InternRobotics/HoST at commit 70bb580949a3).

HoST's L2C2 smoothness term (spec section 5; Kobayashi, "L2C2: Locally Lipschitz Continuous Constraint", 2022) is
added to the PPO loss: for the mixed state ``s_mix = s_t + u * (s_{t+1} - s_t)``, ``u ~ U(-1, 1)`` per transition
and ``u = 0`` where the episode ended after t,
``L = lambda_pi * mean_B ||mu(s_t) - mu(s_mix)||^2 + lambda_V * mean_B ||V(s_t) - V(s_mix)||^2`` with ``V`` the
(B, G) values of the G critics (see :func:`~upright.training.l2c2.l2c2_losses`).

:class:`MultiCriticPPO` plugs into rsl_rl's unmodified ``OnPolicyRunner`` through
``cfg["algorithm"]["class_name"] = "upright.training.multi_critic_ppo:MultiCriticPPO"``. The environment must put the
per-group rewards, float (N, G), in ``extras["reward_groups"]``; the scalar reward returned by ``env.step`` is used
only by the runner's logger.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn
from rsl_rl.algorithms import PPO
from rsl_rl.env import VecEnv
from rsl_rl.extensions import resolve_symmetry_config
from rsl_rl.models import MLPModel
from rsl_rl.utils import resolve_class, resolve_obs_groups
from tensordict import TensorDict

from .group_advantages import combine_group_advantages, compute_group_gae, normalize_group_advantages
from .l2c2 import HOST_L2C2_POLICY_COEF, HOST_L2C2_VALUE_COEF, l2c2_losses, mix_observations, sample_l2c2_mix_weights
from .multi_critic_model import MultiCriticModel
from .multi_critic_storage import MultiCriticRolloutStorage
from .std_learning_rate import FIXED_LR_KEY, GROUP_KEY, build_optimizer, convert_optimizer_state

LR_MIN, LR_MAX = 1e-5, 1e-2
"""Bounds of rsl_rl 5.5.1's adaptive-KL learning rate (``PPO.update``)."""
DEFAULT_GROUP_WEIGHTS: tuple[float, ...] = (2.5, 0.1, 1.0, 1.0)
"""HoST ``reward_group_weights`` for (task, regularization, style, post-task) (HoST
``legged_gym/legged_gym/envs/g1/g1_config_ground.py``)."""


class MultiCriticPPO(PPO):
    """PPO with one critic per reward group and HoST's weighted combination of normalised group advantages.

    Reuses rsl_rl's :class:`~rsl_rl.algorithms.PPO` for acting, ``save``/``load`` (actor, critic, optimizer; the
    state-dict layout is unchanged by L2C2), gradient reduction across processes and export. :meth:`update` is rsl_rl
    5.5.1's update loop (the clipped value loss works element-wise on the (B, G) values/returns and ``.mean()``
    averages over batch and critics; the (B, 1) combined advantage is squeezed as usual; adaptive-KL learning rate,
    entropy bonus, symmetry, gradient clipping) plus HoST's L2C2 term; with both L2C2 weights 0 it performs exactly
    rsl_rl's update. Not supported: RND, per-mini-batch advantage normalisation, recurrent models.
    """

    critic: MultiCriticModel
    """The G critics, values (B, G)."""

    storage: MultiCriticRolloutStorage
    """Rollout storage with (T, N, G) rewards/values/returns."""

    group_weights: torch.Tensor
    """Group weights w_g, float (G,)."""

    group_names: list[str]
    """Names of the reward groups, used for the per-group entries of the loss dict."""

    l2c2_policy_coef: float
    """lambda_pi, weight of the policy L2C2 term (HoST 0.111; 0 with ``l2c2_value_coef`` 0 disables L2C2)."""

    l2c2_value_coef: float
    """lambda_V, weight of the value L2C2 term (HoST 0.0111)."""

    def __init__(
        self,
        actor: MLPModel,
        critic: MultiCriticModel,
        storage: MultiCriticRolloutStorage,
        group_weights: Sequence[float] = DEFAULT_GROUP_WEIGHTS,
        group_names: Sequence[str] | None = None,
        l2c2_policy_coef: float = HOST_L2C2_POLICY_COEF,
        l2c2_value_coef: float = HOST_L2C2_VALUE_COEF,
        std_learning_rate: float | None = None,
        critic_learning_rate: float | None = None,
        mask_unapplied_actions: bool = False,
        **kwargs,
    ) -> None:
        """Initialize the algorithm.

        Args:
            actor: Policy model.
            critic: Multi-critic model with ``num_critics == len(group_weights)``.
            storage: Multi-critic storage with ``num_groups == len(group_weights)``.
            group_weights: Weight of each group's normalised advantage (default HoST [2.5, 0.1, 1.0, 1.0]).
            group_names: Optional group names for logging; default ``group0``, ``group1``, ...
            l2c2_policy_coef: lambda_pi of the L2C2 term (default HoST's 0.111, spec section 5); >= 0.
            l2c2_value_coef: lambda_V of the L2C2 term (default HoST's 0.0111, spec section 5); >= 0. Both 0: no
                L2C2 (the update is then exactly rsl_rl's).
            std_learning_rate: Fixed Adam learning rate of the action std in a parameter group of its own, outside
                the adaptive-KL schedule (see :mod:`upright.training.std_learning_rate`); None (default): one group,
                as in rsl_rl.
            critic_learning_rate: Fixed Adam learning rate of the critics in a parameter group of their own, outside
                the adaptive-KL schedule (which follows the actor's KL; the audit of 2026-11 found it pins the critics
                at the 1e-5 floor); None (default): the critics share the schedule's rate, as in rsl_rl.
            mask_unapplied_actions: Zero the combined advantage of transitions whose action the env did not apply
                (``extras["action_applied"]``, (N,) bool: the standup env's unactuated start, where the robot falls
                whatever the policy does), so they add nothing to the policy gradient; the critics still learn from
                them. False (default): every transition counts, as in rsl_rl and HoST.
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
        if l2c2_policy_coef < 0 or l2c2_value_coef < 0:
            raise ValueError(f"MultiCriticPPO: L2C2 weights must be >= 0, got {l2c2_policy_coef}, {l2c2_value_coef}.")
        if actor.is_recurrent:
            raise ValueError("MultiCriticPPO does not support recurrent actors.")
        super().__init__(actor, critic, storage, **kwargs)
        self.group_weights = torch.tensor(list(group_weights), dtype=torch.float32, device=self.device)
        self.group_names = list(group_names) if group_names is not None else [f"group{i}" for i in range(num_groups)]
        self.l2c2_policy_coef = float(l2c2_policy_coef)
        self.l2c2_value_coef = float(l2c2_value_coef)
        self.std_learning_rate = std_learning_rate
        self.critic_learning_rate = critic_learning_rate
        self.mask_unapplied_actions = bool(mask_unapplied_actions)
        self._applied = torch.ones(storage.num_transitions_per_env, storage.num_envs, 1, device=self.device)
        """(T, N, 1) float: 1 where the rollout's action was applied (see ``mask_unapplied_actions``)."""
        self._kl_sum, self._kl_count = 0.0, 0
        self.actor_frozen = False
        """Critic warm-up (``train.critic_warmup_iterations``): the update's loss is the value loss alone (no
        gradient reaches the actor), the adaptive-KL schedule pauses and the actor's normaliser is not updated."""
        if std_learning_rate is not None or critic_learning_rate is not None:
            self.optimizer = build_optimizer(
                self.optimizer, self.actor, self.critic, std_learning_rate, critic_learning_rate
            )

    @property
    def l2c2_enabled(self) -> bool:
        """Whether the update adds the L2C2 term (either weight > 0)."""
        return self.l2c2_policy_coef > 0.0 or self.l2c2_value_coef > 0.0

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
        if self.mask_unapplied_actions and "action_applied" in extras and self.storage.step < self._applied.shape[0]:
            self._applied[self.storage.step] = extras["action_applied"].to(self.device).reshape(-1, 1).float()
        # The parent's own timeout bootstrap assumes a scalar reward: bootstrap here and hide the key from it.
        parent_extras = {key: value for key, value in extras.items() if key not in ("time_outs", "action_applied")}
        super().process_env_step(obs, group_rewards, dones, parent_extras)

    def compute_returns(self, obs: TensorDict) -> None:
        """Per-group GAE, per-group rollout normalisation and the weighted combined advantage (T, N, 1).

        ``obs`` (TensorDict (N, ...)), the observation after the last step, is also kept in the storage as s_{t+1}
        of the last transition (for L2C2).
        """
        st = self.storage
        st.set_last_observations(obs)
        last_values = self.critic(obs).detach()
        returns, advantages = compute_group_gae(st.rewards, st.values, st.dones, last_values, self.gamma, self.lam)
        st.returns.copy_(returns)
        st.group_advantages.copy_(normalize_group_advantages(advantages))
        st.advantages.copy_(combine_group_advantages(advantages, self.group_weights))
        if self.mask_unapplied_actions:
            st.advantages.mul_(self._applied)
            self.masked_fraction = float(1.0 - self._applied.mean())
            """Fraction of the last rollout's transitions left out of the policy gradient."""
            self._applied.fill_(1.0)

    def update(self) -> dict[str, float]:
        """PPO update over ``num_learning_epochs`` x ``num_mini_batches`` mini-batches, with HoST's L2C2 term.

        The loop is rsl_rl 5.5.1's ``PPO.update`` (same operations in the same order, so with both L2C2 weights 0
        the parameters after the update are exactly rsl_rl's), with, per mini-batch of B transitions,
        ``loss += l2c2_policy_coef * policy_term + l2c2_value_coef * value_term`` (:func:`l2c2_losses` on the
        mixed state of :func:`mix_observations`, ``u`` from :func:`sample_l2c2_mix_weights`; with symmetry
        augmentation only the B original transitions enter L2C2). The observation normalisers are updated after all
        epochs from the rollout's observations only, as in rsl_rl. While :attr:`actor_frozen` (critic warm-up) the
        loss is the value loss (and the L2C2 value term) alone, the schedule pauses and the actor's normaliser stays.

        Returns:
            Mean losses over all mini-batches: ``value``, ``surrogate``, ``entropy`` (and ``symmetry``) as rsl_rl;
            ``l2c2_policy`` and ``l2c2_value``, the unweighted L2C2 terms (only when L2C2 is enabled); and
            ``value_mse_<group>``, the mean squared error between the critic values recorded during the rollout and
            the GAE returns of that group, over the whole rollout, before the update; with the adaptive schedule,
            ``kl``, the mean over mini-batches of KL(rollout policy || current policy) that the schedule measured
            before each step (nats, summed over action dimensions, averaged over the mini-batch).
        """
        st = self.storage
        actor_frozen = self.actor_frozen
        value_mse = (st.returns - st.values).pow(2).mean(dim=(0, 1)).tolist()
        use_l2c2 = self.l2c2_enabled
        mean_value_loss = 0.0
        mean_surrogate_loss = 0.0
        mean_entropy = 0.0
        mean_symmetry_loss = 0.0 if self.symmetry else None
        mean_l2c2_policy = 0.0
        mean_l2c2_value = 0.0
        self._kl_sum, self._kl_count = 0.0, 0

        generator = st.mini_batch_generator(
            self.num_mini_batches, self.num_learning_epochs, with_next_observations=use_l2c2
        )
        for batch in generator:
            original_batch_size = batch.observations.batch_size[0]
            observations = batch.observations  # s_t before any symmetry augmentation

            if self.symmetry:
                self.symmetry.augment_batch(batch, original_batch_size)

            with torch.amp.autocast(  # type: ignore
                device_type=torch.device(self.device).type, enabled=self.use_mixed_precision, dtype=torch.bfloat16
            ):
                # Recompute log probs, entropy and values with the current parameters
                self.actor(
                    batch.observations,
                    masks=batch.masks,
                    hidden_state=batch.hidden_states[0],
                    stochastic_output=True,
                )
                actions_log_prob = self.actor.get_output_log_prob(batch.actions)  # type: ignore
                values = self.critic(batch.observations, masks=batch.masks, hidden_state=batch.hidden_states[1])
                distribution_params = tuple(p[:original_batch_size] for p in self.actor.output_distribution_params)
                entropy = self.actor.output_entropy[:original_batch_size]

                if self.desired_kl is not None and self.schedule == "adaptive" and not actor_frozen:
                    self._adapt_learning_rate(batch.old_distribution_params, distribution_params)  # type: ignore

                # Surrogate loss
                ratio = torch.exp(actions_log_prob - torch.squeeze(batch.old_actions_log_prob))  # type: ignore
                surrogate = -torch.squeeze(batch.advantages) * ratio  # type: ignore
                surrogate_clipped = -torch.squeeze(batch.advantages) * torch.clamp(  # type: ignore
                    ratio, 1.0 - self.clip_param, 1.0 + self.clip_param
                )
                surrogate_loss = torch.max(surrogate, surrogate_clipped).mean()

                # Value function loss, element-wise over the (B, G) values of the G critics
                if self.use_clipped_value_loss:
                    value_clipped = batch.values + (values - batch.values).clamp(-self.clip_param, self.clip_param)
                    value_losses = (values - batch.returns).pow(2)
                    value_losses_clipped = (value_clipped - batch.returns).pow(2)
                    value_loss = torch.max(value_losses, value_losses_clipped).mean()
                else:
                    value_loss = (batch.returns - values).pow(2).mean()

                if actor_frozen:  # critic warm-up: no gradient reaches the actor (its parameters get none)
                    loss = self.value_loss_coef * value_loss
                else:
                    loss = surrogate_loss + self.value_loss_coef * value_loss - self.entropy_coef * entropy.mean()

                if self.symmetry:
                    symmetry_loss = self.symmetry.compute_loss(self.actor, batch, original_batch_size)
                    if self.symmetry.use_mirror_loss and not actor_frozen:
                        loss = loss + self.symmetry.mirror_loss_coeff * symmetry_loss

                # L2C2 (HoST spec section 5) on the original transitions
                if use_l2c2:
                    u = sample_l2c2_mix_weights(batch.transition_dones)  # type: ignore
                    mixed = mix_observations(observations, batch.next_observations, u)  # type: ignore
                    l2c2_policy, l2c2_value = l2c2_losses(
                        self.actor,
                        self.critic,
                        self.actor.output_mean[:original_batch_size],
                        values[:original_batch_size],
                        mixed,
                    )
                    if actor_frozen:
                        loss = loss + self.l2c2_value_coef * l2c2_value
                    else:
                        loss = loss + self.l2c2_policy_coef * l2c2_policy + self.l2c2_value_coef * l2c2_value

            self.optimizer.zero_grad()
            loss.backward()
            if self.is_multi_gpu:
                self.reduce_parameters()
            nn.utils.clip_grad_norm_(self.actor.parameters(), self.max_grad_norm)
            nn.utils.clip_grad_norm_(self.critic.parameters(), self.max_grad_norm)
            self.optimizer.step()

            mean_value_loss += value_loss.item()
            mean_surrogate_loss += surrogate_loss.item()
            mean_entropy += entropy.mean().item()
            if mean_symmetry_loss is not None:
                mean_symmetry_loss += symmetry_loss.item()
            if use_l2c2:
                mean_l2c2_policy += l2c2_policy.item()
                mean_l2c2_value += l2c2_value.item()

        # Update the observation normalizers (rollout observations only)
        obs = st.observations.flatten(0, 1)
        if not actor_frozen:
            self.actor.update_normalization(obs)  # type: ignore
        self.critic.update_normalization(obs)  # type: ignore

        num_updates = self.num_learning_epochs * self.num_mini_batches
        loss_dict = {
            "value": mean_value_loss / num_updates,
            "surrogate": mean_surrogate_loss / num_updates,
            "entropy": mean_entropy / num_updates,
        }
        if mean_symmetry_loss is not None:
            loss_dict["symmetry"] = mean_symmetry_loss / num_updates
        if use_l2c2:
            loss_dict["l2c2_policy"] = mean_l2c2_policy / num_updates
            loss_dict["l2c2_value"] = mean_l2c2_value / num_updates
        for name, mse in zip(self.group_names, value_mse):
            loss_dict[f"value_mse_{name}"] = mse
        if self._kl_count:
            loss_dict["kl"] = self._kl_sum / self._kl_count

        st.clear()
        return loss_dict

    def _adapt_learning_rate(self, old_params: tuple[torch.Tensor, ...], new_params: tuple[torch.Tensor, ...]) -> None:
        """rsl_rl 5.5.1's adaptive-KL schedule: lr / 1.5 if KL > 2 * desired, lr * 1.5 if KL < desired / 2
        (clamped to [:data:`LR_MIN`, :data:`LR_MAX`]); rank 0 decides and broadcasts in multi-process runs."""
        with torch.inference_mode():
            kl = self.actor.get_kl_divergence(old_params, new_params)
            kl_mean = torch.mean(kl)
            if self.is_multi_gpu:
                torch.distributed.all_reduce(kl_mean, op=torch.distributed.ReduceOp.SUM)
                kl_mean /= self.gpu_world_size
            self._kl_sum += kl_mean.item()
            self._kl_count += 1
            if self.gpu_global_rank == 0:
                if kl_mean > self.desired_kl * 2.0:
                    self.learning_rate = max(LR_MIN, self.learning_rate / 1.5)
                elif kl_mean < self.desired_kl / 2.0 and kl_mean > 0.0:
                    self.learning_rate = min(LR_MAX, self.learning_rate * 1.5)
            if self.is_multi_gpu:
                lr_tensor = torch.tensor(self.learning_rate, device=self.device)
                torch.distributed.broadcast(lr_tensor, src=0)
                self.learning_rate = lr_tensor.item()
            for param_group in self.optimizer.param_groups:
                if not param_group.get(FIXED_LR_KEY, False):
                    param_group["lr"] = self.learning_rate

    def set_actor_frozen(self, frozen: bool) -> None:
        """Start or end the critic warm-up (:attr:`actor_frozen`). When the actor joins under the adaptive schedule,
        the scheduled learning rate restarts at its floor (:data:`LR_MIN`) and rises from there (x1.5 per mini-batch
        while KL < desired / 2): the actor's Adam moments are empty, so its first steps move every weight by about
        the learning rate. A critic in the scheduled group (``train.critic_learning_rate`` unset) restarts from the
        floor with it; one in its own group keeps its fixed rate. Measured: joining a trained get-up actor at the
        warm-up's 1e-3 gave a surrogate loss of 0.28 in that iteration and HoST success 24 % -> 0 % within 8
        iterations (``docs/experiments/2026-11-27_getup_warm_start.md``)."""
        if self.actor_frozen and not frozen and self.desired_kl is not None and self.schedule == "adaptive":
            self.learning_rate = LR_MIN
            for group in self.optimizer.param_groups:
                if not group.get(FIXED_LR_KEY, False):
                    group["lr"] = LR_MIN
        self.actor_frozen = bool(frozen)

    def load(self, loaded_dict: dict, load_cfg: dict | None, strict: bool) -> bool:
        """rsl_rl's load, with the optimizer state re-indexed when the checkpoint was written with the other
        ``std_learning_rate`` layout (one vs two parameter groups); the std group then takes this run's rate."""
        if (load_cfg is None or load_cfg.get("optimizer")) and "optimizer_state_dict" in loaded_dict:
            loaded_dict = dict(loaded_dict)
            loaded_dict["optimizer_state_dict"] = convert_optimizer_state(
                loaded_dict["optimizer_state_dict"],
                self._raw_actor,
                self._raw_critic,
                self.std_learning_rate,
                self.critic_learning_rate,
            )
        result = super().load(loaded_dict, load_cfg, strict)
        rates = {"std": self.std_learning_rate, "critic": self.critic_learning_rate}
        for group in self.optimizer.param_groups:
            if group.get(FIXED_LR_KEY, False):
                group["lr"] = rates[group.get(GROUP_KEY, "std")]
        return result

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
