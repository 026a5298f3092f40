"""Distil the predictive-sampling teacher into the standup actor with DAgger (issue 12, the teacher lever).

DAgger (Ross, Gordon and Bagnell, "A Reduction of Imitation Learning and Structured Prediction to No-Regret Online
Learning", AISTATS 2011): in round i the envs run a mixture of teacher and student (each env step takes the
teacher's action with probability ``teacher_prob · teacher_decay^i``, else the student's deterministic action);
every actuated step is labelled with the teacher's action at the state the mixture reached; the student is trained
on all labels so far by regression of its mean action. The teacher is
:class:`~upright.tasks.standup.planner.PredictiveSampler` on a copy of each env's randomised model (:func:`env_model`;
one per env, warm-started along its episode, rebuilt at its resets); it reads the full simulator state, the student only
its deployable observation (HoST's 76-D x 6 frames). The env keeps domain randomisation and observation noise on, as in
training.

The actions are ``env.action_mode=absolute`` with a fixed β (the curriculum is off): the planner's targets are kept in
default ± β, so a label a* = (p* - q_default) / β lies in [-1, 1], the range of the tanh actor.

The result is a checkpoint of the training run's format (``model_0.pt`` in ``--run-dir``, beside the labelled
dataset ``labels.pt``: actor observations (M, 456) and teacher actions (M, 23), float32): continue it with PPO by
``python train.py task=standup resume=<run-dir> <the same env overrides>``.

Usage::

    python -m upright.training.distill --run-dir logs/standup/distill_s1 --rounds 4 --envs 8 --steps 150 \\
        env.action_mode=absolute env.curriculum.beta_init=1.0 env.curriculum.beta_min=1.0
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import time
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
from hydra import compose, initialize
from omegaconf import OmegaConf
from tensordict import TensorDict

from upright.atomic_io import atomic_write_text
from upright.conf import register_configs
from upright.conf.validate import validate_overrides
from upright.robots import g1
from upright.sim import PER_ENV_FIELDS
from upright.tasks.registry import make_env, policy_metadata
from upright.tasks.standup.planner import PlannerCfg, PredictiveSampler
from upright.training.runner import UprightRunner
from upright.training.train_loop import rsl_rl_config, seed_everything


@dataclass
class DistillCfg:
    """DAgger settings."""

    rounds: int = 4
    """DAgger rounds (collect, then fit)."""
    steps: int = 250
    """Env steps per env per round (50 Hz), from a reset of every env (the first ``env.unactuated_steps`` are the
    unactuated drop; 250 = 5 s)."""
    teacher_prob: float = 1.0
    """Probability that an env step executes the teacher's action in round 0."""
    teacher_decay: float = 0.5
    """Factor on that probability per round (DAgger's β_i = p^i)."""
    epochs: int = 30
    """Passes over all labels after each round."""
    batch_size: int = 256
    """Labels per gradient step."""
    lr: float = 1e-3
    """Adam learning rate of the regression."""


def env_model(env, i: int) -> mujoco.MjModel:
    """A copy of ``env``'s scene with env ``i``'s randomised model fields (:data:`upright.sim.PER_ENV_FIELDS`: masses,
    COM, inertia, friction, contact, PD gains and torque offsets as written at its last reset), for its teacher.

    A teacher may know the physical parameters (it is never deployed); planning on the nominal model instead got up
    in 0 of 8 randomised envs, on each env's own model in 6 of 8 (docs/standup_learning.md, session 7). The action
    delay is not modelled.
    """
    model = copy.copy(env.model)
    for name in PER_ENV_FIELDS:
        getattr(model, name)[:] = env.sim.model_field(name)[i].double().numpy()
    return model


def teacher_actions(
    planners: list[PredictiveSampler],
    data: mujoco.MjData,
    qpos: np.ndarray,
    qvel: np.ndarray,
    rows: np.ndarray,
    policy_ids: np.ndarray,
    default_pose: np.ndarray,
    beta: float,
) -> np.ndarray:
    """Label envs ``rows``: each env's planner plans from its (qpos, qvel); returns (len(rows), 23) actions in [-1, 1].

    Args:
        planners: one planner per env.
        data: scratch ``MjData`` of the nominal model (overwritten).
        qpos: (N, nq) and qvel: (N, nv) float64 states of all envs.
        rows: env indices to label.
        policy_ids: (23,) policy joints among the 29; default_pose: (29,) rad; beta: action scale, rad.
    """
    out = np.zeros((len(rows), len(policy_ids)))
    for k, i in enumerate(rows):
        data.qpos[:], data.qvel[:] = qpos[i], qvel[i]  # the planner reads the state only (mj_getState)
        target = planners[i].plan(data)
        out[k] = np.clip((target[policy_ids] - default_pose[policy_ids]) / beta, -1.0, 1.0)
    return out


