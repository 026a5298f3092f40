"""``upright-deploy``: ``run`` the daemon, serve a ``sim-robot``, ``ctl`` a running daemon, ``recover`` a dataset."""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import sys

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
        help="chunked policy: POLICY ticks in a row without a fresh action -> damping, or 'none' (default 25)",
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


CAMERA_START_TIMEOUT_S = 15.0
"""How long ``run`` waits for each camera's first frame before refusing to start."""


def _open_cameras(args, given: dict[str, str], size: tuple[int, int] | None) -> dict:
    """The :class:`~upright.deploy.camera.CameraSource` of every ``--camera``, each with a first frame.

    Raises:
        CameraError: a source that cannot be opened or gives no frame within CAMERA_START_TIMEOUT_S (one line).
    """
    from upright.deploy.camera import open_camera

    cameras: dict = {}
    try:
        for name, source in given.items():
            cameras[name] = open_camera(name, source, size[0], size[1], args.port_dir)
        for cam in cameras.values():
            cam.wait_frame(CAMERA_START_TIMEOUT_S)
    except BaseException:
        _close_cameras(cameras)
        raise
    return cameras


def _close_cameras(cameras: dict) -> None:
    for cam in cameras.values():
        cam.close()


def _chunk_runner(args, spec, vla, cameras: dict | None = None):
    """The :class:`~upright.deploy.chunk_runner.ChunkRunner` of a chunked policy, after one synchronous inference at
    the default pose with the cameras' newest frames (a policy that cannot run is refused before anything moves).

    Raises:
        ValueError: a bad runner setting, or the policy failed on the default pose (one line).
    """
    import numpy as np

    from upright.deploy.chunk_runner import ChunkRunner

    coeff = args.temporal_ensemble
    if coeff is None:
        coeff = getattr(vla, "temporal_ensemble_coeff", None)
    runner = ChunkRunner(vla, args.instruction, control_dt=spec.control_dt, max_chunk_age_s=args.max_chunk_age_s,
                         prefetch_below=args.prefetch_below, temporal_ensemble_coeff=coeff, cameras=cameras,
                         max_frame_age_s=args.max_frame_age_s)  # fmt: skip
    state = np.concatenate([spec.default_joint_pos, np.zeros(spec.num_joints + 3), [0.0, 0.0, -1.0]]).astype(np.float32)
    try:
        runner.predict(state, {name: cam.read()[0] for name, cam in (cameras or {}).items()})
    except Exception as err:  # noqa: BLE001 - any failure of the policy refuses the start
        runner.close()
        raise ValueError(
            f"the chunked policy failed on the default pose: {type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}"
        ) from None
    return runner


def _onnx_policy(spec):
    """The :class:`~upright.policy_io.mlp.OnnxPolicy` of a checked MLP policy file (before any port opens).

    Raises:
        ValueError: onnxruntime failed on it (one line; :func:`~upright.policy_io.spec.dry_run` already ran it once).
    """
    from upright.policy_io.mlp import OnnxPolicy

    try:
        return OnnxPolicy(spec)
    except Exception as err:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise ValueError(
            f"{spec.path}: onnxruntime failed on the policy: {type(err).__name__}: {' '.join(str(err).split())[:240]}"
        ) from None


