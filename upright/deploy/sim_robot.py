"""``upright-deploy sim-robot``: a robot in MuJoCo, answering the GO-M8010-6 and IMU frames over ptys.

The daemon drives it exactly as it drives the real robot, byte for byte, through
:class:`~upright.deploy.robot.SerialRobot`. Each motor command sets that joint's MuJoCo position
actuator to the commanded PD law (joint side: kp, kd, target; ``tau + kd·dq*`` as an applied
force), with the actuator's torque limit, so the physics is the training scene's (dt 0.005 s).
The scene follows the robot config's name (:data:`SCENES`):

- ``unitree_g1_29dof``: the G1 in :func:`upright.tasks.standup.scene.standup_scene`, lying on its back; the IMU is the
  pelvis IMU (orientation of the free joint, the scene's gyro and accelerometer); the trace records the head height.
- ``franka_emika_panda``: the Panda in :func:`upright.tasks.lift.scene.lift_scene` at keyframe ``home`` (arm at
  home, fingers open, cube on the floor); 7 arm joints and ``finger_joint1`` are the motors (the finger's actuator is
  the position servo of ``finger_joint1``; ``finger_joint2`` mirrors it by the model's joint equality); the IMU
  answers a fixed base (identity orientation, zero gyro, +9.81 m/s² up); the trace records the cube height.

Time. Lockstep (default, ``--lockstep-dt 0.002``, the period of the daemon's default 500 Hz I/O):
physics advances to ``tick · DT`` when an IMU request for I/O tick ``tick`` arrives, so a loaded
machine slows the simulated robot down instead of making it diverge. Physics steps land on multiples
of the timestep, so with a 500 Hz daemon (DT = 0.002) and a policy tick every 10th cycle, each policy
period holds exactly 4 physics steps, as in training. Free-running (``--free-running``): physics
follows the wall clock, as a real robot would; then the daemon must keep its 500 Hz, which answering
~30 frames per cycle from this second Python process over ptys does not allow on a small machine
(see ``upright-deploy run --sim``).

Cameras (``--camera NAME``): :mod:`upright.deploy.sim_camera` renders the scene's cameras from the current state in
a thread and publishes them next to the pty links, for the daemon's ``--camera NAME=sim``.

This module and :mod:`upright.deploy.sim_camera` are the only parts of ``upright.deploy`` that import MuJoCo and the
robot/scene modules; the daemon never imports them.
"""

from __future__ import annotations

import math
import pathlib
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import mujoco
import numpy as np

from upright.deploy.object_pose import encode_pose, parse_pose_url
from upright.deploy.protocol import go_m8010 as go
from upright.deploy.protocol import imu_frame
from upright.deploy.pty_device import Fault, PtyDeviceServer
from upright.deploy.robot_config import RobotConfig

SUPINE_QUAT = (math.sqrt(0.5), 0.0, -math.sqrt(0.5), 0.0)
"""Lying on the back (the standup task's reset orientation)."""

ImuReading = tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
"""(quat wxyz, gyro rad/s, acc m/s²) of the IMU."""


@dataclass
class SimScene:
    """What the simulated robot needs from a MuJoCo scene.

    Attributes:
        model: the compiled scene; every robot joint of the config must have a joint actuator in it.
        init_qpos: (nq,) the default initial state (``--init-state`` replaces it).
        imu: the IMU reading of the current ``MjData``.
        metrics: name -> scalar of the current ``MjData``, recorded in the trace after every physics step.
    """

    model: mujoco.MjModel
    init_qpos: np.ndarray
    imu: Callable[[mujoco.MjData], ImuReading]
    metrics: dict[str, Callable[[mujoco.MjData], float]] = field(default_factory=dict)


