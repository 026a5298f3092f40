"""``task=standup``: a Unitree G1 stands up from the ground (HoST's MDP, ``recipe=host``) or gets up from any start
(``recipe=getup``), and its variants (``terrain=``, ``posture=``)."""

from __future__ import annotations

from typing import Any

from upright.tasks.spec import TaskSpec

GETUP: dict[str, Any] = {
    # the get-up MDP of MuJoCo Playground's Go1Getup and mujocolab/mjlab_playground's g1-getup branch
    # (upright.tasks.standup.getup): standing and dropped starts, actions relative to the measured q (scale 0.6,
    # 0.6 s settle after a drop), 5 Hz reflected-inertia gains, one reward group, 6 s episodes, no pull force;
    # PPO as mjlab_playground's rl_cfg.py (24 steps per env, [512, 256, 128] ELU, unbounded Gaussian, std 1.0)
    "env.mdp": "getup",
    "env.episode_length_s": 6.0,
    "env.curriculum.enabled": False,
    "env.curriculum.beta_init": 0.6,
    "env.curriculum.beta_min": 0.6,
    "train.num_steps_per_env": 24,
    "train.group_weights": [1.0],
    "train.critic_hidden_dims": [512, 256, 128],
    "train.actor_tanh": False,
    "train.init_noise_std": 1.0,
    "train.l2c2_policy_coef": 0.0,
    "train.l2c2_value_coef": 0.0,
    "train.save_interval": 25,
}
"""``recipe=getup``."""

VLM_KNEEL: dict[str, Any] = {
    # a G1 pose from one sentence (VLM-RMs, Rocamonde et al., ICLR 2024; docs/vlm_reward.md): the get-up MDP with every
    # start standing and its standing terms off (its regularisation kept), plus a CLIP reward for the prompt in its own
    # group and critic. The paper learned kneeling only with its largest CLIP (ViT-bigG-14); needs a GPU. Not tuned,
    # and not trained here (no weights can be downloaded on the machine it was written on).
    **GETUP,
    "env.num_envs": 256,
    "env.getup.stand_fraction": 1.0,
    "env.getup.fall_fraction": 0.0,
    "env.getup.rewards.orientation": 0.0,
    "env.getup.rewards.torso_height": 0.0,
    "env.getup.rewards.pelvis_height": 0.0,
    "env.getup.rewards.posture": 0.0,
    "env.vlm_reward.enabled": True,
    "env.vlm_reward.model": "laion/CLIP-ViT-bigG-14-laion2B-39B-b160k",
    "env.vlm_reward.goal_prompt": "a humanoid robot kneeling",
    "env.vlm_reward.baseline_prompt": "a humanoid robot",
    "env.vlm_reward.alpha": 0.5,
    "env.vlm_reward.every": 2,
    "env.vlm_reward.dtype": "bfloat16",
    "env.vlm_reward.group": "vlm",
    "train.group_weights": [0.1, 1.0],
}
"""``recipe=vlm_kneel``."""

SPEC = TaskSpec(
    name="standup",
    description="a Unitree G1 stands up from the ground (HoST; recipe=getup: the get-up MDP)",
    env_cfg="upright.tasks.standup.config:StandupEnvCfg",
    sim_cfg="upright.tasks.standup.config:SimCfg",
    env="upright.tasks.standup.factory:make_env",
    metadata="upright.tasks.standup.metadata:policy_metadata",
    recipes={"host": {}, "getup": GETUP, "vlm_kneel": VLM_KNEEL},
    config_groups="upright.tasks.standup.variants:config_groups",
    default_groups={"terrain": "ground", "posture": "supine", "recipe": "host"},
    gym_id="upright/G1Standup-v0",
    gym_adapter="upright.gym_envs.standup",
    evaluator="upright.training.evaluate:main",
    robot="unitree_g1_29dof",
)
"""The standup task (:mod:`upright.tasks.spec`)."""
