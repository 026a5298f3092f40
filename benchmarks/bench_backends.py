"""Native vs MJX backend throughput on the machine at hand (a script, not a test).

For each backend and N, in a fresh subprocess (so that peak memory is that configuration's own):

- **env-steps/s** of the bare backend: ``sim.step(ctrl, nsubsteps=4)`` (one 50 Hz env step = 4 physics
  steps) plus reading ``sim.state`` (the torch tensors the task reads), G1 lying on the floor with
  random PD targets;
- **compile s** (MJX): the first step's wall time, JIT compile included (JAX's persistent compilation
  cache is off unless ``--use-cache``, so it is a cold compile); reset programs are compiled in
  construction (``init s``);
- **peak RSS delta**: the process's peak resident memory minus its RSS before creating the sim;
  **device memory**: JAX's peak bytes in use where the device reports it (GPUs);
- optionally (``--env``) the full ``StandupEnv.step`` with random actions.

Usage::

    export MENAGERIE_ROOT=<folder in Menagerie layout>   # or leave unset: mujoco-menagerie downloads it
    python benchmarks/bench_backends.py                      # N = 32 128 512 2048, both backends
    python benchmarks/bench_backends.py --num-envs 4096 --backends mjx --device cuda   # GPU
    python benchmarks/bench_backends.py --out results.md    # also write the Markdown table

The default run takes about 4-6 min on 2 CPU cores (most of it MJX compiles).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_one(backend: str, n: int, seconds: float, device: str, env: bool, use_cache: bool) -> dict:
    """Measure one (backend, N) in this process; returns a JSON-able dict."""
    if not use_cache:
        os.environ["UPRIGHT_JAX_CACHE"] = ""
    import math

    import numpy as np
    import torch

    from upright.robots import g1
    from upright.sim import make_sim
    from upright.tasks.standup.scene import standup_scene

    if backend == "mjx":
        import upright.sim.mjx  # noqa: F401  (import jax before the RSS baseline)
    model = standup_scene()
    info = g1.robot_info()
    rss0 = _rss_mb()
    out: dict = {"backend": backend, "n": n}
    t0 = time.perf_counter()
    sim = make_sim(backend, model, n, num_threads=0, device=device)
    out["init_s"] = time.perf_counter() - t0
    if backend == "mjx":
        out["impl"] = sim.impl
    q = torch.tensor(model.qpos0, dtype=torch.float32).repeat(n, 1)
    q[:, 2] = 0.3
    q[:, 3:7] = torch.tensor([math.sqrt(0.5), 0, -math.sqrt(0.5), 0])
    sim.reset_envs(torch.arange(n, device=device), q.to(device), torch.zeros(n, model.nv, device=device))
    rng = np.random.default_rng(0)
    ctrls = [
        torch.tensor(info.default_pose + rng.uniform(-0.5, 0.5, (n, model.nu)), dtype=torch.float32, device=device)
        for _ in range(8)
    ]
    t0 = time.perf_counter()
    sim.step(ctrls[0], 4)
    _ = sim.state.qpos.sum().item()
    out["first_step_s"] = time.perf_counter() - t0  # compile + one step for MJX
    for k in range(3 if backend == "native" else 1):  # warm-up (the robot falls onto the floor: contacts)
        sim.step(ctrls[k % 8], 4)
        _ = sim.state.qpos.sum().item()
    steps, t0 = 0, time.perf_counter()
    while True:
        sim.step(ctrls[steps % 8], 4)
        s = sim.state
        _ = s.qpos.sum().item()  # forces the result (JAX dispatch is asynchronous)
        steps += 1
        if time.perf_counter() - t0 > seconds and steps >= 2:
            break
    dt = time.perf_counter() - t0
    out["steps_per_s"] = n * steps / dt
    out["timed_steps"] = steps
    if env:
        from upright.tasks.standup.config import SimCfg, StandupEnvCfg
        from upright.tasks.standup.env import StandupEnv

        sim.close()
        cfg = StandupEnvCfg(num_envs=n, obs_noise=False)
        cfg.domain_rand.enabled = False  # as when docs/backends.md was measured (the delay would step per substep)
        e = StandupEnv(cfg, SimCfg(backend=backend), device=device)
        gen = torch.Generator().manual_seed(0)
        acts = [torch.randn(n, e.num_actions, generator=gen).to(device) for _ in range(8)]
        e.step(acts[0])
        steps, t0 = 0, time.perf_counter()
        while True:
            e.step(acts[steps % 8])
            steps += 1
            if time.perf_counter() - t0 > seconds and steps >= 3:
                break
        out["env_steps_per_s"] = n * steps / (time.perf_counter() - t0)
    out["peak_rss_delta_mb"] = _peak_rss_mb() - rss0
    if backend == "mjx":
        import jax

        stats = jax.devices()[0].memory_stats() if device != "cpu" else None
        if stats and "peak_bytes_in_use" in stats:
            out["device_peak_mb"] = stats["peak_bytes_in_use"] / 2**20
    return out


def versions() -> dict:
    import mujoco
    import torch

    v = {"mujoco": mujoco.__version__, "torch": torch.__version__, "python": platform.python_version()}
    try:
        from importlib.metadata import version

        v["mujoco-mjx"] = version("mujoco-mjx")
        import jax

        v["jax"] = jax.__version__
        v["jax devices"] = ", ".join(str(d) for d in jax.devices())
    except Exception as e:  # noqa: BLE001
        v["mjx"] = f"not installed ({e})"
    return v


def gpu_name() -> str | None:
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
        return r.stdout.strip() or None
    except OSError:
        return None


def table(results: list[dict], env: bool) -> str:
    head = "| backend | N | env-steps/s (bare, decimation 4) |"
    sep = "|---|---:|---:|"
    if env:
        head += " env-steps/s (StandupEnv) |"
        sep += "---:|"
    head += " first step s (compile) | init s | peak RSS delta MB | device peak MB |"
    sep += "---:|---:|---:|---:|"
    rows = [head, sep]
    for r in results:
        if "error" in r:
            rows.append(f"| {r['backend']} | {r['n']} | failed: {r['error']} |")
            continue
        row = f"| {r['backend']}{' (' + r['impl'] + ')' if 'impl' in r else ''} | {r['n']} | {r['steps_per_s']:,.0f} |"
        if env:
            row += f" {r.get('env_steps_per_s', float('nan')):,.0f} |"
        dev = f"{r['device_peak_mb']:,.0f}" if "device_peak_mb" in r else "n/a"
        row += f" {r['first_step_s']:.1f} | {r['init_s']:.1f} | {r['peak_rss_delta_mb']:,.0f} | {dev} |"
        rows.append(row)
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-envs", type=int, nargs="+", default=[32, 128, 512, 2048])
    p.add_argument("--backends", nargs="+", default=["native", "mjx"], choices=["native", "mjx"])
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per figure")
    p.add_argument("--device", default="cpu", help="torch device (cuda for MJX on a GPU)")
    p.add_argument("--env", action="store_true", help="also time the full StandupEnv.step")
    p.add_argument("--use-cache", action="store_true", help="use JAX's persistent compilation cache")
    p.add_argument("--out", help="also write the Markdown report here")
    p.add_argument("--timeout", type=float, default=400, help="seconds allowed per (backend, N) subprocess")
    p.add_argument("--_child", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._child:
        backend, n = a._child.split(":")
        print("RESULT " + json.dumps(run_one(backend, int(n), a.seconds, a.device, a.env, a.use_cache)))
        return

    start = time.time()
    results = []
    for backend in a.backends:
        for n in a.num_envs:
            cmd = [sys.executable, __file__, "--_child", f"{backend}:{n}", "--seconds", str(a.seconds)]
            cmd += ["--device", a.device]
            cmd += ["--env"] * a.env + ["--use-cache"] * a.use_cache
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
                line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
                error = (r.stderr.strip().splitlines() or ["?"])[-1]
            except subprocess.TimeoutExpired:
                line, error = [], f"no result within {a.timeout:g} s"
            res = json.loads(line[-1][7:]) if line else {"backend": backend, "n": n, "error": error}
            results.append(res)
            print(json.dumps(res), flush=True)
    v = versions()
    lines = [
        f"Date: {datetime.date.today().isoformat()}  ",
        f"CPU: {cpu_model()} ({os.cpu_count()} cores visible)  ",
        f"GPU: {gpu_name() or 'none'}  ",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + "  ",
        f"Torch device: {a.device}; timed {a.seconds:g} s per figure; total run {time.time() - start:.0f} s",
        "",
        table(results, a.env),
    ]
    report = "\n".join(lines)
    print(report)
    if a.out:
        with open(a.out, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
