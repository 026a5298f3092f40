"""Throughput of the lift env against the physics limit of the machine it runs on, and camera frames/s per core.

    python benchmarks/bench_lift_env.py [--num-envs 256] [--threads 1] [--steps 100] [--backends native[,mjx]]
        [--action-modes delta[,ee_delta]] [--camera-frames 20] [--out docs/bench_lift_env.md]
        [--train-iters K [--train-warmup-iters 1] [--train-envs 1024] [--train-threads 2]
         [--train-override KEY=VALUE]...]

Every env figure is divided by a *physical limit* measured in the same process just before it:

    limit [env-steps/s] = single-thread mj_step rate [physics steps/s] x threads / decimation (4)

The single-thread ``mujoco.mj_step`` rate is taken on one ``MjData`` of the same compiled model (``lift_scene()``),
from a grasp: the scripted expert drives one env until it holds the cube, and that state (arm, closed fingers, cube
in contact with both pads) is restored before each measurement, so every measurement does the same work.

Figures: the bare backend (``BatchedSim.step(ctrl, 4)``) and the full ``LiftEnv.step`` with random actions in
[-1, 1] (rewards, terminations, resets, observation), N envs, on each backend asked for (MJX compiles for minutes on
a CPU; its figure excludes the compile), in each action mode asked for (``env.action_mode``: ``delta``, the joint
targets, and ``ee_delta``, the gripper site through differential IK), with the full step's time (ms per env step of N
envs) and its cost as a multiple of the ``delta`` step's on the same backend. The two modes' random actions drive the
arm differently, so their physics differs too; the IK alone (``DifferentialIK.joint_step`` at the env's last targets)
is timed as well. Camera: one ``mujoco.Renderer`` on one thread, the ``front`` camera at
64 x 64 (and 128 x 128), shadows/reflections off as the ``rgb`` group renders, frames/s; then, when mujoco-warp is
installed, MuJoCo Warp's batch renderer (``env.camera.backend=warp``) on Warp's preferred device (CUDA when present,
else the CPU) with ``--camera-warp-envs`` worlds per batch, frames/s and its ratio to the OpenGL figure of the
same run. The CPU model and the share
of the CPU other processes used during the run are printed with the figures.

Training (``--train-iters K`` > 0; skipped by default): real PPO iterations of the lift task as ``python train.py
task=lift`` runs them, once per action mode of ``--action-modes``, so that the modes' seconds per iteration come from
the same run. The config is composed through Hydra exactly as ``train.py`` composes it (``task=lift`` with the standup-
only groups off, every ``env.*``/``sim.*``/``train.*`` default of the task: 24 steps per env, the task's PPO settings,
curriculum and domain randomisation as configured), plus the ``--train-override`` values (e.g. ``env.rewards.carry=16``)
and ``env.num_envs`` = ``--train-envs`` (1024), ``env.action_mode`` = the mode, ``sim.num_threads`` =
``train.update_threads`` = ``--train-threads`` (2). Env and ``UprightRunner`` are built as
``upright.training.train_loop.train`` builds them (same seeding, metadata, update threads) and run ``W + K`` iterations
(``--train-warmup-iters W``, default 1, not counted); its logs and checkpoints go to a temporary directory deleted
afterwards. From the runner's own per-iteration times: collection (the 24 env steps of all envs with the policy's
actions; rsl-rl's ``collect_time``), update (returns + PPO epochs; ``learn_time``) and their sum, each the median over
the K timed iterations; env-steps/s overall = N x 24 / median total; its ratio to the physical limit with
``--train-threads`` threads (the single-thread ``mj_step`` rate measured again just before each mode, x threads /
decimation); the total seconds per iteration of each mode as a multiple of ``delta``'s; the share of the CPU other
processes used during that mode's iterations. Checkpoint saves and ONNX export happen outside both times.

The figures are only comparable on an idle machine: a run on a shared CPU must say so (the share of the CPU other
processes used is printed per training row and for the whole run).

Needs ``MENAGERIE_ROOT``; the camera needs ``MUJOCO_GL=egl`` or ``osmesa`` (chosen automatically when unset).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import io
import os
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from machine import CpuMeter, cpu_model, record_iteration_times

from upright.gl import choose_offscreen_gl

choose_offscreen_gl()  # before MuJoCo is imported (it reads MUJOCO_GL once)

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402


def grasp_state():
    """(model, qpos, qvel, ctrl) of one env holding the cube (scripted expert, 70 env steps, no randomisation)."""
    from upright.tasks.lift.config import LiftEnvCfg
    from upright.tasks.lift.env import LiftEnv
    from upright.tasks.lift.expert import ScriptedExpert
    from upright.tasks.standup.config import SimCfg

    cfg = LiftEnvCfg(num_envs=1)
    cfg.curriculum.enabled, cfg.domain_rand.enabled = False, False
    env = LiftEnv(cfg, SimCfg(num_threads=1), seed=0)
    expert = ScriptedExpert(env)
    for _ in range(70):
        env.step(expert.act())
    s = env.sim.state
    out = (env.model, s.qpos[0].double().numpy(), s.qvel[0].double().numpy(), env.ctrl[0].double().numpy())
    env.close()
    return out


def mj_step_rate(model, qpos, qvel, ctrl, steps: int = 2000) -> float:
    """Single-thread ``mj_step`` calls per second from the grasp state."""
    d = mujoco.MjData(model)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(model, d)
    t = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(model, d)
    return steps / (time.perf_counter() - t)


def env_rates(
    backend: str, num_envs: int, threads: int, steps: int, action_mode: str = "delta", device: str = "cpu"
) -> dict[str, float]:
    """env-steps/s of the bare backend and of the full env step (random actions in ``action_mode``, envs on torch
    ``device``: ``cuda`` puts MJX on the GPU) and, for ``ee_delta``, seconds per call of the IK (``ik``)."""
    from upright.tasks.lift.config import LiftEnvCfg
    from upright.tasks.lift.env import LiftEnv
    from upright.tasks.standup.config import SimCfg

    cfg = LiftEnvCfg(num_envs=num_envs, action_mode=action_mode)
    sim_cfg = SimCfg(backend=backend, num_threads=threads)
    env = LiftEnv(cfg, sim_cfg, device=device, seed=0)
    gen = torch.Generator().manual_seed(0)
    actions = [(torch.rand(num_envs, env.num_actions, generator=gen) * 2 - 1).to(device) for _ in range(steps)]
    for a in actions[:5]:  # warm-up (MJX: compile)
        env.step(a)
    t = time.perf_counter()
    for a in actions:
        env.step(a)
    full = num_envs * steps / (time.perf_counter() - t)
    ctrl = env.ctrl.clone()
    env.sim.step(ctrl, cfg.decimation)
    t = time.perf_counter()
    for _ in range(steps):
        env.sim.step(ctrl, cfg.decimation)
        env.sim.state.qpos.sum()  # the state reaches torch (MJX is asynchronous)
    bare = num_envs * steps / (time.perf_counter() - t)
    out = {"bare": bare, "full": full}
    if env.ik is not None:
        t = time.perf_counter()
        for a in actions:
            env.ik.joint_step(ctrl[:, :7], cfg.ee_action_scale * a[:, :3])
        out["ik"] = (time.perf_counter() - t) / steps
    env.close()
    return out


TRAIN_OWN_KEYS = (
    "task",
    "env.num_envs",
    "env.action_mode",
    "sim.num_threads",
    "train.update_threads",
    "resume",
    "policy.base",
)
"""Keys the training section sets itself (or does not run: a resumed or residual run); ``--train-override`` may not."""


def train_overrides(mode: str, num_envs: int, threads: int, extra: list[str]) -> list[str]:
    """The ``train.py`` command-line overrides of the training section for ``mode`` (without the standup groups)."""
    return [
        "task=lift",
        *extra,
        f"env.num_envs={num_envs}",
        f"env.action_mode={mode}",
        f"sim.num_threads={threads}",
        f"train.update_threads={threads}",
    ]


def check_train_overrides(modes: list[str], num_envs: int, threads: int, extra: list[str]) -> str | None:
    """None if every mode's overrides compose into a valid ``task=lift`` config (as ``train.py`` checks them), else
    the error."""
    from upright.conf.validate import validate_overrides

    for arg in extra:
        key = arg.lstrip("+~").split("=", 1)[0]
        if key in TRAIN_OWN_KEYS or key.startswith("policy."):
            return (
                f"--train-override {arg}: the training section sets {key} itself (--train-envs, --action-modes, "
                "--train-threads) or does not run it (resume, residual policy.*)"
            )
    for mode in modes:
        problem = validate_overrides(train_overrides(mode, num_envs, threads, extra))
        if problem:
            return problem
    return None


def training_times(mode: str, args, mj_rate) -> dict:
    """Run ``--train-warmup-iters`` + ``--train-iters`` PPO iterations of ``python train.py task=lift`` in ``mode``
    (env + runner built as ``upright.training.train_loop.train`` does, logs in a temporary directory); return the
    physical limit and per-iteration collection/update seconds of the timed iterations."""
    from hydra import compose, initialize

    from upright.conf import register_configs, with_task_groups
    from upright.tasks.registry import make_env, policy_metadata
    from upright.training.rsl_rl_cfg import rsl_rl_config
    from upright.training.runner import UprightRunner
    from upright.training.train_loop import seed_everything

    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose(
            "config",
            overrides=with_task_groups(train_overrides(mode, args.train_envs, args.train_threads, args.train_override)),
        )
    limit = mj_rate() * args.train_threads / cfg.env.decimation  # just before this mode's iterations
    seed_everything(cfg.seed)
    env = make_env(cfg.task_name, cfg.env, cfg.sim, device=cfg.device, seed=cfg.seed)
    total = args.train_warmup_iters + args.train_iters
    with tempfile.TemporaryDirectory(prefix="bench_lift_train_") as log_dir:
        meta = policy_metadata(cfg.task_name, env) | {"run_path": log_dir}
        quiet = io.StringIO()  # model printouts and the progress lines
        with contextlib.redirect_stdout(quiet):
            runner = UprightRunner(
                env,
                rsl_rl_config(cfg.train),
                log_dir=log_dir,
                device=cfg.device,
                onnx_metadata=meta,
                update_threads=cfg.train.update_threads,
                onnx_snapshots=bool(cfg.train.get("onnx_snapshots", False)),
            )
        times = record_iteration_times(runner, args.train_warmup_iters, total, f"{mode}: ")
        meter = CpuMeter().start()
        with contextlib.redirect_stdout(quiet):
            runner.learn_until(total, init_at_random_ep_len=cfg.train.init_at_random_ep_len)
        others = meter.stop()
    env.close()
    measured = times[args.train_warmup_iters :]
    collect = statistics.median(c for c, _ in measured)
    update = statistics.median(u for _, u in measured)
    total_s = statistics.median(c + u for c, u in measured)
    steps = cfg.env.num_envs * cfg.train.num_steps_per_env
    return {
        "limit": limit,
        "collect": collect,
        "update": update,
        "total": total_s,
        "rate": steps / total_s,
        "steps_per_env": int(cfg.train.num_steps_per_env),
        "others": others,
    }


def camera_rate(model, qpos, size: int, frames: int) -> float:
    """Frames/s of one renderer on one thread (``front`` camera, drawn as the ``rgb`` group draws it:
    :func:`upright.tasks.lift.camera.draw`, shadows/reflections/skybox off)."""
    from upright.tasks.lift.camera import draw

    r = mujoco.Renderer(model, size, size)
    d = mujoco.MjData(model)
    d.qpos[:] = qpos
    mujoco.mj_forward(model, d)
    draw(r, d, "front")
    t = time.perf_counter()
    for _ in range(frames):
        draw(r, d, "front")
    rate = frames / (time.perf_counter() - t)
    r.close()
    return rate


def warp_camera_rate(model, qpos, size: int, num_envs: int, frames: int) -> tuple[float, str]:
    """Frames/s of MuJoCo Warp's batch renderer (:class:`~upright.tasks.lift.camera_warp.WarpCameraRenderer`, the
    ``front`` camera, ``num_envs`` worlds per batch, each at ``qpos``) on Warp's preferred device, and that device.
    The first batch (kernel compile or cache load, BVH build) is not timed."""
    from upright.tasks.lift.camera_warp import WarpCameraRenderer
    from upright.tasks.lift.config import LiftCameraCfg

    cfg = LiftCameraCfg(enabled=True, width=size, height=size, cameras=("front",), backend="warp")
    renderer = WarpCameraRenderer(model, cfg)
    state = type("State", (), {"qpos": torch.as_tensor(np.tile(qpos, (num_envs, 1)))})()
    sim = type("Sim", (), {"state": state})()
    renderer.render(sim)
    batches = max(1, frames // num_envs)
    t = time.perf_counter()
    for _ in range(batches):
        renderer.render(sim)
    rate = batches * num_envs / (time.perf_counter() - t)
    renderer.close()
    return rate, renderer.device


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--backends", default="native", help="comma-separated: native, mjx")
    p.add_argument("--action-modes", default="delta,ee_delta", help="comma-separated env.action_mode values")
    p.add_argument("--camera-frames", type=int, default=20, help="0 skips the camera figure")
    p.add_argument(
        "--camera-warp-envs",
        type=int,
        default=16,
        help="envs per batch of the MuJoCo Warp camera figure (0 skips it; skipped without mujoco-warp)",
    )
    p.add_argument("--out", default=None, help="append the table to this markdown file")
    p.add_argument("--device", default="cpu", help="torch device of the env figures (cuda: MJX on the GPU)")
    p.add_argument(
        "--train-iters",
        type=int,
        default=0,
        help="timed PPO iterations of `train.py task=lift` per action mode (0 skips the training section)",
    )
    p.add_argument("--train-warmup-iters", type=int, default=1, help="PPO iterations before the timed ones")
    p.add_argument("--train-envs", type=int, default=1024, help="env.num_envs of the training section")
    p.add_argument(
        "--train-threads", type=int, default=2, help="sim.num_threads and train.update_threads of the training section"
    )
    p.add_argument(
        "--train-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a train.py override of the lift config (repeatable), e.g. env.rewards.carry=16",
    )
    args = p.parse_args(argv)
    modes = args.action_modes.split(",")
    if args.train_iters > 0:
        problem = check_train_overrides(modes, args.train_envs, args.train_threads, args.train_override)
        if problem:
            p.error(problem)
    torch.set_num_threads(1)
    meter = CpuMeter().start()
    model, qpos, qvel, ctrl = grasp_state()
    lines = [
        f"lift env, {datetime.date.today()}, {cpu_model()}, {os.cpu_count()} CPUs, N = {args.num_envs}, "
        f"{args.threads} thread(s), {args.steps} env steps, envs on {args.device}",
        "",
        "| backend | action mode | physical limit (env-steps/s) | bare backend | full env step | full / limit | "
        "full step (ms) | cost / delta |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for backend in args.backends.split(","):
        limit = mj_step_rate(model, qpos, qvel, ctrl) * args.threads / 4
        delta_full = None
        for mode in modes:
            r = env_rates(backend, args.num_envs, args.threads, args.steps, mode, args.device)
            delta_full = r["full"] if mode == "delta" else delta_full
            ratio = f"{delta_full / r['full']:.2f}" if delta_full else "-"
            lines.append(
                f"| {backend} | {mode} | {limit:,.0f} | {r['bare']:,.0f} | {r['full']:,.0f} | "
                f"{r['full'] / limit:.2f} | {1e3 * args.num_envs / r['full']:.1f} | {ratio} |"
            )
            if "ik" in r:
                notes.append(
                    f"{backend} {mode}: the IK alone takes {1e3 * r['ik']:.1f} ms per env step of {args.num_envs} envs."
                )
    if notes:
        lines += ["", *notes]
    if args.camera_frames > 0:
        lines += ["", "| camera | frames/s | / OpenGL, same size |", "|---|---|---|"]
        gl_rates = {}
        for size in (64, 128):
            gl_rates[size] = camera_rate(model, qpos, size, args.camera_frames)
            lines.append(
                f"| front {size} x {size}, OpenGL ({os.environ.get('MUJOCO_GL', '?')}), one thread | "
                f"{gl_rates[size]:.1f} | 1.00 |"
            )
        if args.camera_warp_envs > 0:
            if importlib.util.find_spec("mujoco_warp") is None:
                lines.append("| MuJoCo Warp batch | not installed (`pip install 'upright[warp]'`) | - |")
            else:
                for size in (64, 128):
                    rate, dev = warp_camera_rate(
                        model, qpos, size, args.camera_warp_envs, max(args.camera_frames, 2 * args.camera_warp_envs)
                    )
                    lines.append(
                        f"| front {size} x {size}, MuJoCo Warp batch of {args.camera_warp_envs} on {dev} | "
                        f"{rate:.1f} | {rate / gl_rates[size]:.2f} |"
                    )
    if args.train_iters > 0:
        rows = {}
        for mode in modes:
            rows[mode] = training_times(mode, args, lambda: mj_step_rate(model, qpos, qvel, ctrl))
        spe = next(iter(rows.values()))["steps_per_env"]
        extra = " ".join(args.train_override) or "none"
        lines += [
            "",
            f"Training: `python train.py task=lift` PPO iterations, N = {args.train_envs} envs x {spe} "
            f"steps, {args.train_threads} sim thread(s) + {args.train_threads} update thread(s), "
            f"{args.train_warmup_iters} warm-up + {args.train_iters} timed iteration(s) (medians), "
            f"overrides: {extra}",
            "",
            "| action mode | physical limit (env-steps/s) | collection (s/it) | update (s/it) | total (s/it) | "
            "env-steps/s overall | overall / limit | total / delta | others' CPU |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        delta = rows.get("delta")
        for mode, r in rows.items():
            ratio = f"{r['total'] / delta['total']:.2f}" if delta else "-"
            lines.append(
                f"| {mode} | {r['limit']:,.0f} | {r['collect']:.2f} | {r['update']:.2f} | {r['total']:.2f} | "
                f"{r['rate']:,.0f} | {r['rate'] / r['limit']:.2f} | {ratio} | "
                f"{100 * r['others']:.0f} % |"
            )
    lines += ["", f"Other processes used {100 * meter.stop():.0f} % of the CPU during the run."]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n\n")


if __name__ == "__main__":
    main()
