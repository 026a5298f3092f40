"""Throughput of the gymnasium vector env (``gymnasium.make_vec("upright/G1Standup-v0", ...)``) against the native
rsl-rl ``VecEnv`` path (``StandupEnv.step`` as ``train.py`` collects with it), in the same run.

Both paths step an env of the same config (the training defaults: curricula, domain randomisation, observation noise)
with the same seed and the same pre-drawn random actions in [-1, 1]; rounds alternate native, gym, native, gym, ... so
that other processes on the machine slow both alike. Each figure is the median over rounds of env-steps/s
(N x steps / s). The gym path includes what a gymnasium user pays: numpy actions in, numpy observations, rewards
and flags out (copies), the reward-group info, and the final observations of the episodes that ended. The report
also gives the share of the CPU other processes used during the timed rounds (``benchmarks/machine.py``): figures
taken while it is well above 0 come from a shared CPU.

    python benchmarks/bench_gym_vector.py                       # N=256, 2 threads, 5 rounds x 50 steps per path
    python benchmarks/bench_gym_vector.py --num-envs 64 --rounds 3 --steps 20 --out quick.md

Needs ``MENAGERIE_ROOT`` (or network access for mujoco-menagerie).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import CpuMeter, cpu_model


def measure(num_envs: int, threads: int, steps: int, rounds: int, seed: int = 0, log=print) -> dict:
    """Median env-steps/s of both paths and their ratio (gym / native); see the module doc."""
    import gymnasium
    import numpy as np
    import torch

    import upright  # noqa: F401  (registers the ids)
    from upright.tasks.registry import make_env

    torch.set_num_threads(1)  # train.py collects with one torch thread
    venv = gymnasium.make_vec(
        "upright/G1Standup-v0", num_envs=num_envs, vectorization_mode="vector_entry_point", num_threads=threads
    )
    task = venv.unwrapped.task
    native = make_env("standup", task.cfg, task.sim_cfg, device="cpu", seed=seed)
    venv.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions_np = rng.uniform(-1.0, 1.0, (steps, num_envs, 23)).astype(np.float32)
    actions_t = torch.from_numpy(actions_np.copy())

    def run_native() -> float:
        t0 = time.perf_counter()
        for k in range(steps):
            obs, rewards, dones, extras = native.step(actions_t[k])
        return num_envs * steps / (time.perf_counter() - t0)

    def run_gym() -> float:
        t0 = time.perf_counter()
        for k in range(steps):
            obs, rewards, terminated, truncated, infos = venv.step(actions_np[k])
        return num_envs * steps / (time.perf_counter() - t0)

    run_native(), run_gym()  # warm-up round of each
    rates: dict[str, list[float]] = {"native": [], "gym": []}
    meter = CpuMeter().start()
    for r in range(rounds):
        rates["native"].append(run_native())
        rates["gym"].append(run_gym())
        log(f"  round {r + 1}/{rounds}: native {rates['native'][-1]:.0f}, gym {rates['gym'][-1]:.0f} env-steps/s")
    others = meter.stop()
    venv.close()
    native.close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    ratios = [g / n for g, n in zip(rates["gym"], rates["native"])]
    return {
        "native": med["native"],
        "gym": med["gym"],
        "ratio": med["gym"] / med["native"],
        "ratio_rounds": ratios,
        "others_cpu": others,
        "rates": rates,
    }


def report(args, res: dict) -> str:
    shared = res["others_cpu"] > 0.05
    return "\n".join(
        [
            "# Gymnasium vector env vs native VecEnv throughput",
            "",
            f"{datetime.datetime.now().isoformat(timespec='seconds')}; {cpu_model()}, {os.cpu_count()} CPUs; "
            f"N={args.num_envs}, native backend threads={args.threads}, "
            f"{args.rounds} rounds x {args.steps} steps per path.",
            f"Other processes used {100 * res['others_cpu']:.0f} % of the CPU during the timed rounds"
            + (
                " (a shared CPU: the absolute figures are low; the ratio is the comparison)."
                if shared
                else " (CPU idle)."
            ),
            "",
            "| path | env-steps/s (median) |",
            "|---|---|",
            f"| native `StandupEnv.step` (rsl-rl VecEnv) | {res['native']:.0f} |",
            f'| `gymnasium.make_vec(..., vectorization_mode="vector_entry_point")` | {res["gym"]:.0f} |',
            "",
            f"gym / native: **{res['ratio']:.3f}** (per round: {', '.join(f'{r:.3f}' for r in res['ratio_rounds'])}).",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--threads", type=int, default=2, help="native backend threads (SimCfg.num_threads)")
    p.add_argument("--steps", type=int, default=50, help="env steps per round and path")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", help="also write the Markdown report here")
    args = p.parse_args(argv)
    res = measure(args.num_envs, args.threads, args.steps, args.rounds)
    text = report(args, res)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return res


if __name__ == "__main__":
    main()
