"""Search an open-loop keyframe get-up of the G1 with the cross-entropy method (experiment script, issue 12).

The rise path of :mod:`upright.tasks.standup.rise_path` (supine -> sitting up -> tucked sit -> squat -> standing),
tracked open loop by the scene's PD actuators, reaches the tucked sit but falls back before the squat: the weight
shift onto the feet needs momentum. This script adds one "rock" keyframe between the tucked sit and the squat
(hip pitch, knee, ankle pitch, shoulder pitch, elbow, waist pitch: rad) and the durations of the four later
segments (s, clipped to [t_min, 2]), and searches those 10 numbers with the cross-entropy method (Rubinstein 1999;
samples per generation, elite mean and std) on the native MuJoCo scene from a settled supine start.

Score: the highest head height (m) after the squat keyframe's time. ``--grounded`` counts only moments with a foot
on the ground, |pelvis vz| < 0.5 m/s and the pelvis below 0.85 m, so that jumps do not score: without it the search
finds a jump (pelvis 1.6 m, take-off 5 m/s) that the simulated motors allow because the position actuators give
their full torque at any joint speed (no torque-speed curve is modelled).

Usage: ``python benchmarks/standup_teacher_cem.py --seed 1 --grounded --out docs/standup_learning/teacher_cem_s1.json``
(about 2.5 min on one core at 30 generations x 64 samples). Prints the score per generation and the head-height
trace of the final mean (every 0.25 s); writes the parameters and the score as JSON.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import numpy as np

from upright.robots import g1
from upright.tasks.standup.scene import standup_scene
from upright.tasks.standup.teacher import PARAMS, KeyframeGetUp

MU0 = np.array([-2.5, 2.7, -0.6, -1.5, 0.3, 0.4, 0.6, 0.4, 0.4, 0.8])
"""Initial mean of the search, :data:`~upright.tasks.standup.teacher.PARAMS` order (rad, s)."""
SD0 = np.array([0.5, 0.4, 0.3, 0.8, 0.6, 0.4, 0.4, 0.4, 0.4, 0.4])
"""Initial standard deviation of the search."""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--generations", type=int, default=30)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--elite", type=int, default=8)
    ap.add_argument("--t-min", type=float, default=0.2, help="shortest segment duration, s")
    ap.add_argument("--grounded", action="store_true", help="score only grounded, slow moments (no jumps)")
    ap.add_argument("--out", default=None, help="JSON file for the result")
    args = ap.parse_args(argv)
    info = g1.robot_info()
    task = KeyframeGetUp(standup_scene(), info.default_pose, info.policy_joint_ids, args.t_min)
    rng = np.random.default_rng(args.seed)
    mu, sd = MU0.copy(), SD0.copy()
    t0 = time.time()
    for gen in range(args.generations):
        pop = mu + sd * rng.standard_normal((args.samples, len(mu)))
        scores = np.array([task.rollout(p, args.grounded)[0] for p in pop])
        elite = pop[np.argsort(scores)[-args.elite :]]
        mu, sd = elite.mean(0), elite.std(0) + 0.02
        print(
            f"gen {gen}: best {scores.max():.2f} m, mean {scores.mean():.2f} m ({time.time() - t0:.0f} s)", flush=True
        )
    score, trace, _ = task.rollout(mu, args.grounded)
    print(f"final mean: score {score:.2f} m; head every 0.25 s: " + " ".join(f"{h:.2f}" for h in trace[::25]))
    if args.out:
        out = {
            "seed": args.seed,
            "grounded": args.grounded,
            "t_min": args.t_min,
            "score_m": score,
            "params": dict(zip(PARAMS, map(float, mu))),
            "head_every_0.25s": [round(h, 3) for h in trace[::25]],
        }
        pathlib.Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
