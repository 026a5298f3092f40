"""``upright-deploy run``: the daemon's start (policy, cameras, operator socket, ports, logger) and its loop."""

from __future__ import annotations

import logging
import sys

from upright.deploy.cli_run_args import _check_sim_ports, _ports, _timing, require_module

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


def _object_pose(args, spec):
    """(:class:`~upright.deploy.object_pose.ObjectPoseSource`, goal (3,) m) for a policy that reads tracked inputs,
    else (None, None).

    Raises:
        ValueError: ``--object-pose`` without a policy that reads the object, or without ``--object-goal`` (or the
            reverse); a bad URL or goal; a port that cannot be bound (one line each).
    """
    from upright.deploy.object_pose import ObjectPoseSource, goal_from_text
    from upright.policy_io.obs_terms import TRACKED_TERMS

    reads = [n for n in spec.observation_names if n in TRACKED_TERMS] if spec.task == "lift" else []
    if not reads:
        if args.object_pose or args.object_goal or args.object_pose_from:
            raise ValueError(
                f"--object-pose, --object-pose-from and --object-goal are for lift policies; {args.policy} reads no "
                "object"
            )
        return None, None
    if not args.object_goal:
        raise ValueError(f"{args.policy} reads {reads}: give --object-goal X,Y,Z (m, robot base frame)")
    goal = goal_from_text(args.object_goal)
    if not args.object_pose:
        raise ValueError(f"{args.policy} reads {reads}: give --object-pose udp://HOST:PORT (the cube tracker's stream)")
    return ObjectPoseSource(args.object_pose, args.object_pose_max_age_ms / 1e3, args.object_pose_from), goal


def cmd_run(args) -> int:
    """``upright-deploy run``: the daemon. Every refusal to start is one line on stderr and exit 2, before anything
    moves: first a damaged ``--dataset`` or one that is not a folder
    (:func:`~upright.dataset_io.check.check_dataset`, before the policy is loaded, any port opens or the logger
    starts; nothing of the dataset is changed), then the policy, the operator socket, the serial ports and the dataset's
    writer lock."""
    from dataclasses import replace

    from upright.dataset_io.check import DatasetError, check_dataset
    from upright.deploy.camera import parse_camera_args, parse_size
    from upright.deploy.chunk_policy import check_camera_sources, is_chunk_policy_source, load_chunk_policy
    from upright.deploy.controller import Controller, ControllerConfig
    from upright.deploy.metadata import check_plausible, load_policy_spec
    from upright.deploy.operator_socket import SocketSecurityError, resolve_group
    from upright.deploy.robot_config import load_robot_config
    from upright.deploy.safety import SafetyConfig
    from upright.policy_io.schema import PolicyMetadataError

    logging.basicConfig(level=logging.INFO, format="upright-deploy: %(message)s", stream=sys.stderr, force=True)
    runner = None
    cameras: dict = {}
    size = None
    object_pose = object_goal = None

    def release() -> None:  # what a refusal must free (nothing has moved yet)
        if runner is not None:
            runner.close()
        _close_cameras(cameras)
        if object_pose is not None:
            object_pose.close()

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
            require_module("torch", "a chunked (VLA) policy")  # the VLA runtime and ChunkRunner; an MLP file needs none
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
            spec = load_policy_spec(args.policy, robot_cfg, io_rate_hz=args.io_rate, object_pose=bool(args.object_pose))
            object_pose, object_goal = _object_pose(args, spec)
            policy = _onnx_policy(spec)
        ctl_group = resolve_group(args.ctl_group)
    except (PolicyMetadataError, ValueError) as err:
        release()
        hint = "; nothing was changed (or use another --dataset, or --no-log)" if isinstance(err, DatasetError) else ""
        print(f"upright-deploy: refusing to start: {err}{hint}", file=sys.stderr)
        return 2
    from upright.dataset_io.lock import DatasetLockedError
    from upright.dataset_io.records import frame_features
    from upright.deploy.logger_client import LoggerClient
    from upright.deploy.loop import run_loop, setup_realtime
    from upright.deploy.operator import Keyboard, OperatorServer
    from upright.deploy.operator_socket import default_socket_path
    from upright.deploy.robot import SerialRobot

    safety = SafetyConfig(
        max_consecutive_link_errors=args.link_errors, max_motor_age_s=args.max_sensor_age_ms / 1e3,
        max_imu_age_s=args.max_sensor_age_ms / 1e3, max_target_delta=args.max_target_delta,
        clamp_torque=not args.no_torque_clamp, limit_clamp=args.limit_clamp, tilt_limit_rad=args.tilt_limit,
        max_consecutive_overruns=args.overruns,
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
                frame_features(spec.joint_names, frame_names, images, spec.metadata.get("ee_action_names")),
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
        spec, robot_cfg, policy, cfg, logger=logger, operator=operator, keyboard=keyboard, cameras=cameras,
        object_pose=object_pose, object_goal=object_goal,
    )  # fmt: skip
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
    if object_pose is not None:
        print(
            f"upright-deploy: object pose {object_pose.url} (max age {object_pose.max_age_s * 1e3:g} ms), goal "
            f"{object_goal.tolist()} m",
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
        if object_pose is not None:
            object_pose.close()
    print(
        f"upright-deploy: exit ({controller.sm.mode.name}: {controller.sm.damping_reason})", file=sys.stderr, flush=True
    )
    return code