def cmd_run(args) -> int:
    """``upright-deploy run``: the daemon. Every refusal to start is one line on stderr and exit 2, before anything
    moves: first a damaged ``--dataset`` or one that is not a folder
    (:func:`~upright.deploy.dataset_check.check_dataset`, before the policy is loaded, any port opens or the logger
    starts; nothing of the dataset is changed), then the policy, the operator socket, the serial ports and the dataset's
    writer lock."""
    from dataclasses import replace

    from upright.deploy.camera import parse_camera_args, parse_size
    from upright.deploy.chunk_policy import check_camera_sources, is_chunk_policy_source, load_chunk_policy
    from upright.deploy.controller import Controller, ControllerConfig
    from upright.deploy.dataset_check import DatasetError, check_dataset
    from upright.deploy.metadata import check_plausible, load_policy_spec
    from upright.deploy.operator import SocketSecurityError, resolve_group
    from upright.deploy.robot_config import load_robot_config
    from upright.deploy.safety import SafetyConfig
    from upright.policy_io.schema import PolicyMetadataError

    logging.basicConfig(level=logging.INFO, format="upright-deploy: %(message)s", stream=sys.stderr, force=True)
    runner = None
    cameras: dict = {}
    size = None

    def release() -> None:  # what a refusal must free (nothing has moved yet)
        if runner is not None:
            runner.close()
        _close_cameras(cameras)

    try:
        notes = _timing(args)
        if not args.no_log:  # a damaged dataset (or a file) is refused before the policy, the ports and the logger
            check_dataset(args.dataset)
        given = parse_camera_args(args.camera)
        image_size = parse_size(args.image_size) if args.image_size else None
        robot_cfg = _ports(args, load_robot_config(args.robot))
        if args.sim:
            _check_sim_ports(robot_cfg)
        if args.reply_timeout_ms is not None:
            robot_cfg = replace(robot_cfg, reply_timeout_s=args.reply_timeout_ms / 1e3)
        if is_chunk_policy_source(str(args.policy)):
            if not args.instruction:
                raise ValueError(
                    f"{args.policy} is a chunked (VLA) policy: give the instruction it is conditioned on, "
                    "e.g. --instruction 'lift the cube'"
                )
            spec, vla = load_chunk_policy(str(args.policy), robot_cfg, args.policy_contract, task=args.instruction)
            try:
                check_plausible(spec, robot_cfg, args.io_rate)  # the contract's gains, action_scale and control_dt
                size = check_camera_sources(spec, given, image_size)
                cameras = _open_cameras(args, given, size) if size else {}
            except BaseException:
                if hasattr(vla, "close"):
                    vla.close()
                raise
            runner = policy = _chunk_runner(args, spec, vla, cameras)
        else:
            if args.instruction or args.policy_contract or given:
                raise ValueError(
                    f"--instruction, --policy-contract and --camera are for chunked (VLA) policies; "
                    f"{args.policy} is an MLP policy file (its metadata is its contract)"
                )
            # metadata, plausibility for this robot and --io-rate, and one inference of the graph (dry run)
            spec = load_policy_spec(args.policy, robot_cfg, io_rate_hz=args.io_rate)
            policy = _onnx_policy(spec)
        ctl_group = resolve_group(args.ctl_group)
    except (PolicyMetadataError, ValueError) as err:
        release()
        hint = "; nothing was changed (or use another --dataset, or --no-log)" if isinstance(err, DatasetError) else ""
        print(f"upright-deploy: refusing to start: {err}{hint}", file=sys.stderr)
        return 2
    from upright.deploy.lerobot_dataset import DatasetLockedError
    from upright.deploy.logger_process import LoggerClient, frame_features
    from upright.deploy.loop import run_loop, setup_realtime
    from upright.deploy.operator import Keyboard, OperatorServer, default_socket_path
    from upright.deploy.robot import SerialRobot

    safety = SafetyConfig(
        max_consecutive_link_errors=args.link_errors, max_motor_age_s=args.max_sensor_age_ms / 1e3,
        max_imu_age_s=args.max_sensor_age_ms / 1e3, max_target_delta=args.max_target_delta,
        clamp_torque=not args.no_torque_clamp, tilt_limit_rad=args.tilt_limit, max_consecutive_overruns=args.overruns,
        overrun_threshold_s=args.overrun_ms / 1e3, damping_kd=args.damping_kd, watchdog_s=args.watchdog_s,
        max_consecutive_stale=args.max_stale_ticks,
    )  # fmt: skip
    cfg = ControllerConfig(
        io_rate_hz=args.io_rate, ramp_s=args.ramp_s, policy_ramp_s=args.policy_ramp_s, auto_start=args.auto_start,
        auto_engage_s=args.auto_engage, exit_after_damping_s=args.exit_after_damping, safety=safety,
        on_logger_failure=args.on_logger_failure,
    )  # fmt: skip
    # A second daemon is refused by the operator socket, the serial ports (opened exclusively) or the dataset (its
    # writer lock, held by the running daemon's logger), in this order, and every one of these refusals comes before
    # anything of the dataset or its journals is written or a journal is read: the logger opens the dataset (and
    # converts the journals of a crash) only after the ports are ours and it holds the lock. Opening a port sends
    # nothing. (check_dataset, above, only read the committed files, which a writer replaces by atomic renames.)
    try:
        operator = OperatorServer(args.socket or default_socket_path(), group=ctl_group)
    except (SocketSecurityError, OSError) as err:
        release()
        print(f"upright-deploy: refusing to start: {err}", file=sys.stderr)
        return 2
    robot = SerialRobot(robot_cfg)
    try:
        robot.connect()
    except Exception as err:  # noqa: BLE001 - serial errors come in many types
        robot.close()
        operator.close()
        release()
        print(f"upright-deploy: cannot open the robot's serial ports: {err}", file=sys.stderr)
        return 2
    logger = None
    if not args.no_log:
        frame_names = [f"{n}.{i}" for n, d in zip(spec.observation_names, spec.observation_dims) for i in range(d)]
        images = dict.fromkeys(cameras, size) if cameras else None
        try:
            logger = LoggerClient(
                args.dataset,
                frame_features(spec.joint_names, frame_names, images),
                fps=int(round(1 / spec.control_dt)),
                robot_type=robot_cfg.name,
                task=args.task_description or spec.task,
                policy=str(args.policy),
            )
        except (RuntimeError, OSError) as err:  # DatasetLockedError (another writer) is a RuntimeError
            robot.close()
            operator.close()
            release()
            hint = "; one dataset has one writer: stop that daemon first, or use another --dataset"
            print(
                f"upright-deploy: refusing to start: {err}{hint if isinstance(err, DatasetLockedError) else ''}",
                file=sys.stderr,
            )
            return 2
    keyboard = None if args.no_keyboard else Keyboard()
    controller = Controller(
        spec, robot_cfg, policy, cfg, logger=logger, operator=operator, keyboard=keyboard, cameras=cameras
    )
    for note in notes + setup_realtime(args.rt_priority, set(args.cpu) if args.cpu else None, args.mlock):
        print(f"upright-deploy: {note}", file=sys.stderr)
    if runner is not None:
        print(
            f"upright-deploy: chunked policy: H = {runner.chunk_size} actions per chunk, action_mode "
            f"{spec.action_mode} (β {spec.action_scale:g}), prefetch below {runner.prefetch_below}, max chunk age "
            f"{runner.max_chunk_age_s:g} s, {'ACT ensembling' if runner.queue.ensembling else 'queue mode'}, "
            f"instruction {args.instruction!r}",
            file=sys.stderr,
        )
    if cameras:
        print(
            f"upright-deploy: cameras {' '.join(f'{n}={c.describe}' for n, c in cameras.items())}, "
            f"{size[0]}x{size[1]} px, max frame age {args.max_frame_age_s:g} s, "
            f"{'logged as observation.images.*' if logger is not None else 'not logged'}",
            file=sys.stderr,
        )
    print(
        f"upright-deploy: policy {args.policy} ({spec.task}, {spec.num_joints} joints, {1 / spec.control_dt:.0f} Hz), "
        f"robot {robot_cfg.name}, I/O {args.io_rate:.0f} Hz, socket {operator.path}, "
        f"dataset {'off' if logger is None else f'{args.dataset} (on logger failure: {args.on_logger_failure})'}",
        file=sys.stderr,
        flush=True,
    )
    max_cycles = int(args.duration * args.io_rate) if args.duration else None
    code = 1
    try:
        code = run_loop(controller, robot, spin_s=args.spin_us / 1e6, max_cycles=max_cycles)
    except KeyboardInterrupt:
        code = 130
    except Exception as err:  # noqa: BLE001 - reported, damping was sent by run_loop
        print(f"upright-deploy: stopped by {err!r}", file=sys.stderr)
        code = 1
    finally:
        controller.close()
        robot.close()
        _close_cameras(cameras)
    print(
        f"upright-deploy: exit ({controller.sm.mode.name}: {controller.sm.damping_reason})", file=sys.stderr, flush=True
    )
    return code


