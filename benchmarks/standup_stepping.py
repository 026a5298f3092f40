"""Timing primitives of ``benchmarks/bench_standup_env.py`` (also used by ``bench_self_collisions.py`` through it):
the single-thread and T-thread ``mj_step`` rate of the standup scene from a settled supine state
(:class:`MjStepRate`), the probes taken interleaved with a throughput figure and the figure itself against the
physical limit (:class:`Probes`, :class:`Measurement`, :func:`interleaved`), and the steppers it times: the full
``StandupEnv.step`` and the bare backend with the same random actions. Imported by name (``from standup_stepping
import ...``: the script's folder is on ``sys.path``).
"""

from __future__ import annotations

import statistics
import time

import mujoco
import numpy as np
import torch
from machine import CpuMeter
from mujoco import batch as mj_batch

from upright.robots import g1
from upright.sim.native import NativeSim
from upright.tasks.standup.config import StandupEnvCfg
from upright.tasks.standup.env import SUPINE_QUAT, StandupEnv


# ---------------------------------------------------------------------------------------- mj_step
class MjStepRate:
    """Single-thread ``mj_step`` rate of ``model`` from a settled supine state (one ``MjData``).

    Args:
        model: the compiled standup scene.
        settle_s: seconds of simulated time to settle, holding PD targets = current q.
        chunk: physics steps per timed call (each call starts from the same saved state).
    """

    def __init__(self, model: mujoco.MjModel, settle_s: float = 1.0, chunk: int = 200):
        self.model, self.chunk = model, chunk
        m = model
        self.data = d = mujoco.MjData(m)
        info = g1.robot_info()
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in g1.JOINT_NAMES]
        q_adr = m.jnt_qposadr[jids]
        d.qpos[2] = StandupEnvCfg().init_height
        d.qpos[3:7] = SUPINE_QUAT
        d.qpos[q_adr] = info.default_pose
        mujoco.mj_forward(m, d)
        decimation = StandupEnvCfg().decimation
        for _ in range(int(round(settle_s / m.opt.timestep / decimation))):
            # like the env's unactuated phase: p_target = measured q, held joints at their default
            d.ctrl[:] = d.qpos[q_adr]
            d.ctrl[info.held_joint_ids] = info.default_pose[info.held_joint_ids]
            mujoco.mj_step(m, d, nstep=decimation)
        self.settled_qpos = d.qpos.copy()
        self.settled_qvel = d.qvel.copy()
        self.settled_ctrl = d.ctrl.copy()
        self.settled_warmstart = d.qacc_warmstart.copy()
        self.ncon = int(d.ncon)
        self._sig = mujoco.mjtState.mjSTATE_INTEGRATION
        self._state = np.empty(mujoco.mj_stateSize(m, self._sig))
        mujoco.mj_getState(m, d, self._state, self._sig)
        self._batches: dict[int, tuple] = {}

    def measure(self, seconds: float) -> float:
        """Physics steps/s over at least ``seconds`` of timed stepping (restoring the state per chunk)."""
        m, d = self.model, self.data
        steps, elapsed = 0, 0.0
        while elapsed < seconds:
            mujoco.mj_setState(m, d, self._state, self._sig)
            mujoco.mj_forward(m, d)
            t0 = time.perf_counter()
            mujoco.mj_step(m, d, nstep=self.chunk)
            elapsed += time.perf_counter() - t0
            steps += self.chunk
        return steps / elapsed

    def measure_parallel(self, threads: int, seconds: float, envs_per_thread: int = 8) -> float:
        """Aggregate physics steps/s of ``threads`` C threads (``mujoco.batch``, no Python, no GIL) stepping
        ``envs_per_thread * threads`` copies of the same settled state: what the machine gives us *now*
        with that many threads, so it drops when other processes take cores."""
        if threads not in self._batches:
            b = mj_batch.Batch(self.model, envs_per_thread * threads, nthread=threads, persistent=True)
            self._batches[threads] = (b, b.bind("qpos"), b.bind("qvel"), b.bind("ctrl"), b.bind("qacc_warmstart"))
        b, qpos, qvel, ctrl, warm = self._batches[threads]
        steps, elapsed = 0, 0.0
        while elapsed < seconds:
            b.reset(stage=mujoco.mjtStage.mjSTAGE_NONE)
            qpos[:], qvel[:] = self.settled_qpos, self.settled_qvel
            ctrl[:], warm[:] = self.settled_ctrl, self.settled_warmstart
            b.forward(stage=mujoco.mjtStage.mjSTAGE_VEL)
            t0 = time.perf_counter()
            b.step(nstep=self.chunk, stage=mujoco.mjtStage.mjSTAGE_VEL)
            elapsed += time.perf_counter() - t0
            steps += self.chunk * b.nsim
        return steps / elapsed


