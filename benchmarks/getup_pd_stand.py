"""Can the G1 stand on its PD loops alone? Time to fall from a standing pose, by pose and PD natural frequency.

    python benchmarks/getup_pd_stand.py [--freqs 5 10 20] [--seconds 5] [--feedback-envs 64]

Part 1, bare MuJoCo on the compiled model of ``recipe=getup`` (``env.getup.natural_freq_hz`` = f): the G1 is put in
a pose with its lowest foot geom 2 mm above the floor, the position actuators' targets are the pose, no policy; the
time until the pelvis is 0.1 m below its start is printed (``never`` if it stays). Poses: HoST's default (the
recipe's standing start), mjlab's ``HOME_KEYFRAME`` and ``KNEES_BENT_KEYFRAME`` (mujocolab/mjlab
``src/mjlab/asset_zoo/robots/unitree_g1/g1_constants.py``).

Part 2, the env itself (standing starts only, DR on, relative actions): the feedback a = k·(q0 − q)/0.6 (PD targets
q + k·(q0 − q), i.e. k x the stiffness towards the default pose), mean seconds the pelvis stays above 0.6 m over
``--feedback-envs`` envs and 3 s.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import mujoco
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

MJLAB_POSES = {
    "mjlab HOME_KEYFRAME": {
        "shoulder_pitch": 0.2,
        "elbow": 1.28,
        "left_shoulder_roll": 0.2,
        "right_shoulder_roll": -0.2,
    },
    "mjlab KNEES_BENT_KEYFRAME": {
        "hip_pitch": -0.312,
        "knee": 0.669,
        "ankle_pitch": -0.363,
        "elbow": 0.6,
        "shoulder_pitch": 0.2,
        "left_shoulder_roll": 0.2,
        "right_shoulder_roll": -0.2,
    },
}
"""Joint angles (rad) that differ from HoST's default pose; a key without a side applies to both."""


def pose(default: torch.Tensor, names: tuple[str, ...], values: dict[str, float]) -> torch.Tensor:
    q = default.clone()
    for i, name in enumerate(names):
        for key, v in values.items():
            if name == f"{key}_joint" or name.endswith(f"_{key}_joint") and not key.startswith(("left", "right")):
                q[i] = v
    return q


def time_to_fall(model: mujoco.MjModel, q_adr, q: torch.Tensor, seconds: float) -> float | None:
    d = mujoco.MjData(model)
    d.qpos[3], d.qpos[q_adr] = 1.0, q.numpy()
    d.qpos[2] = 1.0
    mujoco.mj_forward(model, d)
    feet = [g for g in range(model.ngeom) if "foot" in (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "")]
    d.qpos[2] = 1.0 - min(d.geom_xpos[g][2] - model.geom_size[g][0] for g in feet) + 0.002
    mujoco.mj_forward(model, d)
    z0 = d.qpos[2]
    d.ctrl[: len(q)] = q.numpy()
    while d.time < seconds:
        mujoco.mj_step(model, d)
        if d.qpos[2] < z0 - 0.1:
            return d.time
    return None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--freqs", type=float, nargs="+", default=[5.0, 10.0, 20.0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--feedback-envs", type=int, default=64)
    p.add_argument("--gains", type=float, nargs="+", default=[0.0, 1.0, 2.0, 4.0])
    args = p.parse_args(argv)
    from gradient_consistency import build

    from upright.robots import g1

    torch.set_num_threads(1)
    print("| f (Hz) | pose | s until the pelvis is 0.1 m lower (PD targets = the pose, no policy) |")
    print("|---:|---|---:|")
    for f in args.freqs:
        env, _, _ = build("getup", 1, 12, 1, [f"env.getup.natural_freq_hz={f}", "sim.num_threads=1"])
        poses = {"HoST default": env.default_pose.cpu()}
        poses |= {k: pose(env.default_pose.cpu(), g1.JOINT_NAMES, v) for k, v in MJLAB_POSES.items()}
        for name, q in poses.items():
            t = time_to_fall(env.model, env._q_adr.numpy(), q, args.seconds)
            print(f"| {f:g} | {name} | {'never' if t is None else f'{t:.2f}'} |")
        env.close()
    print("\n| f (Hz) | k | s with the pelvis above 0.6 m (mean over envs, standing starts, DR on, 3 s) |")
    print("|---:|---:|---:|")
    for f in args.freqs:
        env, _, _ = build(
            "getup",
            args.feedback_envs,
            12,
            1,
            [
                f"env.getup.natural_freq_hz={f}",
                "env.getup.stand_fraction=1.0",
                "env.getup.fall_fraction=0.0",
                "sim.num_threads=1",
            ],
        )
        for k in args.gains:
            env.reset_all()
            up = torch.zeros(env.num_envs)
            for _ in range(150):
                s = env._read_state()
                env.step(-k * (s.q - s.default_q) / float(env.cfg.curriculum.beta_init))
                up += (env._read_state().base_pos[:, 2] > 0.6).float() * env.cfg.decimation * env.model.opt.timestep
            print(f"| {f:g} | {k:g} | {up.mean():.2f} |")
        env.close()


if __name__ == "__main__":
    main()
