"""Does the predictive-sampling teacher stand the G1 up in the training env? (issue 12, the teacher lever)

Runs :class:`~upright.tasks.standup.planner.PredictiveSampler` (targets within default ± 1 rad, absolute actions with
β = 1) as the controller of ``--envs`` standup envs from HoST's start (0.5 m drop, randomised joint angles, 0.6 s
unactuated), for 5 s actuated, and scores HoST's ground success (pelvis > 0.7 m, then never < 0.5 m).

Usage::

    # domain randomisation on, planning on the nominal model
    python benchmarks/standup_teacher_in_env.py --seed 5
    # nominal executed model
    python benchmarks/standup_teacher_in_env.py --seed 5 --no-dr
    # each env's planner uses that env's randomised model
    python benchmarks/standup_teacher_in_env.py --seed 5 --own-model

With ``--own-model`` the planner of each env gets a copy of the scene with that env's randomised fields
(:data:`upright.sim.PER_ENV_FIELDS`: masses, COM, inertia, friction, contact, PD gains and torque offsets as written
at the reset), a teacher's privilege; the action delay is not modelled by the planner.
"""

from __future__ import annotations

import argparse

import mujoco
import numpy as np
import torch
from hydra import compose, initialize

from upright.conf import register_configs
from upright.robots import g1
from upright.tasks.registry import make_env
from upright.tasks.standup import metrics
from upright.tasks.standup.planner import PlannerCfg, PredictiveSampler
from upright.training.distill import env_model, teacher_actions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--no-dr", action="store_true", help="turn domain randomisation off")
    ap.add_argument("--own-model", action="store_true", help="plan on each env's randomised model")
    a = ap.parse_args()
    register_configs()
    overrides = [
        "task=standup",
        "env.action_mode=absolute",
        "env.curriculum.beta_init=1.0",
        "env.curriculum.beta_min=1.0",
        f"env.domain_rand.enabled={not a.no_dr}",
    ]
    with initialize(version_base=None, config_path=None):
        cfg = compose("config", overrides=overrides)
    n = a.envs
    cfg.env.num_envs, cfg.env.curriculum.enabled, cfg.env.obs_noise = n, False, False
    cfg.sim.num_threads, cfg.env.episode_length_s = 1, a.seconds + 1.0
    env = make_env("standup", cfg.env, cfg.sim, device="cpu", seed=a.seed)
    env.beta[:] = 1.0
    env.reset_all()

    planners = [
        PredictiveSampler(env_model(env, i) if a.own_model else env.model, PlannerCfg(beta=1.0), seed=a.seed * 100 + i)
        for i in range(n)
    ]
    pol = np.asarray(g1.robot_info().policy_joint_ids)
    default = env.default_pose.double().numpy()
    scratch = mujoco.MjData(env.model)
    pelvis = []
    for _ in range(env.cfg.unactuated_steps + round(a.seconds / env.step_dt)):
        actions = torch.zeros(n, 23)
        rows = np.flatnonzero((env.episode_length_buf >= env.cfg.unactuated_steps).numpy())
        s = env.sim.state
        if len(rows):
            labels = teacher_actions(
                planners, scratch, s.qpos.double().numpy(), s.qvel.double().numpy(), rows, pol, default, 1.0
            )
            actions[rows] = torch.tensor(labels, dtype=torch.float32)
        env.step(actions)
        if len(rows):
            pelvis.append(env.last_state.base_pos[:, 2].clone())
    h = torch.stack(pelvis, 1)
    ok = metrics.success(h, metrics.SUCCESS_HEIGHT, metrics.FALL_HEIGHT)
    print(
        f"domain randomisation {'off' if a.no_dr else 'on'}, planning on {'each env' if a.own_model else 'the nominal'}"
        f" model: success {int(ok.sum())}/{n}; peak pelvis {h.max(1).values.numpy().round(2).tolist()};"
        f" final pelvis {h[:, -1].numpy().round(2).tolist()}",
        flush=True,
    )


if __name__ == "__main__":
    main()
