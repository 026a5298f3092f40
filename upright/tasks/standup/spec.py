"""``task=standup``: a Unitree G1 gets up from any start (``recipe=getup``, the default) or stands up from the ground
with HoST's MDP (``recipe=host``), and its variants (``terrain=``, ``posture=``)."""

from __future__ import annotations

from typing import Any

from upright.tasks.spec import TaskSpec

GETUP: dict[str, Any] = {
    # the get-up MDP of MuJoCo Playground's Go1Getup and mujocolab/mjlab_playground's g1-getup branch
    # (upright.tasks.standup.getup): standing and dropped starts, actions relative to the measured q (scale 0.6,
    # 0.6 s settle after a drop), reflected-inertia gains, one reward group, 6 s episodes, no pull force;
    # PPO as mjlab_playground's rl_cfg.py ([512, 256, 128] ELU, unbounded Gaussian, std 1.0).
    # Differs from mjlab_playground's G1 (measured in docs/experiments/2026-11-26_getup_recipe.md §11 and
    # 2026-11-27_getup_stands.md): the Booster T1's action authority, 10.8 Hz gains and no joint-velocity hinge
    # (mjlab_playground's G1: 5 Hz, hinge -0.1; its 5 Hz run was still at E_succ 0 % after 1e8 env steps, this one
    # reached 24 %), and 8,192 envs x 12 steps per iteration (issue 32 §3: the gradient of 2,048+ envs x 12 is
    # consistent; 12 steps give twice the updates of 24 per env step). mjlab_playground's G1 is
    # env.getup.natural_freq_hz=5 env.getup.rewards.joint_vel_hinge=-0.1 train.num_steps_per_env=24.
    "env.mdp": "getup",
    "env.num_envs": 8192,
    "env.getup.natural_freq_hz": 10.8,
    "env.getup.rewards.joint_vel_hinge": 0.0,
    "env.episode_length_s": 6.0,
    # the two MDP levers of the line that reached E_succ >= 90 % (not mjlab_playground's; measured as continuations,
    # 2 seeds each): an actor that reads its last 6 observation frames (HoST's num_actor_history;
    # docs/experiments/2026-11-27_getup_history_post_task.md) and episodes that end at a fall below 0.5 m after the
    # pelvis passed 0.7 m (docs/experiments/2026-11-27_getup_fall_termination.md: 2 seeds to iteration 1,225, then
    # seed 3 alone, 88.8 / 93.4 % against 82.0 / 89.6 % without it at 1,351). Not measured from scratch: the first
    # from-scratch run lags the one-frame recipe's early (docs/experiments/2026-11-28_getup_from_scratch.md §2).
    # env.getup.actor_history=1 env.getup.fall_termination=false is the recipe before 2026-11-28.
    "env.getup.actor_history": 6,
    "env.getup.fall_termination": True,
    "env.curriculum.enabled": False,
    "env.curriculum.beta_init": 0.6,
    "env.curriculum.beta_min": 0.6,
    "train.num_steps_per_env": 12,
    "train.group_weights": [1.0],
    "train.critic_hidden_dims": [512, 256, 128],
    "train.actor_tanh": False,
    "train.init_noise_std": 1.0,
    "train.l2c2_policy_coef": 0.0,
    "train.l2c2_value_coef": 0.0,
    "train.save_interval": 25,
    # the noise cut (not mjlab_playground's): once the policy gets up, action std 0.4 and no entropy bonus, so that it
    # learns to stay up; at the iteration where it was measured (docs/experiments/2026-11-27_getup_action_noise.md:
    # from model_1225.pt, 1,226 iterations complete, of the 10.8 Hz run, E_succ 24 / 27 % -> 39 / 51 % supine / prone
    # in 3.7 M env steps, 2 seeds; std 0.2 gave 28 / 37 %). train.noise_cut_iteration=null turns it off.
    "train.noise_cut_iteration": 1226,
    "train.noise_cut_std": 0.4,
    "train.noise_cut_entropy_coef": 0.0,
    # ~2e8 env steps: about 13 h on 2 idle cores at 24 s per iteration (4,100 env-steps/s, 6-frame actor;
    # docs/experiments/2026-11-28_getup_from_scratch.md §3); issue 32's time target is 10 h
    "train.max_iterations": 2000,
}
"""``recipe=getup``."""

VLM_KNEEL: dict[str, Any] = {
    # a G1 pose from one sentence (VLM-RMs, Rocamonde et al., ICLR 2024; docs/vlm_reward.md): the get-up MDP with every
    # start standing and its standing terms off (its regularisation kept; since 2026-11-27 that of the get-up recipe:
    # 10.8 Hz gains, no joint-velocity hinge, 12 steps per env), plus a CLIP reward for the prompt in its own
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
    "env.getup.fall_termination": False,  # a kneel holds the pelvis below 0.5 m: it must not end the episode
    "train.noise_cut_iteration": None,  # measured for the get-up only
}
"""``recipe=vlm_kneel``."""

SPEC = TaskSpec(
    name="standup",
    description="a Unitree G1 gets up from the ground (the get-up MDP; recipe=host: HoST's MDP)",
    env_cfg="upright.tasks.standup.config:StandupEnvCfg",
    sim_cfg="upright.tasks.standup.config:SimCfg",
    env="upright.tasks.standup.factory:make_env",
    metadata="upright.tasks.standup.metadata:policy_metadata",
    recipes={"host": {}, "getup": GETUP, "vlm_kneel": VLM_KNEEL},
    config_groups="upright.tasks.standup.variants:config_groups",
    default_groups={"terrain": "ground", "posture": "supine", "recipe": "getup"},
    gym_id="upright/G1Standup-v0",
    gym_adapter="upright.gym_envs.standup",
    evaluator="upright.training.evaluate:main",
    robot="unitree_g1_29dof",
)
"""The standup task (:mod:`upright.tasks.spec`)."""