def g1_standup_scene(timestep: float = 0.005) -> SimScene:
    """The G1 in the standup scene, supine at 0.5 m with its default joint angles; the pelvis IMU; head height."""
    from upright.robots import g1
    from upright.sim.options import PhysicsOptions
    from upright.tasks.standup.scene import standup_scene

    m = standup_scene(PhysicsOptions(timestep=timestep))
    qpos = np.zeros(m.nq)
    qpos[2] = 0.5
    qpos[3:7] = SUPINE_QUAT
    info = g1.robot_info()
    for name, pos in zip(info.joint_names, info.default_pose):
        qpos[m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)]] = pos
    head = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "head")
    feet = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, f"{s}_foot") for s in ("left", "right")]
    sens = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SENSOR, i): i for i in range(m.nsensor)}
    gyro = slice(m.sensor_adr[sens["imu_ang_vel"]], m.sensor_adr[sens["imu_ang_vel"]] + 3)
    acc = slice(m.sensor_adr[sens["imu_lin_acc"]], m.sensor_adr[sens["imu_lin_acc"]] + 3)

    def imu(d: mujoco.MjData) -> ImuReading:
        return (
            tuple(float(v) for v in d.qpos[3:7]),
            tuple(float(v) for v in d.sensordata[gyro]),
            tuple(float(v) for v in d.sensordata[acc]),
        )

    def head_height(d: mujoco.MjData) -> float:
        """Head site height above the mean foot height, m (the standup task's measure)."""
        x = d.site_xpos
        return float(x[head, 2] - 0.5 * (x[feet[0], 2] + x[feet[1], 2]))

    return SimScene(m, qpos, imu, {"head_height": head_height})


FIXED_BASE_IMU: ImuReading = ((1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 9.81))
"""The IMU of a robot bolted to the world: identity orientation, zero gyro, the accelerometer reading +g up."""


def panda_lift_scene(timestep: float = 0.005) -> SimScene:
    """The Panda in the lift scene at keyframe ``home`` (cube on the floor); a fixed-base IMU; the cube's height."""
    from upright.robots import panda
    from upright.tasks.lift.scene import lift_scene

    m = lift_scene(timestep)
    cube_z = m.jnt_qposadr[m.body_jntadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, panda.CUBE_BODY)]] + 2

    def cube_height(d: mujoco.MjData) -> float:
        """Cube centre height above the floor, m."""
        return float(d.qpos[cube_z])

    return SimScene(
        m, np.array(m.keyframe("home").qpos, dtype=np.float64), lambda d: FIXED_BASE_IMU, {"cube_height": cube_height}
    )


SCENES: dict[str, Callable[[float], SimScene]] = {
    "unitree_g1_29dof": g1_standup_scene,
    "franka_emika_panda": panda_lift_scene,
}
"""The scene of each robot config name."""


def scene_for(config: RobotConfig, timestep: float = 0.005) -> SimScene:
    """The scene of ``config.name`` (:data:`SCENES`).

    Raises:
        ValueError: no scene for that robot (the message lists the known ones).
    """
    if config.name not in SCENES:
        raise ValueError(
            f"sim-robot has no scene for robot '{config.name}'; known: {sorted(SCENES)} (the robot "
            "config's 'name' picks the scene)"
        )
    return SCENES[config.name](timestep)