class Probes:
    """mj_step probes taken interleaved with one throughput figure."""

    def __init__(self, mj: MjStepRate, threads: int, seconds: float):
        self.mj, self.threads, self.seconds = mj, threads, seconds
        self.single: list[float] = []
        self.parallel: list[float] = []

    def take(self) -> None:
        self.single.append(self.mj.measure(self.seconds))
        self.parallel.append(self.mj.measure_parallel(self.threads, self.seconds))


class Measurement:
    """One throughput figure with the mj_step rates measured interleaved with it.

    ``limit`` is the issue's physical limit (single-thread mj_step/s x threads / decimation);
    ``avail`` is the same with the measured T-thread probe instead of single x T (what the machine
    actually gave this many threads during the figure).
    """

    def __init__(self, label: str, n: int, threads: int, rate: float, probes: Probes, decimation: int, others: float):
        self.label, self.n, self.threads, self.rate, self.others = label, n, threads, rate, others
        self.single = probes.single
        self.mj_rate = statistics.mean(probes.single)
        self.limit = self.mj_rate * threads / decimation
        self.ratio = rate / self.limit
        self.avail = statistics.mean(probes.parallel) / decimation
        self.ratio_avail = rate / self.avail

    HEAD = (
        "| what | N | threads | env-steps/s | mj_step/s (1 thread) | limit = 1-thread x T / 4 | **ratio** "
        "| T-thread probe / 4 | ratio to probe | others' CPU |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )

    def row(self) -> str:
        spread = (max(self.single) - min(self.single)) / self.mj_rate
        return (
            f"| {self.label} | {self.n} | {self.threads} | {self.rate:,.0f} "
            f"| {self.mj_rate:,.0f} (±{50 * spread:.0f}%) "
            f"| {self.limit:,.0f} | **{self.ratio:.2f}** | {self.avail:,.0f} | {self.ratio_avail:.2f} "
            f"| {100 * self.others:.0f}% |"
        )


def interleaved(
    step, n_envs: int, mj: MjStepRate, threads: int, seconds: float, rounds: int, mj_seconds: float, min_steps: int = 3
):
    """Time ``step()`` (one env step of ``n_envs`` envs) for ``rounds`` rounds of ``seconds / rounds``,
    with mj_step probes before each round and after the last.

    Returns:
        (env-steps/s, probes, share of the CPU used by other processes during the timed rounds).
    """
    probes, env_steps, env_time, others = Probes(mj, threads, mj_seconds), 0, 0.0, []
    for _ in range(rounds):
        probes.take()
        k, meter, t0 = 0, CpuMeter().start(), time.perf_counter()
        while True:
            step()
            k += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds / rounds and k >= min_steps:
                break
        others.append(meter.stop())
        env_steps += k * n_envs
        env_time += elapsed
    probes.take()
    return env_steps / env_time, probes, statistics.mean(others)


def warm_up(step, seconds: float, min_steps: int = 5) -> None:
    k, t0 = 0, time.perf_counter()
    while k < min_steps or time.perf_counter() - t0 < seconds:
        step()
        k += 1


def random_actions(env: StandupEnv, generator: torch.Generator, count: int = 16) -> list[torch.Tensor]:
    """Precomputed uniform [-1, 1] actions, cycled, so that drawing them costs nothing in the timing."""
    return [torch.rand(env.num_envs, env.num_actions, generator=generator) * 2 - 1 for _ in range(count)]


def env_stepper(env: StandupEnv, actions: list[torch.Tensor]):
    i = 0

    def step() -> None:
        nonlocal i
        env.step(actions[i % len(actions)])
        i += 1

    return step


def backend_stepper(env: StandupEnv, actions: list[torch.Tensor]):
    """``NativeSim.step(ctrl, 4)`` on the env's own backend (same N, threads and robot states), with
    controls built like the env's (p_target = measured q + a for the policy joints, default pose for the
    held ones) by one gather and one add per step, so that the robots move as in the env."""
    sim = env.sim
    if not isinstance(sim, NativeSim):
        raise TypeError(f"expected the native backend, got {type(sim).__name__}")
    m = env.model
    jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name) for name in g1.POLICY_JOINT_NAMES]
    q_adr = torch.as_tensor(m.jnt_qposadr[jids], dtype=torch.long)
    pol = torch.as_tensor(env.robot.policy_joint_ids, dtype=torch.long)
    ctrl = env.default_pose.expand(env.num_envs, -1).clone()
    i = 0

    def step() -> None:
        nonlocal i
        ctrl[:, pol] = sim.state.qpos[:, q_adr] + actions[i % len(actions)]
        sim.step(ctrl, env.cfg.decimation)
        i += 1

    return step
