"""Throughput of the lift env against the physics limit of the machine it runs on, and camera frames/s per core.

    python benchmarks/bench_lift_env.py [--num-envs 256] [--threads 1] [--steps 100] [--backends native[,mjx]]
        [--action-modes delta[,ee_delta]] [--camera-frames 20] [--out docs/bench_lift_env.md]

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
64 x 64 (and 128 x 128), shadows/reflections off as the ``rgb`` group renders, frames/s. The CPU model and the share
of the CPU other processes used during the run are printed with the figures.

Needs ``MENAGERIE_ROOT``; the camera needs ``MUJOCO_GL=egl`` or ``osmesa`` (chosen automatically when unset).
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from machine import CpuMeter, cpu_model  # noqa: E402

from upright.viewer.gl import choose_offscreen_gl  # noqa: E402

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


def env_rates(backend: str, num_envs: int, threads: int, steps: int, action_mode: str = "delta") -> dict[str, float]:
    """env-steps/s of the bare backend and of the full env step (random actions in ``action_mode``) and, for
    ``ee_delta``, seconds per call of the IK (``ik``)."""
    from upright.tasks.lift.config import LiftEnvCfg
    from upright.tasks.lift.env import LiftEnv
    from upright.tasks.standup.config import SimCfg

    cfg = LiftEnvCfg(num_envs=num_envs, action_mode=action_mode)
    sim_cfg = SimCfg(backend=backend, num_threads=threads)
    env = LiftEnv(cfg, sim_cfg, seed=0)
    gen = torch.Generator().manual_seed(0)
    actions = [torch.rand(num_envs, env.num_actions, generator=gen) * 2 - 1 for _ in range(steps)]
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


def camera_rate(model, qpos, size: int, frames: int) -> float:
    """Frames/s of one renderer on one thread (``front`` camera, shadows/reflections/skybox off)."""
    r = mujoco.Renderer(model, size, size)
    d = mujoco.MjData(model)
    d.qpos[:] = qpos
    mujoco.mj_forward(model, d)

    def frame():
        r.update_scene(d, camera="front")
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION, mujoco.mjtRndFlag.mjRND_SKYBOX):
            r.scene.flags[flag] = False
        return r.render()

    frame()
    t = time.perf_counter()
    for _ in range(frames):
        frame()
    rate = frames / (time.perf_counter() - t)
    r.close()
    return rate


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--backends", default="native", help="comma-separated: native, mjx")
    p.add_argument("--action-modes", default="delta,ee_delta", help="comma-separated env.action_mode values")
    p.add_argument("--camera-frames", type=int, default=20, help="0 skips the camera figure")
    p.add_argument("--out", default=None, help="append the table to this markdown file")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    meter = CpuMeter().start()
    model, qpos, qvel, ctrl = grasp_state()
    lines = [f"lift env, {datetime.date.today()}, {cpu_model()}, {os.cpu_count()} CPUs, N = {args.num_envs}, "
             f"{args.threads} thread(s), {args.steps} env steps", "",
             "| backend | action mode | physical limit (env-steps/s) | bare backend | full env step | full / limit | "
             "full step (ms) | cost / delta |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    notes = []
    for backend in args.backends.split(","):
        limit = mj_step_rate(model, qpos, qvel, ctrl) * args.threads / 4
        delta_full = None
        for mode in args.action_modes.split(","):
            r = env_rates(backend, args.num_envs, args.threads, args.steps, mode)
            delta_full = r["full"] if mode == "delta" else delta_full
            ratio = f"{delta_full / r['full']:.2f}" if delta_full else "-"
            lines.append(f"| {backend} | {mode} | {limit:,.0f} | {r['bare']:,.0f} | {r['full']:,.0f} | "
                         f"{r['full'] / limit:.2f} | {1e3 * args.num_envs / r['full']:.1f} | {ratio} |")  # fmt: skip
            if "ik" in r:
                notes.append(f"{backend} {mode}: the IK alone takes {1e3 * r['ik']:.1f} ms per env step of "
                             f"{args.num_envs} envs.")  # fmt: skip
    if notes:
        lines += ["", *notes]
    if args.camera_frames > 0:
        lines += ["", "| camera | frames/s per core |", "|---|---|"]
        for size in (64, 128):
            lines.append(f"| front {size} x {size} ({os.environ.get('MUJOCO_GL', '?')}) | "
                         f"{camera_rate(model, qpos, size, args.camera_frames):.1f} |")  # fmt: skip
    lines += ["", f"Other processes used {100 * meter.stop():.0f} % of the CPU during the run."]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n\n")


if __name__ == "__main__":
    main()