class MujocoRobotModel:
    """The device model of :class:`~upright.deploy.pty_device.PtyDeviceServer`, backed by MuJoCo.

    Args:
        config: the robot's buses and motors (joint names must exist in the scene).
        timestep: physics dt, s.
        lockstep_dt: None for free-running, else the daemon's I/O period (advance per IMU request).
        init_qpos: initial qpos (nq,); default the scene's (:class:`SimScene`).
        init_qvel: initial qvel (nv,); default zeros.
        record: keep (time, qpos, qvel, the scene's metrics) after every physics step (see :meth:`save`).
        temperature: reported motor temperature, °C.
        scene: the MuJoCo scene; default :func:`scene_for` ``config``.

    Raises:
        ValueError: no scene for the robot, or scene joints missing.
    """

    def __init__(
        self,
        config: RobotConfig,
        timestep: float = 0.005,
        lockstep_dt: float | None = None,
        init_qpos: np.ndarray | None = None,
        init_qvel: np.ndarray | None = None,
        record: bool = False,
        temperature: float = 35.0,
        scene: SimScene | None = None,
    ):
        self.pose_publisher: ObjectPosePublisher | None = None
        """Sends the scene's object pose (``--object-pose``), set by :func:`run_sim_robot`."""
        self.scene = scene = scene or scene_for(config, timestep)
        self.model = m = scene.model
        self.data = d = mujoco.MjData(m)
        self.config = config
        self.lockstep_dt = lockstep_dt
        self.temperature = temperature
        motors = config.motors
        jid = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, mo.joint) for mo in motors]
        if min(jid) < 0:
            missing = [mo.joint for mo, j in zip(motors, jid) if j < 0]
            raise ValueError(f"the simulated scene lacks joints {missing}")
        self.qadr = np.array([m.jnt_qposadr[j] for j in jid])
        self.vadr = np.array([m.jnt_dofadr[j] for j in jid])
        act_of_joint = {int(m.actuator_trnid[a, 0]): a for a in range(m.nu)}
        self.act = np.array([act_of_joint[j] for j in jid])
        self.index = {}  # (bus, motor id) -> motor index
        k = 0
        for bi, bus in enumerate(config.buses):
            for mo in bus.motors:
                self.index[(bi, mo.motor_id)] = k
                k += 1
        self.gear_dir = config.array("gear") * config.array("direction")
        self.offset = config.array("offset")
        self.gear2 = config.array("gear") ** 2
        self.ff = np.zeros(len(motors))
        # motors start unpowered: zero gains
        m.actuator_gainprm[:, 0] = 0.0
        m.actuator_biasprm[:, 1:3] = 0.0
        d.qpos[:] = scene.init_qpos if init_qpos is None else init_qpos
        d.qvel[:] = 0.0 if init_qvel is None else init_qvel
        mujoco.mj_forward(m, d)
        # cached views (attribute access on MjModel/MjData creates a new array each time)
        self._gainprm, self._biasprm = m.actuator_gainprm, m.actuator_biasprm
        self._ctrl, self._qpos, self._qvel, self._force = d.ctrl, d.qpos, d.qvel, d.actuator_force
        self._imu_seq = 0
        self._imu_time = -1
        self.io_tick = 0
        """The I/O tick of the daemon's latest IMU request."""
        self.lock = threading.Lock()
        """Held while physics steps: a reader in another thread (the cameras, :mod:`upright.deploy.sim_camera`)
        takes it to copy a consistent state."""
        self._t0 = time.monotonic()
        self.recording = record
        self.trace: list[tuple[float, np.ndarray, np.ndarray, tuple[float, ...]]] = []
        if record:
            self._record()

    # --------------------------------------------------------------- physics
    def _record(self) -> None:
        d = self.data
        self.trace.append((d.time, d.qpos.copy(), d.qvel.copy(), tuple(f(d) for f in self.scene.metrics.values())))

    def _step(self) -> None:
        with self.lock:
            self.data.qfrc_applied[self.vadr] = self.ff
            mujoco.mj_step(self.model, self.data)
            # mj_step leaves sensors and site positions at the pre-step state; recompute them for the new one
            # (as the training backend does), so the IMU and the recorded head height are current
            mujoco.mj_forward(self.model, self.data)
        if self.recording:
            self._record()

    def advance_to(self, t: float) -> None:
        """Step physics until the next step would pass ``t`` (steps land on multiples of the timestep)."""
        dt = self.model.opt.timestep
        while self.data.time + dt <= t + 1e-9:
            self._step()

    def idle(self) -> float | None:
        if self.lockstep_dt is not None:
            return None
        now = time.monotonic() - self._t0
        dt = self.model.opt.timestep
        if now - self.data.time > 0.1:  # fell far behind (suspended): skip rather than fast-forward
            self.data.time = now - dt
        self.advance_to(now)
        return max(0.0, self.data.time + dt - (time.monotonic() - self._t0))

    # --------------------------------------------------------------- devices
    def motor_reply(self, bus: int, cmd: go.GoCommand) -> go.GoReply | None:
        k = self.index.get((bus, cmd.motor_id))
        if k is None:
            return None
        a = int(self.act[k])
        gd, g2 = float(self.gear_dir[k]), float(self.gear2[k])
        gain, bias = self._gainprm, self._biasprm
        if cmd.mode == go.MotorMode.FOC:
            kp, kd = cmd.kp * g2, cmd.kd * g2
            gain[a, 0] = kp
            bias[a, 1] = -kp
            bias[a, 2] = -kd
            self._ctrl[a] = cmd.q / gd + self.offset[k]
            self.ff[k] = cmd.tau * gd + kd * cmd.dq / gd
        else:
            gain[a, 0] = 0.0
            bias[a, 1] = bias[a, 2] = 0.0
            self.ff[k] = 0.0
        q = self._qpos[self.qadr[k]]
        dq = self._qvel[self.vadr[k]]
        tau = self._force[a] + self.ff[k]
        return go.GoReply(
            motor_id=cmd.motor_id,
            mode=cmd.mode,
            tau=tau / gd,
            dq=dq * gd,
            q=(q - self.offset[k]) * gd,
            temperature=int(self.temperature),
            error=0,
            foot_force=0,
        )

    def imu_sample(self, tick: int) -> imu_frame.ImuSample:
        self.io_tick = tick
        if self.lockstep_dt is not None:
            self.advance_to(tick * self.lockstep_dt)
            t_us = int(round(tick * self.lockstep_dt * 1e6))
        else:
            t_us = int((time.monotonic() - self._t0) * 1e6)
        if self.pose_publisher is not None:
            self.pose_publisher.maybe_send(self.data, t_us * 1e-6, tick)
        if t_us != self._imu_time:
            self._imu_seq += 1
            self._imu_time = t_us
        quat, gyro, acc = self.scene.imu(self.data)
        return imu_frame.ImuSample(
            address=imu_frame.DEFAULT_ADDRESS,
            seq=self._imu_seq,
            t_us=t_us,
            quat=quat,
            gyro=gyro,
            acc=acc,
        )

    def save(self, path: str | pathlib.Path) -> None:
        """Write the recorded trace: ``time`` (T,), ``qpos`` (T, nq), ``qvel`` (T, nv) and one (T,) array per scene
        metric (``head_height`` for the G1, ``cube_height`` for the Panda)."""
        if not self.trace:
            return
        t, qpos, qvel, metrics = zip(*self.trace)
        values = np.array(metrics, dtype=np.float64).reshape(len(t), -1)
        named = {name: values[:, i] for i, name in enumerate(self.scene.metrics)}
        np.savez(path, time=np.array(t), qpos=np.array(qpos), qvel=np.array(qvel), **named)


