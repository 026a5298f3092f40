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

import mujoco
import numpy as np

from upright.robots import g1
from upright.tasks.standup.rise_path import RisePathCfg, RisePathStarts, _sym, interpolate, keyframes
from upright.tasks.standup.scene import standup_scene

PARAMS = ("rock_hip_pitch", "rock_knee", "rock_ankle_pitch", "rock_shoulder_pitch", "rock_elbow", "rock_waist_pitch",
          "t_tuck", "t_rock", "t_squat", "t_stand")
"""The searched numbers: the rock keyframe's joint angles (rad, both sides) and four segment durations (s)."""
MU0 = np.array([-2.5, 2.7, -0.6, -1.5, 0.3, 0.4, 0.6, 0.4, 0.4, 0.8])
SD0 = np.array([0.5, 0.4, 0.3, 0.8, 0.6, 0.4, 0.4, 0.4, 0.4, 0.4])


class KeyframeGetUp:
    """Open-loop PD tracking of the rise-path keyframes with one searched rock keyframe (module docstring)."""

    def __init__(self, t_min: float = 0.2):
        self.m = standup_scene()
        self.d = mujoco.MjData(self.m)
        info = g1.robot_info()
        self.frames = keyframes(self.m, info.default_pose)
        jids = [mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in g1.JOINT_NAMES]
        self.lo, self.hi = self.m.jnt_range[jids, 0], self.m.jnt_range[jids, 1]
        self.head = mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_SITE, "head")
        self.feet = {mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_BODY, f"{s}_ankle_roll_link") for s in ("left", "right")}
        start = RisePathCfg(fraction=0.5, bank_size=1, u_max=0.0, joint_noise=0.0, settle_min=0.5, settle_max=0.5)
        self.q0 = RisePathStarts(start, self.m, info.default_pose, info.policy_joint_ids, seed=0).qpos[0].double().numpy()
        self.t_min = t_min
        self.waist = g1.JOINT_NAMES.index("waist_pitch_joint")

    def schedule(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keyframe times (K,) s and joint targets (K, 29) rad for parameters ``p`` (10,)."""
        f = self.frames
        tuck, squat, stand = interpolate(f, 0.45)[1], interpolate(f, 0.65)[1], interpolate(f, 1.0)[1]
        rock = tuck.copy()
        for name, v in zip(("hip_pitch", "knee", "ankle_pitch", "shoulder_pitch", "elbow"), p[:5]):
            rock[_sym(name)] = v
        rock[self.waist] = p[5]
        rock = np.clip(rock, self.lo, self.hi)
        dt = np.clip(p[6:10], self.t_min, 2.0)
        times = np.concatenate([[0.0, 0.8], 0.8 + np.cumsum(dt)])
        return times, np.stack([interpolate(f, 0.0)[1], interpolate(f, 0.2)[1], tuck, rock, squat, stand])

    def rollout(self, p: np.ndarray, grounded: bool) -> tuple[float, list[float]]:
        """Score (m) and head-height trace (every 0.01 s) of one open-loop get-up."""
        m, d = self.m, self.d
        ts, targets = self.schedule(p)
        d.qpos[:], d.qvel[:] = self.q0, 0.0
        mujoco.mj_forward(m, d)
        best, trace = 0.0, []
        for k in range(0, int((ts[-1] + 1.0) / m.opt.timestep), 2):
            t = k * m.opt.timestep
            i = min(int(np.searchsorted(ts, t, side="right")) - 1, len(ts) - 2)
            s = float(np.clip((t - ts[i]) / (ts[i + 1] - ts[i]), 0.0, 1.0))
            d.ctrl[:] = targets[i] * (1 - s) + targets[i + 1] * s
            mujoco.mj_step(m, d, nstep=2)
            h = float(d.site_xpos[self.head, 2])
            trace.append(h)
            if t <= ts[-3]:
                continue
            if grounded:
                foot = any(m.geom_bodyid[c.geom1] in self.feet or m.geom_bodyid[c.geom2] in self.feet for c in d.contact[: d.ncon])
                if not (foot and abs(d.qvel[2]) < 0.5 and d.qpos[2] < 0.85):
                    continue
            best = max(best, h)
        return best, trace


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
    task = KeyframeGetUp(args.t_min)
    rng = np.random.default_rng(args.seed)
    mu, sd = MU0.copy(), SD0.copy()
    t0 = time.time()
    for gen in range(args.generations):
        pop = mu + sd * rng.standard_normal((args.samples, len(mu)))
        scores = np.array([task.rollout(p, args.grounded)[0] for p in pop])
        elite = pop[np.argsort(scores)[-args.elite :]]
        mu, sd = elite.mean(0), elite.std(0) + 0.02
        print(f"gen {gen}: best {scores.max():.2f} m, mean {scores.mean():.2f} m ({time.time() - t0:.0f} s)", flush=True)
    score, trace = task.rollout(mu, args.grounded)
    print(f"final mean: score {score:.2f} m; head every 0.25 s: " + " ".join(f"{h:.2f}" for h in trace[::25]))
    if args.out:
        out = {"seed": args.seed, "grounded": args.grounded, "t_min": args.t_min, "score_m": score,
               "params": dict(zip(PARAMS, map(float, mu))), "head_every_0.25s": [round(h, 3) for h in trace[::25]]}
        pathlib.Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
