"""What does a lift policy do with the cube? A per-env-step profile of its episodes (issue 14 diagnosis).

    python benchmarks/lift_pose_probe.py logs/lift/<run>/model_<it>.pt [...] [--level 0] [--envs 64] [--every 10]

Runs one episode (150 env steps) of each policy on ``--envs`` envs with the curriculum at ``--level`` (0: the
training start's ranges; 1: the full ranges), domain randomisation on, the policy deterministic, and prints every
``--every`` env steps the fraction of envs whose hand or a fingertip touches the floor, the fraction with both finger
pads on the cube, the mean cube height above its start (cm), the target's height above it (cm), the gripper site's
height (cm), the mean cube-target distance (cm) and the mean arm joint positions (rad). One env step before the
episode's end it prints, for env 0, the actuator forces (N·m, N), the joint-limit constraint forces and every contact
with its normal force (N), from ``mj_forward`` on that env's state.

This told the stuck carry seeds of session 11 apart (``docs/lift_learning.md``, session 12): their hand leans on
the table for the whole episode.
"""

from __future__ import annotations

import argparse

import mujoco
import numpy as np
import torch
from hydra import compose, initialize

from upright.conf import register_configs, with_task_groups
from upright.tasks.registry import make_env
from upright.viewer.policy import load_policy


def profile(spec: str, level: float, num_envs: int, every: int, seed: int, overrides: list[str]) -> None:
    """Print the profile of policy ``spec`` (see the module docstring)."""
    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose("config", overrides=with_task_groups(["task=lift", *overrides]))
    cfg.env.num_envs = num_envs
    cfg.env.curriculum.init_level = level
    cfg.train.init_at_random_ep_len = False
    env = make_env("lift", cfg.env, cfg.sim, device="cpu", seed=seed)
    policy = load_policy(spec, env, "lift", cfg.train, seed=seed)
    env.reset_all()
    print(f"\n{spec} (level {level}, {num_envs} envs)")
    print("step | floor | grasp | cube dz cm | target dz cm | gripper z cm | distance cm | arm q (rad)")
    for t in range(1, env.max_episode_length + 1):
        with torch.no_grad():
            env.step(policy(env.get_observations()["actor"]))
        s = env.last_state
        if t % every == 0:
            cube_dz = 100 * (s.cube_pos[:, 2] - s.cube_start[:, 2]).mean()
            target_dz = 100 * (s.target_pos[:, 2] - s.cube_start[:, 2]).mean()
            print(
                f"{t:4d} | {s.floor_contact.float().mean():5.2f} | {s.grasped.float().mean():5.2f} | "
                f"{cube_dz:10.1f} | {target_dz:12.1f} | {100 * s.gripper_pos[:, 2].mean():12.1f} | "
                f"{100 * s.cube_to_target.norm(dim=-1).mean():11.1f} | {s.q[:, :7].mean(0).numpy().round(2)}"
            )
        if t == env.max_episode_length - 1:  # the last step before the envs reset
            contacts(env)
    env.close()


def contacts(env) -> None:
    """Actuator forces, joint-limit forces and contacts of env 0 (``mj_forward`` on a copy of its state)."""
    m = env.model
    d = mujoco.MjData(m)
    st = env.sim.state
    d.qpos[:] = st.qpos[0].cpu().numpy()
    d.qvel[:] = st.qvel[0].cpu().numpy()
    d.ctrl[:] = env.ctrl[0].cpu().numpy()
    mujoco.mj_forward(m, d)
    print("env 0: ctrl", d.ctrl.round(2), "\n       actuator force", d.actuator_force.round(2))
    for i in range(d.nefc):
        if d.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT:
            print(f"       joint limit {m.joint(d.efc_id[i]).name}: {d.efc_force[i]:.2f}")
    force = np.zeros(6)
    for i in range(d.ncon):
        c = d.contact[i]
        mujoco.mj_contactForce(m, d, i, force)
        names = [m.geom(g).name or m.body(m.geom_bodyid[g]).name for g in (c.geom1, c.geom2)]
        print(f"       contact {names[0]} - {names[1]}: normal {force[0]:.1f} N")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("policies", nargs="+", help="checkpoints, run directories or .onnx files")
    ap.add_argument("--level", type=float, default=0.0, help="curriculum level of every env (0-1)")
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--every", type=int, default=10, help="print every N env steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--override", action="append", default=[], help="task config override, e.g. sim.num_threads=2")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for spec in args.policies:
        profile(spec, args.level, args.envs, args.every, args.seed, args.override)


if __name__ == "__main__":
    main()