class ObjectPosePublisher:
    """A simulated object tracker: sends the pose of the scene's free body (the lift scene's cube) as the datagrams of
    :mod:`upright.deploy.object_pose`, at most ``rate_hz`` per simulated second, stamped with increasing ``seq``.

    Args:
        model: the compiled scene (it must have exactly one free joint: the object).
        url: ``udp://HOST:PORT`` of the daemon's ``--object-pose``.
        rate_hz: the tracker's rate, Hz (a camera tracker: 30-60).
        faults: ``pose_stall`` faults silence it for their I/O ticks.

    Raises:
        ValueError: a bad URL, or no single free body in the scene.
    """

    def __init__(self, model: mujoco.MjModel, url: str, rate_hz: float = 50.0, faults=()):
        self.address = parse_pose_url(url)
        free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        if len(free) != 1:
            raise ValueError(f"--object-pose needs a scene with one free body (the object); this one has {len(free)}")
        self.qadr = int(model.jnt_qposadr[free[0]])
        self.period = 1.0 / float(rate_hz)
        self.faults = [f for f in faults if f.kind == "pose_stall"]
        self.next_t = 0.0
        self.seq = 0
        self.sent = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def maybe_send(self, data: mujoco.MjData, t: float, tick: int) -> None:
        """Send the object's pose if a tracker period has passed at simulated time ``t`` (s), unless stalled."""
        if t + 1e-9 < self.next_t:
            return
        self.next_t = t + self.period
        if any(f.active(tick, None) for f in self.faults):
            return
        self.seq += 1
        q = data.qpos[self.qadr : self.qadr + 7]
        self.sock.sendto(encode_pose(self.seq, q[:3], q[3:7]), self.address)
        self.sent += 1

    def close(self) -> None:
        self.sock.close()


