"""``upright-deploy run``'s arguments: its flags, the timing presets (real robot, ``--sim``) and the ports."""

from __future__ import annotations

import os
import pathlib

from upright.deploy.safety import LIMIT_CLAMPS

REAL_TIMING = {
    "reply_timeout_ms": None,
    "max_sensor_age_ms": 50.0,
    "overruns": 5,
    "watchdog_s": 0.25,
    "max_chunk_age_s": None,
    "max_frame_age_s": 0.2,
}
"""The timing checks' defaults (the real robot's); reply_timeout_ms None: the robot config's (2 ms for the G1);
max_chunk_age_s None: twice a chunked policy's horizon, 2·H·control_dt; max_frame_age_s: a camera frame older than
0.2 s is not used (10 policy ticks at 50 Hz; a 30 fps camera delivers one every 33 ms)."""
SIM_TIMING = {
    "reply_timeout_ms": 20.0,
    "max_sensor_age_ms": 1000.0,
    "overruns": None,
    "watchdog_s": 5.0,
    "max_chunk_age_s": 5.0,
    "max_frame_age_s": 1.0,
}
"""``run --sim``: defaults for ``sim-robot`` in lockstep on a loaded machine. sim-robot answers ~30 frames per
I/O cycle from a second Python process over ptys (a 500 Hz exchange took p50 2.2 ms on a 2-core VM), so the
loop cannot keep 500 Hz there; lockstep physics makes that harmless, so the wall-clock checks are relaxed:
overruns are flagged in every frame but do not damp, and a chunk may be 5 s old (wall clock) when the slowed-down
ticks execute it. sim-robot's cameras render in software (~50 ms per 64 x 64 frame on that VM, more under load), so a
frame may be 1 s old. Every flag given explicitly still wins."""


_UNSET = object()
"""Default of the timing flags: filled from REAL_TIMING or SIM_TIMING (None is a value: 'none')."""


def require_module(module: str, what: str, extra: str = "train") -> None:
    """Check that ``module`` is installed before a mode that needs it (the robot computer's slim install has only
    numpy, onnxruntime, pyserial and pyarrow: README, docs/deploy.md "Installing on the robot computer").

    Raises:
        ValueError: ``<what> needs <module>: pip install 'upright[<extra>]'`` (one line).
    """
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ValueError(f"{what} needs {module}: pip install 'upright[{extra}]'")


def _none_or_float(text: str) -> float | None:
    return None if text.lower() in ("none", "off", "") else float(text)


def _none_or_int(text: str) -> int | None:
    return None if text.lower() in ("none", "off", "") else int(text)


