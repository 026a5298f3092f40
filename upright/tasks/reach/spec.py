"""``task=reach``: a Franka Panda brings its gripper site to a commanded point (Isaac Lab's ``Isaac-Reach-Franka-v0``
rewards, MuJoCo Playground's Panda actions). A task of config and term files on the env core: nothing outside this
folder names it."""

from __future__ import annotations

from upright.tasks.spec import TaskSpec

SPEC = TaskSpec(
    name="reach",
    description="a Franka Panda brings its gripper to a commanded point (Isaac Lab's Franka reach)",
    env_cfg="upright.tasks.reach.config:ReachEnvCfg",
    sim_cfg="upright.tasks.lift.config:lift_sim_cfg",
    env="upright.tasks.reach.env:ReachEnv",
    metadata="upright.tasks.reach.metadata:reach_policy_metadata",
    train_defaults={
        # Isaac Lab's rsl_rl reach config (agents/rsl_rl_ppo_cfg.py): [64, 64] ELU actor and critic, 24 steps per env,
        # 5 epochs x 4 mini-batches, learning rate 1e-3 adaptive, entropy 0.01, gamma 0.99, lambda 0.95
        "max_iterations": 1000,
        "num_steps_per_env": 24,
        "save_interval": 50,
        "group_weights": [1.0],
        "actor_hidden_dims": [64, 64],
        "critic_hidden_dims": [64, 64],
        "actor_tanh": False,
        "init_noise_std": 1.0,
        "entropy_coef": 0.01,
        "l2c2_policy_coef": 0.0,
        "l2c2_value_coef": 0.0,
    },
    robot="franka_emika_panda",
)
"""The reach task (:mod:`upright.tasks.spec`)."""
