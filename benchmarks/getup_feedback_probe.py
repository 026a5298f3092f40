"""Which hand-written feedback keeps a standing G1 up in the get-up env? A feasibility probe for learned balance.

    python benchmarks/getup_feedback_probe.py [--freq 10] [--seconds 6]

Runs ``recipe=getup`` with absolute actions (PD target = q0 + 0.6·a, ``env.action_mode=absolute``), every start
standing in the default pose, domain randomisation off, and one env per feedback law, all in the real env (real
MuJoCo, the recipe's reflected-inertia gains at ``--freq`` Hz). Reported per law: seconds until the pelvis first
falls below 0.5 m (the episode length if it never does). The laws, with q the policy joints' angles (rad), q0 the
default pose, θ the pelvis pitch from its projected gravity (rad) and ω_y its gyro pitch rate (rad/s):

- ``none``: a = 0 (the motors' PD alone);
- ``stiff_all k``: a = -k·(q - q0)/0.6 on every joint: the joints (1 + k) times stiffer, a statue for large k;
- ``stiff_ankles k``: the same on the four ankle joints only;
- ``pelvis_tilt k``: ankle pitch targets q0 + k·θ + 0.1·k·ω_y (ankle strategy on the pelvis IMU; roll likewise).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from gradient_consistency import build

LAWS: list[tuple[str, float]] = [("none", 0.0)] + [("stiff_all", k) for k in (1.0, 4.0, 16.0)] + [
    ("stiff_ankles", k) for k in (4.0, 16.0)] + [("pelvis_tilt", k) for k in (2.0, 8.0, -2.0, -8.0)]  # fmt: skip
"""(law, gain) per env."""

BETA = 0.6
"""The recipe's action scale, rad per unit action."""


def feedback(law: str, k: float, q: torch.Tensor, q0: torch.Tensor, gravity: torch.Tensor, gyro: torch.Tensor,
             index: dict[str, int]) -> torch.Tensor:  # fmt: skip
    """(J,) action of one env under ``law`` with gain ``k`` (see the module doc)."""
    a = torch.zeros_like(q)
    ankles = [index[f"{s}_ankle_{j}_joint"] for s in ("left", "right") for j in ("pitch", "roll")]
    if law == "stiff_all":
        a = -k * (q - q0) / BETA
    elif law == "stiff_ankles":
        a[ankles] = -k * (q[ankles] - q0[ankles]) / BETA
    elif law == "pelvis_tilt":
        pitch = torch.atan2(gravity[0], -gravity[2])
        roll = torch.atan2(gravity[1], -gravity[2])
        for s in ("left", "right"):
            a[index[f"{s}_ankle_pitch_joint"]] = k * (pitch + 0.1 * gyro[1]) / BETA
            a[index[f"{s}_ankle_roll_joint"]] = k * (roll + 0.1 * gyro[0]) / BETA
    return a


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--freq", type=float, default=10.0, help="natural frequency of the PD loops, Hz (default 10)")
    p.add_argument("--seconds", type=float, default=6.0, help="episode length, s (default 6, the MDP's)")
    args = p.parse_args(argv)
    from upright.robots import g1

    n = len(LAWS)
    env, *_ = build("getup", n, 12, 0, [
        "env.domain_rand.enabled=false", "env.action_mode=absolute", f"env.getup.natural_freq_hz={args.freq}",
        "env.getup.stand_fraction=1.0", "env.getup.fall_fraction=0.0", f"env.episode_length_s={args.seconds}",
        "sim.num_threads=1"])  # fmt: skip
    env.reset_all()
    index = {name: i for i, name in enumerate(g1.POLICY_JOINT_NAMES)}
    q0 = env.default_pose[env._policy_ids]
    steps = int(round(args.seconds / env.step_dt))
    up_s = torch.full((n,), args.seconds)
    up = torch.ones(n, dtype=torch.bool)
    for t in range(steps - 1):
        s = env.state
        a = torch.stack([feedback(law, k, s.q[i], q0, s.projected_gravity[i], s.base_ang_vel[i], index)
                         for i, (law, k) in enumerate(LAWS)])  # fmt: skip
        env.step(a)
        fell = up & (env.last_state.base_pos[:, 2] < 0.5)
        up_s[fell] = (t + 1) * env.step_dt
        up &= ~fell
    print(f"| law | gain k | seconds up (of {args.seconds:g}; {args.freq:g} Hz gains) |")
    print("|---|---:|---:|")
    for (law, k), sec in zip(LAWS, up_s.tolist()):
        print(f"| {law} | {k:g} | {sec:.2f} |")


if __name__ == "__main__":
    main()