def _ports(args, robot):
    ports = {}
    if args.port_dir:
        ports.update({b.name: str(pathlib.Path(args.port_dir) / b.name) for b in robot.buses})
    for item in args.port or []:
        name, _, path = item.partition("=")
        if not path:
            raise SystemExit(f"--port expects BUS=PATH, got '{item}'")
        ports[name] = path
    return robot.with_ports(ports) if ports else robot


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run a policy on the robot (or on sim-robot)")
    p.add_argument(
        "--policy",
        required=True,
        help="exported policy.onnx (metadata included), or a chunked (VLA) "
        "policy: a VLA .onnx, a TinyVLA folder or model.pt, or ws://HOST:PORT (an openpi-protocol server)",
    )
    p.add_argument(
        "--instruction",
        help="chunked policy: the instruction it is conditioned on (its batch's 'task'), "
        "e.g. --instruction 'lift the cube'",
    )
    p.add_argument(
        "--policy-contract",
        metavar="FILE",
        help="chunked policy: JSON with joint_names, kp, kd, "
        "default_joint_pos, action_mode, action_scale, control_dt (wins over the policy's own; required "
        "for ws://)",
    )
    p.add_argument(
        "--max-chunk-age-s",
        type=float,
        default=_UNSET,
        help="chunked policy: a chunk whose observation is "
        "older than this is not executed (default 2·H·control_dt; --sim: 5)",
    )
    p.add_argument(
        "--prefetch-below",
        type=int,
        metavar="K",
        help="chunked policy: request the next chunk when fewer "
        "than K actions remain (1..H, default H/2; H: keep inference running)",
    )
    p.add_argument(
        "--temporal-ensemble",
        type=float,
        metavar="M",
        help="chunked policy: ACT's temporal ensembling "
        "with coefficient M (default: the policy's setting, else queue mode)",
    )
    p.add_argument(
        "--max-stale-ticks",
        type=_none_or_int,
        default=25,
        help="POLICY ticks in a row without a fresh action (chunked policy) or without a fresh object pose (lift "
        "policy) -> damping, or 'none' (default 25: 0.5 s at 50 Hz)",
    )
    p.add_argument(
        "--camera",
        action="append",
        metavar="NAME=SOURCE",
        help="chunked policy: the source of camera "
        "NAME (every camera the policy reads needs one): 'sim' (sim-robot --camera NAME, in --port-dir), "
        "'sim:DIR', /dev/videoN or an index N (OpenCV), or a URL; repeatable",
    )
    p.add_argument(
        "--max-frame-age-s",
        type=float,
        default=_UNSET,
        help="chunked policy: a camera frame older than "
        "this is not used; no chunk is requested (CAMERA_STALE) (default 0.2; --sim: 1)",
    )
    p.add_argument(
        "--image-size",
        metavar="HxW",
        help="chunked policy: camera frame size, px (default: the policy's image_height x image_width)",
    )
    p.add_argument(
        "--object-pose",
        metavar="udp://HOST:PORT",
        help="lift policy: where the cube tracker sends the cube's pose (JSON datagrams, robot base frame; "
        "upright.deploy.object_pose), e.g. udp://127.0.0.1:5566 (sim-robot --object-pose sends the simulated cube's)",
    )
    p.add_argument(
        "--object-pose-from",
        metavar="IP",
        help="lift policy: the tracker's address; datagrams from any other host are dropped (required unless "
        "--object-pose binds a loopback address)",
    )
    p.add_argument(
        "--object-goal",
        metavar="X,Y,Z",
        help="lift policy: where the cube is to go, m, robot base frame (the policy's cube_to_target)",
    )
    p.add_argument(
        "--object-pose-max-age-ms",
        type=float,
        default=100.0,
        help="lift policy: an object pose older than this is stale: no policy call, OBJECT_STALE, targets held "
        "(default 100)",
    )
    p.add_argument("--robot", default="unitree_g1_29dof", help="built-in robot name or robot config JSON")
    p.add_argument("--port", action="append", metavar="BUS=PATH", help="serial port of a bus (repeatable)")
    p.add_argument("--port-dir", help="folder with one serial port (or link) per bus name, e.g. sim-robot's --link-dir")
    p.add_argument("--dataset", default="deploy_data", help="LeRobot v3 dataset folder for the episodes")
    p.add_argument("--no-log", action="store_true", help="do not record a dataset")
    p.add_argument(
        "--on-logger-failure",
        choices=("hold", "continue"),
        default="hold",
        help="when the logger fails "
        "(its process dies, its writes fail: a full disk, EIO; or it stalls): 'hold' ends the episode, "
        "ramps to HOLD and refuses 'resume' (default); 'continue' keeps the policy running, unrecorded. "
        "Either way one ERROR line, and 'ctl status' shows the logger's state",
    )
    p.add_argument("--task-description", help="task string of the recorded episodes (default: the policy's task)")
    p.add_argument(
        "--socket",
        help="operator socket path (default $UPRIGHT_DEPLOY_SOCKET, "
        "/run/upright-deploy/ctl.sock, $XDG_RUNTIME_DIR/upright-deploy.sock, or a private 0700 folder in "
        "/tmp)",
    )
    p.add_argument(
        "--ctl-group",
        help="group (name or gid) whose members may also operate the daemon (default: only this user and root)",
    )
    p.add_argument(
        "--sim",
        action="store_true",
        help="timing checks for sim-robot in lockstep on a loaded machine "
        "(reply timeout 20 ms, sensor age 1 s, overruns flagged but not damping, watchdog 5 s); "
        "refused unless every port is a pseudo-terminal",
    )
    p.add_argument("--no-keyboard", action="store_true", help="ignore the terminal's keys")
    p.add_argument("--io-rate", type=float, default=500.0, help="motor I/O rate, Hz")
    p.add_argument("--ramp-s", type=float, default=2.0, help="RAMP_TO_DEFAULT duration")
    p.add_argument("--policy-ramp-s", type=float, default=0.5, help="blend into POLICY from the measured pose")
    p.add_argument("--auto-start", action="store_true", help="leave ZERO_TORQUE without waiting for 'start'")
    p.add_argument("--auto-engage", type=float, metavar="S", help="enter POLICY after S seconds of HOLD")
    p.add_argument("--exit-after-damping", type=float, metavar="S", help="exit S seconds after entering DAMPING")
    p.add_argument("--duration", type=float, metavar="S", help="stop (with damping) after S seconds")
    p.add_argument("--rt-priority", type=int, help="SCHED_FIFO priority (needs CAP_SYS_NICE or an rtprio limit)")
    p.add_argument("--cpu", type=int, action="append", help="pin the control process to this CPU (repeatable)")
    p.add_argument("--mlock", action="store_true", help="lock memory (mlockall)")
    p.add_argument("--spin-us", type=float, default=500.0, help="spin this long before each deadline")
    p.add_argument(
        "--reply-timeout-ms",
        type=float,
        default=_UNSET,
        help="per-reply timeout (default: the robot config's; --sim: 20)",
    )
    p.add_argument("--max-target-delta", type=_none_or_float, default=0.5, help="rad per policy tick, or 'none'")
    p.add_argument("--no-torque-clamp", action="store_true", help="do not clamp the estimated torque")
    p.add_argument(
        "--limit-clamp",
        choices=LIMIT_CLAMPS,
        default="torque",
        help="targets outside a joint's range: up to torque limit / Kp beyond it, where the motor's whole torque "
        "already pushes at the stop (torque, default; the G1 envs train with unbounded targets), or none (range: "
        "weakens that push)",
    )
    p.add_argument("--tilt-limit", type=_none_or_float, default=1.0, help="rad, or 'none'")
    p.add_argument("--link-errors", type=int, default=5, help="N: consecutive bad replies of a motor -> damping")
    p.add_argument(
        "--overruns",
        type=_none_or_int,
        default=_UNSET,
        help="K: consecutive overrunning policy ticks -> damping (default 5; --sim: none)",
    )
    p.add_argument("--overrun-ms", type=float, default=2.0, help="a policy tick this late counts as an overrun")
    p.add_argument(
        "--max-sensor-age-ms",
        type=float,
        default=_UNSET,
        help="motor / IMU data older than this -> damping (default 50; --sim: 1000)",
    )
    p.add_argument(
        "--watchdog-s", type=_none_or_float, default=_UNSET, help="loop watchdog, or 'none' (default 0.25; --sim: 5)"
    )
    p.add_argument("--damping-kd", type=float, default=8.0, help="damping gain, N·m·s/rad")