def fit(
    actor: torch.nn.Module, obs: torch.Tensor, labels: torch.Tensor, cfg: DistillCfg, gen: torch.Generator
) -> float:
    """Regress the actor's deterministic action on ``labels`` (M, 23) from actor observations ``obs`` (M, D); returns
    the final epoch's mean squared error."""
    actor.update_normalization(TensorDict({"actor": obs}, batch_size=[obs.shape[0]]))
    params = [p for n, p in actor.named_parameters() if "distribution" not in n and "std" not in n]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    mse = float("nan")
    for _ in range(cfg.epochs):
        perm = torch.randperm(obs.shape[0], generator=gen)
        total = 0.0
        for start in range(0, obs.shape[0], cfg.batch_size):
            idx = perm[start : start + cfg.batch_size]
            pred = actor(TensorDict({"actor": obs[idx]}, batch_size=[len(idx)]))
            loss = (pred - labels[idx]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        mse = total / obs.shape[0]
    return mse


def distill(
    overrides: list[str],
    run_dir: pathlib.Path,
    cfg: DistillCfg,
    planner_cfg: PlannerCfg,
    num_envs: int,
    seed: int = 1,
    resume: bool = False,
    init_labels: list[pathlib.Path] = (),
) -> dict:
    """Run DAgger, saving ``run_dir/model_0.pt``, ``labels.pt`` and ``distill.json`` after every round; returns
    per-round figures.

    Args:
        resume: continue the rounds of ``run_dir`` (its checkpoint, labels and report) up to ``cfg.rounds`` in all.
        init_labels: ``labels.pt`` files of earlier DAgger runs with the same observation and action layout, added to
            the dataset before the first round (a fresh run only).

    Raises:
        ValueError: bad overrides, or an action mode other than absolute.
        FileExistsError: ``run_dir`` already holds checkpoints and ``resume`` is off.
        FileNotFoundError: ``resume`` without a checkpoint in ``run_dir``.
    """
    problem = validate_overrides(["task=standup", *overrides])
    if problem:
        raise ValueError(problem)
    register_configs()
    with initialize(version_base=None, config_path=None):
        hcfg = compose("config", overrides=["task=standup", *overrides])
    if hcfg.env.action_mode != "absolute":
        raise ValueError(
            "distillation needs env.action_mode=absolute (the planner's targets map to actions around the "
            "default pose); add env.action_mode=absolute"
        )
    if resume and not (run_dir / "model_0.pt").exists():
        raise FileNotFoundError(f"{run_dir} has no model_0.pt to resume; drop --resume to start a new run")
    if not resume and any(run_dir.glob("model_*.pt")):
        raise FileExistsError(f"{run_dir} already has checkpoints; add --resume or choose another --run-dir")
    report = json.loads((run_dir / "distill.json").read_text()) if resume else {"rounds": []}
    first_round = len(report["rounds"])
    seed_everything(seed + 7919 * first_round)  # a resumed run draws new randomisation and starts
    hcfg.env.num_envs = num_envs
    hcfg.env.curriculum.enabled = False  # fixed β, no pull force
    beta = float(hcfg.env.curriculum.beta_min)
    planner_cfg.beta = beta
    env = make_env("standup", hcfg.env, hcfg.sim, device="cpu", seed=seed + 7919 * first_round)
    env.beta[:] = beta
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config_0.yaml", OmegaConf.to_yaml(hcfg, resolve=True))  # as train.py writes it
    runner = UprightRunner(
        env,
        rsl_rl_config(hcfg.train),
        log_dir=str(run_dir),
        device="cpu",
        onnx_metadata=policy_metadata("standup", env) | {"run_path": str(run_dir.resolve())},
    )
    actor = runner.alg.actor
    model = env.model
    scratch = mujoco.MjData(model)
    pol = np.asarray(g1.robot_info().policy_joint_ids)
    default = env.default_pose.double().numpy()
    gen = torch.Generator().manual_seed(seed + 7919 * first_round)
    all_obs, all_labels = [], []
    if resume:
        runner.load(str(run_dir / "model_0.pt"))
        init_labels = [run_dir / "labels.pt"]
    for path in init_labels:
        data = torch.load(path)
        all_obs.append(data["obs"])
        all_labels.append(data["labels"])
    if all_obs and not resume:  # start the student from the earlier labels
        fit(actor, torch.cat(all_obs), torch.cat(all_labels), cfg, gen)
    for r in range(first_round, cfg.rounds):
        env.reset_all()  # every round covers the get-up from its start (episodes of ``steps`` env steps or longer)
        obs = env.get_observations()["actor"]
        planners = [
            PredictiveSampler(env_model(env, i), planner_cfg, seed=seed * 1000 + r * num_envs + i)
            for i in range(num_envs)
        ]
        p_teacher = cfg.teacher_prob * cfg.teacher_decay**r
        t0 = time.perf_counter()
        labelled, heads = 0, []
        for _ in range(cfg.steps):
            actuated = (env.episode_length_buf >= env.cfg.unactuated_steps).numpy()
            rows = np.flatnonzero(actuated)
            s = env.sim.state
            qpos, qvel = s.qpos.double().numpy(), s.qvel.double().numpy()
            with torch.no_grad():
                student = actor(env.get_observations()).clone()
            actions = student.clone()
            if len(rows):
                labels = torch.tensor(
                    teacher_actions(planners, scratch, qpos, qvel, rows, pol, default, beta), dtype=torch.float32
                )
                all_obs.append(obs[rows].clone())
                all_labels.append(labels)
                labelled += len(rows)
                use_teacher = torch.rand(len(rows), generator=gen) < p_teacher
                actions[rows[use_teacher.numpy()]] = labels[use_teacher]
            obs_td, _, dones, _ = env.step(actions)
            obs = obs_td["actor"]
            heads.append(float(env.last_state.head_height.mean()))
            for i in dones.nonzero().flatten().tolist():
                planners[i] = PredictiveSampler(
                    env_model(env, i), planner_cfg, seed=int(torch.randint(0, 2**31, (1,), generator=gen))
                )
        collect_s = time.perf_counter() - t0
        obs_all, labels_all = torch.cat(all_obs), torch.cat(all_labels)
        with torch.no_grad():
            before = float(
                (actor(TensorDict({"actor": obs_all}, batch_size=[len(obs_all)])) - labels_all).pow(2).mean()
            )
        mse = fit(actor, obs_all, labels_all, cfg, gen)
        row = {
            "round": r,
            "teacher_prob": p_teacher,
            "labels": labelled,
            "total_labels": int(sum(len(x) for x in all_labels)),
            "collect_s": round(collect_s, 1),
            "mse_before_fit": round(before, 4),
            "fit_mse": round(mse, 4),
            "mean_head": round(float(np.mean(heads)), 3),
            "max_mean_head": round(float(np.max(heads)), 3),
        }
        report["rounds"].append(row)
        print(row, flush=True)
        runner.save(str(run_dir / "model_0.pt"))
        torch.save({"obs": obs_all, "labels": labels_all}, run_dir / "labels.pt")  # the DAgger dataset
        atomic_write_text(run_dir / "distill.json", json.dumps(report, indent=1))
    env.close()
    return report


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--rounds", type=int, default=DistillCfg.rounds)
    ap.add_argument("--steps", type=int, default=DistillCfg.steps)
    ap.add_argument("--epochs", type=int, default=DistillCfg.epochs)
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--samples", type=int, default=PlannerCfg.samples)
    ap.add_argument("--horizon", type=float, default=PlannerCfg.horizon_s)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--teacher-prob", type=float, default=DistillCfg.teacher_prob)
    ap.add_argument("--teacher-decay", type=float, default=DistillCfg.teacher_decay)
    ap.add_argument("--resume", action="store_true", help="continue the rounds of --run-dir")
    ap.add_argument("--init-labels", nargs="*", default=[], help="labels.pt files of earlier runs to start from")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of the standup config, e.g. env.action_mode=absolute")
    a = ap.parse_args(argv)
    cfg = DistillCfg(
        rounds=a.rounds, steps=a.steps, epochs=a.epochs, teacher_prob=a.teacher_prob, teacher_decay=a.teacher_decay
    )
    distill(
        a.overrides,
        pathlib.Path(a.run_dir),
        cfg,
        PlannerCfg(samples=a.samples, horizon_s=a.horizon),
        a.envs,
        a.seed,
        resume=a.resume,
        init_labels=[pathlib.Path(p) for p in a.init_labels],
    )


if __name__ == "__main__":
    main()
