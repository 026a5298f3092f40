"""What the daemon knows about the robot's hardware: motors, buses, joint limits.

The policy file says which joints a policy drives and how (:mod:`upright.deploy.metadata`); this
module says which motors exist, on which serial bus and id, with which gear, direction, zero offset
and limits. Deploy never imports the training-side robot model: the built-in tables below (the G1, and
the Panda of the lift task) are copies, and ``tests/deploy/test_robot_config.py`` checks them against
:mod:`upright.robots.g1` / :mod:`upright.robots.panda` and the compiled MuJoCo models. Another robot (or
another wiring) is a JSON file of the same shape (:func:`load_robot_config`, :func:`robot_config_to_json`;
``upright-deploy run --robot FILE``).
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import asdict, dataclass, field

import numpy as np

from upright.deploy.protocol.go_m8010 import GEAR_RATIO, K_SCALE


@dataclass(frozen=True)
class MotorConfig:
    """One actuator: a joint behind one GO-M8010-6 motor (joint = direction · rotor / gear + offset)."""

    joint: str
    """Joint name (matches the policy metadata)."""
    motor_id: int
    """Id on its bus, 0..14."""
    lower: float
    """Joint position lower limit, rad."""
    upper: float
    """Joint position upper limit, rad."""
    torque_limit: float
    """Joint-side torque limit, N·m."""
    velocity_limit: float
    """Joint velocity limit, rad/s."""
    gear: float = GEAR_RATIO
    """Rotor turns per joint turn."""
    direction: int = 1
    """+1 or -1: sign between the joint axis and the rotor axis."""
    offset: float = 0.0
    """Joint angle when the rotor encoder reads 0, rad (calibration)."""
    actuator: str = ""
    """The motor(s) behind the joint, e.g. ``"7520-22"`` or ``"5020 x2"`` (a linkage of two): names the datasheet
    :attr:`torque_limit` comes from (:data:`G1_MOTOR_DATASHEETS`), quoted by the policy file checks; ``""``: not
    named."""


@dataclass(frozen=True)
class BusConfig:
    """One RS-485 link (a USB-serial adapter) and the devices on it."""

    name: str
    """Short name (``bus0``); the simulated robot names its pty links after it."""
    port: str
    """Serial device, e.g. ``/dev/ttyUSB0``."""
    motors: tuple[MotorConfig, ...]
    baudrate: int = 4_000_000
    """GO-M8010-6 default: 4 Mbps 8N1."""
    has_imu: bool = False
    """The IMU (upright IMU frame) answers on this bus."""


@dataclass(frozen=True)
class RobotConfig:
    """All buses of one robot. Joint order everywhere in the daemon is :attr:`joint_names`."""

    name: str
    buses: tuple[BusConfig, ...]
    temperature_warn: float = 70.0
    """Motor temperature that raises the OVERTEMP_WARN flag, °C."""
    temperature_limit: float = 85.0
    """Motor temperature that sends the robot to damping, °C (the GO motor protects itself at 90 °C)."""
    reply_timeout_s: float = 0.002
    """How long to wait for one reply before counting a timeout."""
    extra: dict = field(default_factory=dict)

    @property
    def motors(self) -> tuple[MotorConfig, ...]:
        """All motors, bus by bus (the daemon's joint order)."""
        return tuple(m for b in self.buses for m in b.motors)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(m.joint for m in self.motors)

    def array(self, attr: str) -> np.ndarray:
        """Per-motor attribute as a float64 array in joint order."""
        return np.array([getattr(m, attr) for m in self.motors], dtype=np.float64)

    def with_ports(self, ports: dict[str, str]) -> RobotConfig:
        """A copy with the serial ports of the named buses replaced.

        Raises:
            ValueError: a name is not a bus of this robot.
        """
        names = {b.name for b in self.buses}
        unknown = set(ports) - names
        if unknown:
            raise ValueError(f"unknown bus name(s) {sorted(unknown)}; buses are {sorted(names)}")
        buses = tuple(BusConfig(**{**_bus_dict(b), "port": ports.get(b.name, b.port)}) for b in self.buses)
        return RobotConfig(**{**_robot_dict(self), "buses": buses})

    def validate(self) -> None:
        """Check ids, names and limits.

        Raises:
            ValueError: duplicate joint or id, id out of range, bad limits or gear.
        """
        joints = self.joint_names
        dup = sorted({j for j in joints if joints.count(j) > 1})
        if dup:
            raise ValueError(f"robot config '{self.name}': joints {dup} appear more than once")
        imus = [b.name for b in self.buses if b.has_imu]
        if len(imus) != 1:
            raise ValueError(f"robot config '{self.name}': exactly one bus must have the IMU, got {imus}")
        for bus in self.buses:
            ids = [m.motor_id for m in bus.motors]
            if len(set(ids)) != len(ids):
                raise ValueError(f"bus {bus.name}: duplicate motor ids {ids}")
            for m in bus.motors:
                if not 0 <= m.motor_id <= 14:
                    raise ValueError(f"{m.joint}: motor id {m.motor_id} not in 0..14 (15 is broadcast)")
                if not m.lower < m.upper:
                    raise ValueError(f"{m.joint}: lower limit {m.lower} >= upper {m.upper}")
                if m.gear <= 0 or m.direction not in (1, -1) or m.torque_limit <= 0:
                    raise ValueError(f"{m.joint}: bad gear/direction/torque_limit")


def _bus_dict(b: BusConfig) -> dict:
    return {"name": b.name, "port": b.port, "motors": b.motors, "baudrate": b.baudrate, "has_imu": b.has_imu}


def _robot_dict(r: RobotConfig) -> dict:
    return {
        "name": r.name,
        "buses": r.buses,
        "temperature_warn": r.temperature_warn,
        "temperature_limit": r.temperature_limit,
        "reply_timeout_s": r.reply_timeout_s,
        "extra": r.extra,
    }


G1_MOTOR_DATASHEETS: dict[str, tuple[float, float]] = {
    "7520-14": (88.0, 32.0),
    "7520-22": (139.0, 20.0),
    "5020": (25.0, 37.0),
    "4010": (5.0, 22.0),
}
"""Peak joint-side torque (N·m) and velocity limit (rad/s) of each Unitree G1 joint motor. Source: the Unitree G1
29-DoF rev 1.0 URDF (``g1_29dof_rev_1_0.urdf``, github.com/unitreerobotics/unitree_ros), joint ``<limit effort
velocity>``, which follow Unitree's motor datasheets (7520-14: 88 N·m, 32 rad/s; 7520-22: 139 N·m, 20 rad/s; 5020:
25 N·m, 37 rad/s; 4010: 5 N·m, 22 rad/s), as :mod:`upright.robots.g1` (``_LIMITS_BY_KEY``, ``_MOTOR_BY_KEY``). The
ankles and waist roll/pitch are driven through a parallel linkage by two 5020s ("5020 x2"): 50 N·m."""

# joint, lower, upper (rad; MJCF ranges of Menagerie's g1_mjlab.xml), motor(s) (G1_MOTOR_DATASHEETS: torque limit
# N·m x count, velocity limit rad/s), on five RS-485 buses: one per leg, the waist (with the IMU), one per arm. An
# exchange takes as many request/reply rounds as the busiest bus has devices (7 + 1).
_G1_BUSES: tuple[tuple[str, bool, tuple[tuple[str, float, float, str], ...]], ...] = (
    (
        "bus0",
        False,
        (
            ("left_hip_pitch_joint", -2.5307, 2.8798, "7520-14"),
            ("left_hip_roll_joint", -0.5236, 2.9671, "7520-22"),
            ("left_hip_yaw_joint", -2.7576, 2.7576, "7520-14"),
            ("left_knee_joint", -0.087267, 2.8798, "7520-22"),
            ("left_ankle_pitch_joint", -0.87267, 0.5236, "5020 x2"),
            ("left_ankle_roll_joint", -0.2618, 0.2618, "5020 x2"),
        ),
    ),
    (
        "bus1",
        False,
        (
            ("right_hip_pitch_joint", -2.5307, 2.8798, "7520-14"),
            ("right_hip_roll_joint", -2.9671, 0.5236, "7520-22"),
            ("right_hip_yaw_joint", -2.7576, 2.7576, "7520-14"),
            ("right_knee_joint", -0.087267, 2.8798, "7520-22"),
            ("right_ankle_pitch_joint", -0.87267, 0.5236, "5020 x2"),
            ("right_ankle_roll_joint", -0.2618, 0.2618, "5020 x2"),
        ),
    ),
    (
        "bus2",
        True,
        (
            ("waist_yaw_joint", -2.618, 2.618, "7520-14"),
            ("waist_roll_joint", -0.52, 0.52, "5020 x2"),
            ("waist_pitch_joint", -0.52, 0.52, "5020 x2"),
        ),
    ),
    (
        "bus3",
        False,
        (
            ("left_shoulder_pitch_joint", -3.0892, 2.6704, "5020"),
            ("left_shoulder_roll_joint", -1.5882, 2.2515, "5020"),
            ("left_shoulder_yaw_joint", -2.618, 2.618, "5020"),
            ("left_elbow_joint", -1.0472, 2.0944, "5020"),
            ("left_wrist_roll_joint", -1.97222, 1.97222, "5020"),
            ("left_wrist_pitch_joint", -1.61443, 1.61443, "4010"),
            ("left_wrist_yaw_joint", -1.61443, 1.61443, "4010"),
        ),
    ),
    (
        "bus4",
        False,
        (
            ("right_shoulder_pitch_joint", -3.0892, 2.6704, "5020"),
            ("right_shoulder_roll_joint", -2.2515, 1.5882, "5020"),
            ("right_shoulder_yaw_joint", -2.618, 2.618, "5020"),
            ("right_elbow_joint", -1.0472, 2.0944, "5020"),
            ("right_wrist_roll_joint", -1.97222, 1.97222, "5020"),
            ("right_wrist_pitch_joint", -1.61443, 1.61443, "4010"),
            ("right_wrist_yaw_joint", -1.61443, 1.61443, "4010"),
        ),
    ),
)


def _g1_limits(actuator: str) -> tuple[float, float]:
    """(torque limit, velocity limit) of a G1 joint driven by ``actuator`` ("5020" or "5020 x2")."""
    motor, _, count = actuator.partition(" x")
    torque, velocity = G1_MOTOR_DATASHEETS[motor]
    return torque * int(count or 1), velocity


def g1_29dof(port_prefix: str = "/dev/ttyUSB") -> RobotConfig:
    """The Unitree G1 (29 DoF) on five buses (``{port_prefix}0`` .. ``4``), IMU on bus2 (waist)."""
    buses = []
    for i, (name, has_imu, joints) in enumerate(_G1_BUSES):
        motors = tuple(
            MotorConfig(
                joint=j,
                motor_id=k,
                lower=lo,
                upper=hi,
                torque_limit=_g1_limits(a)[0],
                velocity_limit=_g1_limits(a)[1],
                actuator=a,
            )
            for k, (j, lo, hi, a) in enumerate(joints)
        )
        buses.append(BusConfig(name=name, port=f"{port_prefix}{i}", motors=motors, has_imu=has_imu))
    cfg = RobotConfig(name="unitree_g1_29dof", buses=tuple(buses))
    cfg.validate()
    return cfg


# joint, lower, upper (rad, m for the finger; ctrlrange = joint range in Menagerie's franka_emika_panda/mjx_panda.xml),
# force limit (N·m, N: forcerange there), velocity limit (rad/s, m/s: upright.robots.panda.VELOCITY_LIMIT, from
# Franka's datasheet / franka_ros). The finger is finger_joint1, the one actuated slide of mjx_panda.xml (position
# servo actuator8, m of one finger's opening); finger_joint2 mirrors it through the file's joint equality, so one
# "motor" drives the gripper, as in the lift task's actions.
_PANDA_JOINTS: tuple[tuple[str, float, float, float, float], ...] = (
    ("joint1", -2.8973, 2.8973, 100.0, 2.175),
    ("joint2", -1.7628, 1.7628, 100.0, 2.175),
    ("joint3", -2.8973, 2.8973, 100.0, 2.175),
    ("joint4", -3.0718, -0.0698, 100.0, 2.175),
    ("joint5", -2.8973, 2.8973, 12.0, 2.61),
    ("joint6", -0.0175, 3.7525, 12.0, 2.61),
    ("joint7", -2.8973, 2.8973, 12.0, 2.61),
    ("finger_joint1", 0.0, 0.04, 200.0, 0.2),
)


def franka_emika_panda(port_prefix: str = "/dev/ttyUSB") -> RobotConfig:
    """The Franka Panda of the lift task as the daemon drives it in simulation (``upright-deploy sim-robot --robot
    franka_emika_panda``): the 7 arm joints and the finger as GO-M8010-6-framed motors (ids 0-7, default gear) on
    one bus ``bus0`` (``{port_prefix}0``) that also answers the IMU (a fixed base: identity orientation, zero gyro).

    A real Panda is driven through libfranka (FCI), not this protocol: this table serves the simulated arm behind the
    same pty/serial machinery as the G1, so the daemon's chunked-policy path is tested on the lift task's robot.
    The joint-side Kp of the lift task (up to 1000 N·m/rad) fits the frame's rotor-side 0-25.6 range at gear 6.33.
    """
    motors = tuple(
        MotorConfig(
            joint=j,
            motor_id=k,
            lower=lo,
            upper=hi,
            torque_limit=tl,
            velocity_limit=vl,
            actuator="Panda hand" if j.startswith("finger") else f"Panda {'A1-A4' if k < 4 else 'A5-A7'}",
        )
        for k, (j, lo, hi, tl, vl) in enumerate(_PANDA_JOINTS)
    )
    cfg = RobotConfig(
        name="franka_emika_panda", buses=(BusConfig(name="bus0", port=f"{port_prefix}0", motors=motors, has_imu=True),)
    )
    cfg.validate()
    return cfg


# ------------------------------------------------------------------ what a policy file may ask of the motors
FRAME_K_MAX = 32767 / K_SCALE
"""Largest kp (and kd) a GO-M8010-6 command frame encodes, rotor side (25.6; :mod:`upright.deploy.protocol.go_m8010`).
Joint side that is ``FRAME_K_MAX · gear²`` (1025.8 N·m/rad at gear 6.33); a larger gain is silently saturated by the
encoder, so the motor would not run the gain the policy was trained with."""

KP_SATURATION_ERROR_RAD = 0.01
"""A policy's Kp is implausible for a joint when its PD would saturate the joint's motor at a position error below
0.01 rad (0.57°), i.e. when a 0.1 rad error would command more than 10 x the motor's torque limit:
``Kp > torque_limit / 0.01 rad``. That is the order of a gearbox's backlash; a PD saturating within it is a bang-bang
controller that no policy here was trained with. The stiffest gains trained here saturate at 0.05 rad (HoST's held
wrists, 100 N·m/rad on a 5 N·m 4010) or later (the knee's 200 N·m/rad on 139 N·m: 0.7 rad), so the bound keeps a
margin of 5 over them; ``recipe=getup``'s reflected-inertia gains (3.6-25 N·m/rad) are 40 x below it."""

KD_SATURATION_SPEED_RAD_S = 0.1
"""Likewise for Kd: implausible when the damping term alone would saturate the motor at a joint speed below 0.1 rad/s
(6°/s, a creep no policy moves at), ``Kd > torque_limit / 0.1 rad/s``. HoST's damping saturates at 1.25 rad/s or
more (held wrists: 4 N·m·s/rad on 5 N·m), ``recipe=getup``'s (0.45-3.2 N·m·s/rad) at 15 rad/s or more."""

MAX_ACTION_SCALE = 2.0
"""Largest plausible ``action_scale`` β, rad per unit action (policies output O(1) actions): a unit action then moves
a PD target by 2 rad, over a third of the G1's widest joint range (hip pitch, 5.4 rad), which at 50 Hz is 100 rad/s,
3 x its fastest motor (7520-14, 32 rad/s). Trained scales: HoST 1.0, ``recipe=getup`` 0.6, the lift task 0.04."""

MAX_CONTROL_DT_S = 0.1
"""Longest plausible policy period, s (10 Hz): a falling humanoid's tilt doubles in about 0.2 s (an inverted pendulum
of the G1's ~0.7 m centre-of-mass height), so a policy acting less often cannot catch it. The shortest is one loop
period of the daemon (``upright-deploy run --io-rate``, 500 Hz: 2 ms), and ``control_dt`` must be a whole number
of loop periods (the policy runs every ``decimation``-th cycle)."""


@dataclass(frozen=True)
class JointEnvelope:
    """What a policy file may ask of one joint's motor (:func:`gain_envelope`)."""

    joint: str
    actuator: str
    """:attr:`MotorConfig.actuator` (``""``: not named)."""
    torque_limit: float
    """The motor's torque limit, N·m: a file's ``torque_limit`` of the joint must not exceed it."""
    kp_max: float
    """Largest plausible Kp, N·m/rad: ``min(torque_limit / KP_SATURATION_ERROR_RAD, FRAME_K_MAX · gear²)``."""
    kd_max: float
    """Largest plausible Kd, N·m·s/rad: ``min(torque_limit / KD_SATURATION_SPEED_RAD_S, FRAME_K_MAX · gear²)``."""
    frame_k_max: float
    """``FRAME_K_MAX · gear²``: the largest joint-side gain the motor's command frame encodes."""


def gain_envelope(robot: RobotConfig) -> tuple[JointEnvelope, ...]:
    """Each motor's plausible gains and torque limit (joint order of ``robot``), from its datasheet torque limit
    (:data:`G1_MOTOR_DATASHEETS` for the G1; a robot JSON's own ``torque_limit``) and its command frame."""
    out = []
    for m in robot.motors:
        frame = FRAME_K_MAX * m.gear**2
        out.append(
            JointEnvelope(
                joint=m.joint,
                actuator=m.actuator,
                torque_limit=m.torque_limit,
                frame_k_max=frame,
                kp_max=min(m.torque_limit / KP_SATURATION_ERROR_RAD, frame),
                kd_max=min(m.torque_limit / KD_SATURATION_SPEED_RAD_S, frame),
            )
        )
    return tuple(out)


ROBOTS = {"unitree_g1_29dof": g1_29dof, "franka_emika_panda": franka_emika_panda}
"""Built-in robot configs by name."""


def robot_config_to_json(cfg: RobotConfig) -> str:
    """Serialise ``cfg`` (the format :func:`load_robot_config` reads)."""
    return json.dumps(asdict(cfg), indent=2)


def load_robot_config(source: str | pathlib.Path) -> RobotConfig:
    """A built-in robot by name, or a JSON file written by :func:`robot_config_to_json`.

    Raises:
        ValueError: unknown name, or an invalid config (the message says what).
    """
    if str(source) in ROBOTS:
        return ROBOTS[str(source)]()
    path = pathlib.Path(source)
    if not path.is_file():
        raise ValueError(f"robot config '{source}' is neither a built-in robot {sorted(ROBOTS)} nor a file")
    raw = json.loads(path.read_text())
    buses = tuple(BusConfig(**{**b, "motors": tuple(MotorConfig(**m) for m in b["motors"])}) for b in raw.pop("buses"))
    cfg = RobotConfig(**raw, buses=buses)
    cfg.validate()
    return cfg
