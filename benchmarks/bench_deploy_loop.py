"""Timing of the deploy daemon's building blocks on this machine (a benchmark, not a test).

Sections:

1. **Loop lateness** (wake-up time minus deadline) of :class:`upright.deploy.loop.Pacer` at 50 Hz and
   500 Hz, sleep-only vs sleep-then-spin, each with and without the logger process running (one G1-sized
   frame per 20 ms handed over the pipe, journalled and fsynced by the logger process). Each cycle does
   100 µs of busy work, as in the reference measurements. Goal: p99 ≤ 0.5 ms at 50 Hz without RT privileges.
2. **Serial round trip over a pty**: one GO-M8010-6 command/reply, and one full G1 exchange (29 motors on
   5 buses + the IMU) through :class:`upright.deploy.robot.SerialRobot`, against an emulated device in a
   separate process (:class:`upright.deploy.pty_device.PtyDeviceServer`, no physics).
3. **Inference latency** of :class:`upright.policy_io.mlp.OnnxPolicy` (one thread) on a policy file,
   plus the observation builder (one frame + history push).

``python benchmarks/bench_deploy_loop.py [--seconds 3] [--policy FILE] [--rt-priority 80] [--out FILE]``.
Needs ``MENAGERIE_ROOT`` only to build a policy file when none is given or found under ``logs/``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import signal
import sys
import tempfile
import time

import numpy as np

from upright.dataset_io.records import frame_features
from upright.deploy.logger_client import LoggerClient
from upright.deploy.loop import Pacer, setup_realtime

ROOT = pathlib.Path(__file__).resolve().parents[1]


def busy(ns: int) -> None:
    end = time.monotonic_ns() + ns
    while time.monotonic_ns() < end:
        pass


def percentiles(x_ns: np.ndarray) -> tuple[float, float, float]:
    x = np.asarray(x_ns, dtype=np.float64) / 1e3
    return float(np.percentile(x, 50)), float(np.percentile(x, 99)), float(x.max())


def lateness(
    rate: float, spin_s: float, seconds: float, logger: LoggerClient | None, work_ns: int = 100_000
) -> np.ndarray:
    pacer = Pacer(1.0 / rate, spin_s)
    n = int(seconds * rate)
    out = np.zeros(n, np.int64)
    log_every = max(1, int(round(rate / 50)))
    import gc

    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        pacer.start()
        for i in range(n):
            out[i] = pacer.wait()
            busy(work_ns)
            if logger is not None and i % log_every == 0:
                logger.record["frame_index"] = i // log_every
                logger.send()
    finally:
        gc.enable()
        gc.unfreeze()
    return out


def section_lateness(seconds: float, tmp: pathlib.Path) -> list[str]:
    joints = tuple(f"j{i}" for i in range(23))
    lines = ["| rate | pacing | logger process | p50 µs | p99 µs | max µs |", "|---|---|---|---|---|---|"]
    results = {}
    for with_logger in (False, True):
        logger = None
        if with_logger:
            logger = LoggerClient(
                tmp / "bench_dataset",
                frame_features(joints, [f"o{i}" for i in range(76)]),
                fps=50,
                robot_type="bench",
                task="bench",
            )
            logger.record["observation.state"] = np.random.default_rng(0).standard_normal(52)
        try:
            for rate in (50.0, 500.0):
                for name, spin in (("sleep", 0.0), ("sleep+spin 0.5 ms", 0.0005)):
                    p50, p99, mx = percentiles(lateness(rate, spin, seconds, logger))
                    results[(rate, name, with_logger)] = p99
                    lines.append(
                        f"| {rate:.0f} Hz | {name} | {'running' if with_logger else 'off'} | "
                        f"{p50:.1f} | {p99:.1f} | {mx:.1f} |"
                    )
        finally:
            if logger is not None:
                logger.close()
    goal = max(results[(50.0, "sleep+spin 0.5 ms", w)] for w in (False, True))
    lines.append("")
    lines.append(
        f"Goal p99 ≤ 500 µs at 50 Hz (sleep+spin, with or without logger): worst p99 {goal:.1f} µs -> "
        f"{'met' if goal <= 500 else 'NOT met'}."
    )
    return lines


def section_serial(seconds: float) -> list[str]:
    from upright.deploy.protocol import go_m8010 as go
    from upright.deploy.protocol import imu_frame
    from upright.deploy.pty_device import PtyDeviceServer
    from upright.deploy.robot import JointCommand, SerialRobot
    from upright.deploy.robot_config import g1_29dof

    cfg = g1_29dof()

    class EchoModel:
        def __init__(self):
            self.seq = 0

        def motor_reply(self, bus, cmd):
            return go.GoReply(cmd.motor_id, cmd.mode, 0.0, 0.0, cmd.q, 35, 0, 0)

        def imu_sample(self, tick):
            self.seq += 1
            return imu_frame.ImuSample(
                imu_frame.DEFAULT_ADDRESS,
                self.seq,
                tick * 2000,
                (1.0, 0.0, 0.0, 0.0),
                (0.0, 0.0, 0.0),
                (0.0, 0.0, 9.81),
            )

        def idle(self):
            return None

    server = PtyDeviceServer(
        [b.name for b in cfg.buses], [{m.motor_id: m.joint for m in b.motors} for b in cfg.buses], EchoModel()
    )
    pid = os.fork()
    if pid == 0:  # the device, in its own process (its own GIL), as sim-robot or a real motor would be
        try:
            server.serve()
        finally:
            os._exit(0)
    lines = ["| measurement | p50 µs | p99 µs | max µs | n |", "|---|---|---|---|---|"]
    try:
        robot = SerialRobot(cfg.with_ports(server.ports))
        robot.connect()
        bus = robot.buses[0]
        frame = go.encode_command_values(0, 1, 0.0, 0.0, 0.1, 1.0, 0.1)
        rtt = []
        t_end = time.monotonic() + seconds / 2
        while time.monotonic() < t_end:
            t0 = time.monotonic_ns()
            bus.send(frame)
            reply = bus.receive(go.REPLY_SIZE, go.REPLY_HEADER, t0 + 50_000_000)
            rtt.append(time.monotonic_ns() - t0)
            assert reply is not None
        p = percentiles(np.array(rtt))
        lines.append(f"| one GO command -> reply (17 + 16 bytes) | {p[0]:.1f} | {p[1]:.1f} | {p[2]:.1f} | {len(rtt)} |")
        cmd = JointCommand.zeros(len(cfg.joint_names))
        ex, tick, bad = [], 0, 0
        t_end = time.monotonic() + seconds / 2
        while time.monotonic() < t_end:
            t0 = time.monotonic_ns()
            reading = robot.exchange(cmd, tick)
            ex.append(time.monotonic_ns() - t0)
            bad += int(not reading.ok.all() or not reading.imu_ok)
            tick += 1
        p = percentiles(np.array(ex))
        lines.append(
            "| full G1 exchange: 29 motors on 5 buses + IMU (8 rounds) | "
            f"{p[0]:.1f} | {p[1]:.1f} | {p[2]:.1f} | {len(ex)} |"
        )
        lines.append("")
        lines.append(
            f"Exchanges with a timeout or bad frame: {bad}. A 500 Hz loop has 2000 µs per cycle for the "
            "exchange plus the policy tick."
        )
        robot.close()
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        server.close()
    return lines


def find_policy(tmp: pathlib.Path) -> pathlib.Path:
    candidates = sorted(
        (ROOT / "logs" / "standup").glob("*/policy.onnx"), key=lambda p: p.stat().st_mtime, reverse=True
    )
    for src in candidates:
        try:
            import shutil

            dst = tmp / "policy.onnx"
            shutil.copy2(src, dst)
            if (src.parent / "policy.onnx.data").exists():
                shutil.copy2(src.parent / "policy.onnx.data", tmp / "policy.onnx.data")
            return dst
        except OSError:
            continue
    raise FileNotFoundError("no policy under logs/standup/*/policy.onnx; pass --policy FILE")


def section_inference(policy_path: pathlib.Path, n: int) -> list[str]:
    from upright.deploy.metadata import load_policy_spec
    from upright.deploy.observation import ObservationBuilder
    from upright.policy_io.mlp import OnnxPolicy

    spec = load_policy_spec(policy_path)
    policy = OnnxPolicy(spec, warmup=200)
    builder = ObservationBuilder(spec)
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((1, spec.obs_dim)).astype(np.float32)
    t_inf, t_obs = [], []
    j = spec.num_joints
    q, dq, gyro = rng.standard_normal(j), rng.standard_normal(j), rng.standard_normal(3)
    quat, act = np.array([0.9, 0.1, -0.3, 0.2]), rng.standard_normal(j).astype(np.float32)
    for _ in range(n):
        t0 = time.monotonic_ns()
        policy(obs)
        t1 = time.monotonic_ns()
        builder.push(builder.frame(q, dq, gyro, quat, act))
        t2 = time.monotonic_ns()
        t_inf.append(t1 - t0)
        t_obs.append(t2 - t1)
    lines = ["| measurement | p50 µs | p99 µs | max µs |", "|---|---|---|---|"]
    p = percentiles(np.array(t_inf))
    lines.append(
        f"| onnxruntime, 1 thread: {spec.obs_dim} -> {j} ({policy_path.name}) | {p[0]:.1f} | {p[1]:.1f} | {p[2]:.1f} |"
    )
    p = percentiles(np.array(t_obs))
    lines.append(f"| observation frame ({spec.frame_dim}) + history push | {p[0]:.1f} | {p[1]:.1f} | {p[2]:.1f} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="seconds per lateness figure and for the serial section"
    )
    parser.add_argument("--policy", help="policy.onnx for the inference section (default: newest under logs/standup/)")
    parser.add_argument("--inference-runs", type=int, default=3000)
    parser.add_argument("--rt-priority", type=int, help="try SCHED_FIFO at this priority first")
    parser.add_argument("--cpu", type=int, help="pin to this CPU first")
    parser.add_argument("--out", help="also write the Markdown report here")
    args = parser.parse_args()
    notes = setup_realtime(args.rt_priority, {args.cpu} if args.cpu is not None else None)
    report = [
        f"# bench_deploy_loop ({datetime.datetime.now().isoformat(timespec='seconds')})",
        "",
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start; "
        f"scheduling: {'; '.join(notes) or 'normal (no SCHED_FIFO, no pinning)'}",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = pathlib.Path(tmp_s)
        report += ["## 1. Loop lateness (100 µs work per cycle)", ""] + section_lateness(args.seconds, tmp) + [""]
        report += ["## 2. Serial round trip over a pty", ""] + section_serial(args.seconds) + [""]
        policy = pathlib.Path(args.policy) if args.policy else find_policy(tmp)
        report += ["## 3. Inference", ""] + section_inference(policy, args.inference_runs) + [""]
    report.append(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    text = "\n".join(report)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
