"""Can a sampling-based planner keep the simulated G1 standing, or stand it up? (issue 12, the "teacher" lever)

Predictive sampling (Howell et al., "Predictive Sampling: Real-time Behaviour Synthesis with MuJoCo", 2022,
arXiv 2212.00541; MuJoCo MPC): at every env step (50 Hz), perturb a nominal plan of PD targets with Gaussian noise,
simulate each candidate over a short horizon with ``mujoco.rollout`` on the standup scene (the real model: 429
self-collision pairs, per-motor armature, HoST's PD gains), keep the cheapest, apply its first env step, shift.
The plan is a piecewise-linear spline of ``--knots`` knots over ``--horizon`` s, on the 23 policy joints; the held
joints stay at the default pose.

Cost per physics step: w_h (pelvis z - z*)² + w_up (1 - R_zz) + w_v |v_xy|² + w_a |q - q_default|² (pelvis z* =
the settled standing pelvis height, R_zz = the pelvis z axis' world z). Nothing here is used by a policy; it
answers whether a model-based teacher can provide balance (and a get-up) for demonstrations or RSI states.

Usage::

    python benchmarks/standup_predictive_sampling.py --start stand --episodes 8 --seconds 4
    python benchmarks/standup_predictive_sampling.py --start supine --episodes 2 --seconds 6

Prints, per episode, survival time (head above start - 0.25 m), final/peak head height and planning time per env
step; the same fall rule as the rise-path episodes (``env.rise_path.fall_drop=0.25``).
"""

from __future__ import annotations

import argparse
import json
import time

import mujoco
import numpy as np

from upright.tasks.standup.planner import DECIMATION, PlannerCfg, PredictiveSampler
from upright.tasks.standup.rise_path import settled_starts
from upright.tasks.standup.scene import standup_scene


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--start", choices=["stand", "supine"], default="stand")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--horizon", type=float, default=0.5)
    ap.add_argument("--knots", type=int, default=4)
    ap.add_argument("--sigma", type=float, default=0.15)
    ap.add_argument("--z-target", type=float, default=0.78)
    ap.add_argument("--w", type=str, default='{"height": 10, "upright": 3, "vel": 0.3, "pose": 0.01}')
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--beta",
        type=float,
        default=PlannerCfg.beta,
        help="limit the targets to default ± beta (what env.action_mode=absolute with |a| <= 1 can command); "
        "0: joint range",
    )
    ap.add_argument("--out", type=str, default="")
    a = ap.parse_args()
    m = standup_scene()
    head = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "head")
    rows = []
    for ep, q0 in enumerate(settled_starts(m, a.start, a.episodes, a.seed)):
        cfg = PlannerCfg(
            samples=a.samples,
            horizon_s=a.horizon,
            knots=a.knots,
            sigma=a.sigma,
            z_target=a.z_target,
            beta=a.beta,
            weights=json.loads(a.w),
        )
        ps = PredictiveSampler(m, cfg, seed=a.seed + ep)
        d = mujoco.MjData(m)
        d.qpos[:] = q0
        mujoco.mj_forward(m, d)
        h0 = peak = float(d.site_xpos[head, 2])
        alive_s, t_plan = 0.0, 0.0
        nsteps = round(a.seconds / (m.opt.timestep * DECIMATION))
        fell = False
        trace, max_dq, max_vz = [], 0.0, 0.0
        for step in range(nsteps):
            t0 = time.perf_counter()
            d.ctrl[:] = ps.plan(d)
            t_plan += time.perf_counter() - t0
            mujoco.mj_step(m, d, nstep=DECIMATION)
            h = float(d.site_xpos[head, 2])
            peak = max(peak, h)
            max_dq = max(max_dq, float(np.abs(d.qvel[6:]).max()))
            max_vz = max(max_vz, float(d.qvel[2]))
            if step % 25 == 24:
                trace.append(round(h, 2))
            if a.start == "stand" and h < h0 - 0.25:
                fell = True
                break
            alive_s += m.opt.timestep * DECIMATION
        row = {
            "episode": ep,
            "start_head": round(h0, 3),
            "survived_s": round(alive_s, 2),
            "fell": fell,
            "final_head": round(float(d.site_xpos[head, 2]), 3),
            "peak_head": round(peak, 3),
            "plan_ms_per_step": round(1000 * t_plan / max(1, round(alive_s / 0.02)), 1),
            "max_joint_speed": round(max_dq, 1),
            "max_pelvis_vz": round(max_vz, 2),
            "head_every_0.5s": trace,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "episodes": rows}, f, indent=1)


if __name__ == "__main__":
    main()