def run_sim_robot(
    config: RobotConfig,
    link_dir: str,
    lockstep_dt: float | None = None,
    init_state: str | None = None,
    record: str | None = None,
    faults: list[Fault] | tuple[Fault, ...] = (),
    duration: float | None = None,
    cameras: list[str] | tuple[str, ...] = (),
    camera_size: tuple[int, int] = (64, 64),
    camera_fps: float = 30.0,
    object_pose: str | None = None,
    object_pose_hz: float = 50.0,
) -> int:
    """Serve the simulated robot until SIGINT/SIGTERM (or ``duration`` s); return an exit code.

    Args:
        config: buses and motors (the daemon must use the same layout).
        link_dir: where to create one symlink per bus to its pty.
        lockstep_dt: lockstep I/O period, or None for free-running.
        init_state: ``.npz`` with ``qpos`` (and optionally ``qvel``) for the initial state.
        record: ``.npz`` path for the physics trace, written at exit.
        faults: faults to inject (``camera_stall`` ones go to the cameras).
        duration: stop after this many seconds.
        cameras: scene cameras to render and publish in ``link_dir`` (:mod:`upright.deploy.sim_camera`; needs an
            offscreen OpenGL context, ``MUJOCO_GL``).
        camera_size: their (H, W), px: the policy's image size.
        camera_fps: at most this many frames per second.
        object_pose: ``udp://HOST:PORT``: send the scene's object pose there (:class:`ObjectPosePublisher`), as a
            tracker would to the daemon's ``--object-pose``.
        object_pose_hz: the rate of that stream, per simulated second.

    Raises:
        ValueError: an unknown camera or a bad camera size.
        RuntimeError: the cameras cannot be rendered (no OpenGL context).
    """
    qpos = qvel = None
    if init_state:
        with np.load(init_state) as z:
            qpos = z["qpos"]
            qvel = z["qvel"] if "qvel" in z.files else None
    model = MujocoRobotModel(config, lockstep_dt=lockstep_dt, init_qpos=qpos, init_qvel=qvel, record=bool(record))
    if object_pose:
        model.pose_publisher = ObjectPosePublisher(model.model, object_pose, object_pose_hz, faults)
        print(f"sim-robot object pose -> {object_pose} at {object_pose_hz:g} Hz", flush=True)
    publisher = None
    if cameras:  # before the pty links: a daemon that finds the links finds the camera files too
        from upright.deploy.sim_camera import SimCameraPublisher, describe

        publisher = SimCameraPublisher(model, cameras, *camera_size, link_dir, camera_fps, faults)
        print(f"sim-robot {describe(publisher)}", flush=True)
    try:
        server = PtyDeviceServer(
            [b.name for b in config.buses],
            [{m.motor_id: m.joint for m in b.motors} for b in config.buses],
            model,
            link_dir=link_dir,
            faults=faults,
        )
    except BaseException:
        if publisher is not None:
            publisher.close()
        raise
    stop = {"flag": False}

    def on_signal(signum, frame):
        stop["flag"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    t_end = None if duration is None else time.monotonic() + duration
    clock = f"lockstep {lockstep_dt:g} s per I/O tick" if lockstep_dt is not None else "free-running (wall clock)"
    print(f"sim-robot ready ({clock}): {' '.join(f'{k}={v}' for k, v in server.ports.items())}", flush=True)
    try:
        server.serve(lambda: stop["flag"] or (t_end is not None and time.monotonic() > t_end))
    finally:
        if publisher is not None:
            publisher.close()
        if model.pose_publisher is not None:
            model.pose_publisher.close()
        if record:
            model.save(record)
        server.close()
    print("sim-robot stopped", file=sys.stderr, flush=True)
    return 0