def _timing(args) -> list[str]:
    """Fill the timing flags the user left unset from REAL_TIMING, or SIM_TIMING with ``--sim``.

    Raises:
        ValueError: ``--sim`` with a port that is not a pseudo-terminal.
    """
    preset = SIM_TIMING if args.sim else REAL_TIMING
    for key, value in preset.items():
        if getattr(args, key) is _UNSET:
            setattr(args, key, value)
    if not args.sim:
        return []
    return [
        f"--sim: reply timeout {args.reply_timeout_ms:g} ms, sensor age {args.max_sensor_age_ms:g} ms, "
        f"overrun fault {'off' if args.overruns is None else args.overruns}, watchdog {args.watchdog_s} s, "
        f"camera frame age {args.max_frame_age_s:g} s "
        "(deadline overruns are still flagged in safety_flags); sim-robot's --lockstep-dt must be "
        f"1/--io-rate = {1 / args.io_rate:g} s"
    ]


def _check_sim_ports(robot_cfg) -> None:
    for bus in robot_cfg.buses:
        real = os.path.realpath(bus.port) if bus.port else ""
        if not real.startswith("/dev/pts/"):
            raise ValueError(
                f"--sim relaxes the timing checks for sim-robot only, but port {bus.port or '<none>'} of "
                f"bus {bus.name} is not a pseudo-terminal ({real or 'unset'}); drop --sim on a real robot"
            )
