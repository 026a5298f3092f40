"""rsl-rl-lib's runner dict from upright's ``train.*`` settings (:class:`~upright.conf.train_cfg.TrainCfg`): what
the train loop, export, the policy loaders and the benchmarks build their runner from. No torch or rsl-rl import."""

from __future__ import annotations

from omegaconf import DictConfig


def rsl_rl_config(train: DictConfig) -> dict:
    """Translate :class:`~upright.conf.train_cfg.TrainCfg` into rsl-rl-lib's runner dict (MultiCriticPPO by class
    name)."""
    return {
        "num_steps_per_env": train.num_steps_per_env,
        "save_interval": train.save_interval,
        "obs_groups": {"actor": ["actor"], "critic": ["critic"]},
        "logger": "tensorboard",
        "check_for_nan": True,
        "algorithm": {
            "class_name": "upright.training.multi_critic_ppo:MultiCriticPPO",
            "group_weights": list(train.group_weights),
            "num_learning_epochs": train.num_learning_epochs,
            "num_mini_batches": train.num_mini_batches,
            "clip_param": train.clip_param,
            "gamma": train.gamma,
            "lam": train.lam,
            "value_loss_coef": train.value_loss_coef,
            "entropy_coef": train.entropy_coef,
            "learning_rate": train.learning_rate,
            "max_grad_norm": train.max_grad_norm,
            "schedule": train.schedule,
            "desired_kl": train.desired_kl,
            "l2c2_policy_coef": train.l2c2_policy_coef,
            "l2c2_value_coef": train.l2c2_value_coef,
            "std_learning_rate": train.get("std_learning_rate"),
            "critic_learning_rate": train.get("critic_learning_rate"),
            "mask_unapplied_actions": bool(train.get("mask_unapplied_actions", False)),
            "use_clipped_value_loss": True,
            "use_mixed_precision": bool(train.get("use_mixed_precision", False)),
        },
        "actor": {
            "class_name": (
                "upright.training.multi_critic_model:TanhActorModel"
                if train.get("actor_tanh", True)
                else "rsl_rl.models:MLPModel"
            ),
            "hidden_dims": list(train.actor_hidden_dims),
            "activation": "elu",
            "obs_normalization": train.obs_normalization,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": train.init_noise_std},
        },
        "critic": {
            "class_name": "upright.training.multi_critic_model:MultiCriticModel",
            "hidden_dims": list(train.critic_hidden_dims),
            "activation": "elu",
            "obs_normalization": train.obs_normalization,
            "shared_trunk": bool(train.get("critic_shared_trunk", False)),
        },
    }