def cmd_sim_robot(args) -> int:
    if args.camera:  # MuJoCo reads MUJOCO_GL once, at import: pick an offscreen backend first
        from upright.viewer.gl import choose_offscreen_gl

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
            cameras=args.camera or (), camera_size=size, camera_fps=args.camera_fps,
        )  # fmt: skip
    except (ValueError, RuntimeError) as err:
        print(f"upright-deploy sim-robot: {err}", file=sys.stderr)
        return 2


class CtlUsageError(ValueError):
    """Bad ``ctl`` arguments (the message is the one line to print)."""


def ctl_request(command: str, items: list[str]) -> dict:
    """The request of ``ctl COMMAND ITEMS...``: ``target`` takes JOINT=RAD items, every other command none.

    Joint names and limits are checked by the daemon (it knows the policy), which answers with the valid ones.

    Raises:
        CtlUsageError: arguments given to a command that takes none, or a target item that is not JOINT=number.
    """
    if command != "target":
        if items:
            raise CtlUsageError(
                f"'{command}' takes no arguments (got {' '.join(items)}); only 'target' takes JOINT=RAD"
            )
        return {"cmd": command}
    if not items:
        raise CtlUsageError(
            "'target' needs JOINT=RAD pairs, e.g. ctl target left_knee_joint=0.5 "
            "(absolute joint angles in rad, HUMAN mode only)"
        )
    targets: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CtlUsageError(f"'{item}' is not JOINT=RAD, e.g. left_knee_joint=0.5")
        try:
            targets[name.strip()] = float(value)
        except ValueError:
            raise CtlUsageError(f"'{item}': RAD must be a number (radians), e.g. {name.strip()}=0.5") from None
    return {"cmd": "target", "targets": targets}


def cmd_ctl(args) -> int:
    from upright.deploy.operator import default_socket_path, resolve_user, send_command

    try:
        req = ctl_request(args.command, args.args)
        daemon_users = tuple(resolve_user(u) for u in args.daemon_user or ())
    except ValueError as err:
        print(f"upright-deploy ctl: {err}", file=sys.stderr)
        return 2
    try:
        reply = send_command(args.socket or default_socket_path(), req, timeout=args.timeout, daemon_users=daemon_users)
    except ConnectionError as err:
        print(f"upright-deploy ctl: {err}", file=sys.stderr)
        return 2
    print(json.dumps(reply))
    if not reply.get("ok"):
        print(f"upright-deploy ctl: {reply.get('error', 'refused')}", file=sys.stderr)
        return 1
    return 0


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
