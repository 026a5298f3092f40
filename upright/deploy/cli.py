"""``upright-deploy``: ``run`` the daemon, serve a ``sim-robot``, ``ctl`` a running daemon, ``recover`` a dataset."""

from __future__ import annotations

import argparse
import os
import sys

from upright.deploy.cli_ctl import cmd_ctl
from upright.deploy.cli_run import cmd_run
from upright.deploy.cli_run_args import _add_run, require_module


def cmd_sim_robot(args) -> int:
    try:
        require_module("mujoco", "sim-robot (the robot simulated in MuJoCo)")
    except ValueError as err:
        print(f"upright-deploy sim-robot: {err}", file=sys.stderr)
        return 2
    if args.camera:  # MuJoCo reads MUJOCO_GL once, at import: pick an offscreen backend first
        from upright.gl import choose_offscreen_gl

        choose_offscreen_gl()
    from upright.deploy.camera import parse_size
    from upright.deploy.pty_device import Fault
    from upright.deploy.robot_config import load_robot_config
    from upright.deploy.sim_robot import run_sim_robot

    try:
        size = parse_size(args.camera_size)
        faults = [Fault.parse(f) for f in args.fault or []]
        return run_sim_robot(
            load_robot_config(args.robot), args.link_dir, lockstep_dt=None if args.free_running else args.lockstep_dt,
            init_state=args.init_state, record=args.record, faults=faults, duration=args.duration,
            cameras=args.camera or (), camera_size=size, camera_fps=args.camera_fps, object_pose=args.object_pose,
            object_pose_hz=args.object_pose_hz,
        )  # fmt: skip
    except (ValueError, RuntimeError) as err:
        print(f"upright-deploy sim-robot: {err}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="upright-deploy", description=__doc__)
    sub = parser.add_subparsers(dest="sub", required=True)
    _add_run(sub)
    p = sub.add_parser(
        "sim-robot",
        help="a robot in MuJoCo behind pseudo-terminals (the daemon's test robot): the G1 "
        "in the standup scene, or the Panda in the lift scene (--robot franka_emika_panda)",
    )
    p.add_argument(
        "--robot",
        default="unitree_g1_29dof",
        help="built-in robot name or robot config JSON (its name "
        "picks the scene: unitree_g1_29dof, franka_emika_panda)",
    )
    p.add_argument("--link-dir", default=f"/tmp/upright-sim-{os.getuid()}", help="folder for one pty link per bus")
    p.add_argument(
        "--lockstep-dt",
        type=float,
        default=0.002,
        help="advance physics to tick·DT per IMU request; DT = 1/the daemon's --io-rate (default 0.002)",
    )
    p.add_argument("--free-running", action="store_true", help="physics follows the wall clock instead of lockstep")
    p.add_argument("--init-state", help=".npz with qpos (and qvel) of the initial state")
    p.add_argument(
        "--record",
        help=".npz for the physics trace (time, qpos, qvel, and head_height for the G1 or "
        "cube_height for the Panda), written at exit",
    )
    p.add_argument(
        "--fault",
        action="append",
        help="inject kind:joint:start[:end[:value]] (see pty_device.Fault); "
        "camera_stall:NAME:start[:end] freezes a camera",
    )
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument(
        "--object-pose",
        metavar="udp://HOST:PORT",
        help="send the scene's object pose (the lift cube's) there, as a tracker would (the daemon's --object-pose)",
    )
    p.add_argument("--object-pose-hz", type=float, default=50.0, help="rate of that stream, Hz (default 50)")
    p.add_argument(
        "--camera",
        action="append",
        metavar="NAME",
        help="render this scene camera (lift: front, wrist) "
        "from the robot's current state into LINK_DIR/camera_NAME.frames, for the daemon's "
        "--camera NAME=sim (repeatable; needs MUJOCO_GL=egl or osmesa, chosen when unset)",
    )
    p.add_argument(
        "--camera-size",
        default="64x64",
        metavar="HxW",
        help="rendered image size, px: the policy's (default 64x64, TinyVLA's)",
    )
    p.add_argument("--camera-fps", type=float, default=30.0, help="at most this many frames/s per camera (default 30)")
    p = sub.add_parser("ctl", help="send an operator command to a running daemon")
    p.add_argument("command", choices=[
        "start", "resume", "pause", "takeover", "release", "estop", "mark-success", "mark-failure", "status",
        "target", "quit",
    ])  # fmt: skip
    p.add_argument("args", nargs="*", help="for 'target': JOINT=RAD ...")
    p.add_argument("--socket", help="daemon socket (default as for run)")
    p.add_argument(
        "--daemon-user",
        action="append",
        help="also trust a daemon running as this user (repeatable; "
        "default: yourself, root, and the owner of a root-made socket folder such as /run/upright-deploy)",
    )
    p.add_argument("--timeout", type=float, default=5.0)
    p = sub.add_parser("recover", help="convert journals left by a crash into dataset episodes")
    p.add_argument("dataset")
    args = parser.parse_args(argv)
    if args.sub == "recover":
        from upright.deploy.recover import cmd_recover

        return cmd_recover(args)
    handler = {"run": cmd_run, "sim-robot": cmd_sim_robot, "ctl": cmd_ctl}[args.sub]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
