"""Unitree G1 (29 DoF, rev 1.0): model source, joint order, PD actuators, limits, pose, sensors.

The model comes from MuJoCo Menagerie (``unitree_g1/g1_mjlab.xml``, via :mod:`upright.robots.menagerie`,
which honours ``MENAGERIE_ROOT``). The file ships no actuators; :func:`g1_spec` adds MuJoCo
``position`` actuators with HoST's gains and the datasheet torque limits, the sites the standup task
reads, and the contact filtering shared by every backend.

**29 vs 23 DoF.** HoST (Huang et al., RSS 2025) trains a 23-DoF G1. Our robot has six more joints:
``waist_roll``, ``waist_pitch`` and, on each arm, ``wrist_pitch`` and ``wrist_yaw``. The 23-DoF G1 has
the waist roll/pitch locked and no wrist pitch/yaw, so upright emulates it: those six joints are
*held* by their PD actuators at the default pose (0 rad) and are neither observed nor commanded by
the policy. The policy therefore sees and commands exactly HoST's 23 joints (76-D observation per
step). ``tests/test_robot_g1.py`` checks that the held joints stay near 0 rad while the robot moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from upright.robots import g1_collision_pairs
from upright.robots.menagerie import model_path

MENAGERIE_NAME = "unitree_g1"
"""Menagerie robot folder."""

ENTRY_FILE = "g1_mjlab.xml"
"""MJCF entry point inside the Menagerie folder (29 DoF, capsule collision geometry)."""

JOINT_NAMES: tuple[str, ...] = (
    "left_hip_pitch_joint",
    "left_hip_roll_joint",
    "left_hip_yaw_joint",
    "left_knee_joint",
    "left_ankle_pitch_joint",
    "left_ankle_roll_joint",
    "right_hip_pitch_joint",
    "right_hip_roll_joint",
    "right_hip_yaw_joint",
    "right_knee_joint",
    "right_ankle_pitch_joint",
    "right_ankle_roll_joint",
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    "left_shoulder_pitch_joint",
    "left_shoulder_roll_joint",
    "left_shoulder_yaw_joint",
    "left_elbow_joint",
    "left_wrist_roll_joint",
    "left_wrist_pitch_joint",
    "left_wrist_yaw_joint",
    "right_shoulder_pitch_joint",
    "right_shoulder_roll_joint",
    "right_shoulder_yaw_joint",
    "right_elbow_joint",
    "right_wrist_roll_joint",
    "right_wrist_pitch_joint",
    "right_wrist_yaw_joint",
)
"""All 29 actuated joints, in MJCF tree order. Actuator i drives JOINT_NAMES[i]."""

HELD_JOINT_NAMES: tuple[str, ...] = (
    "waist_roll_joint",
    "waist_pitch_joint",
    "left_wrist_pitch_joint",
    "left_wrist_yaw_joint",
    "right_wrist_pitch_joint",
    "right_wrist_yaw_joint",
)
"""Joints absent from HoST's 23-DoF G1: held at the default pose by PD, not policy-controlled."""

POLICY_JOINT_NAMES: tuple[str, ...] = tuple(j for j in JOINT_NAMES if j not in HELD_JOINT_NAMES)
"""The 23 joints the policy observes and commands, in this fixed order (HoST's joint set)."""

# --- PD gains: HoST g1_config_ground.py `control.stiffness/damping`, paper Table VII. -------------
# Matched by substring, as HoST does. Units: Kp N·m/rad, Kd N·m·s/rad.
_GAINS_BY_KEY: tuple[tuple[str, float, float], ...] = (
    ("hip", 150.0, 4.0),
    ("knee", 200.0, 6.0),
    ("ankle", 40.0, 2.0),
    ("waist", 100.0, 4.0),
    ("shoulder", 100.0, 4.0),
    ("elbow", 100.0, 4.0),
    ("wrist", 100.0, 4.0),
)

# --- Torque and velocity limits: Unitree G1 29-DoF rev 1.0 URDF (`g1_29dof_rev_1_0.urdf`, unitree_ros),
# joint <limit effort velocity>, which follow the motor datasheets: 7520-14 88 N·m / 32 rad/s,
# 7520-22 139 N·m / 20 rad/s, 5020 25 N·m / 37 rad/s (x2 in the ankle and waist-roll/pitch linkages:
# 50 N·m), 4010 5 N·m / 22 rad/s. -----------------------------------------------------------------
_LIMITS_BY_KEY: tuple[tuple[str, float, float], ...] = (
    ("hip_pitch", 88.0, 32.0),
    ("hip_roll", 139.0, 20.0),
    ("hip_yaw", 88.0, 32.0),
    ("knee", 139.0, 20.0),
    ("ankle", 50.0, 37.0),
    ("waist_yaw", 88.0, 32.0),
    ("waist_roll", 50.0, 37.0),
    ("waist_pitch", 50.0, 37.0),
    ("shoulder", 25.0, 37.0),
    ("elbow", 25.0, 37.0),
    ("wrist_roll", 25.0, 37.0),
    ("wrist_pitch", 5.0, 22.0),
    ("wrist_yaw", 5.0, 22.0),
)

# --- Default pose: HoST g1_config_ground.py `init_state.default_joint_angles` (rad). -------------
_DEFAULT_POSE: dict[str, float] = {
    "left_hip_pitch_joint": -0.1,
    "right_hip_pitch_joint": -0.1,
    "left_knee_joint": 0.3,
    "right_knee_joint": 0.3,
    "left_ankle_pitch_joint": -0.2,
    "right_ankle_pitch_joint": -0.2,
    "left_elbow_joint": 0.8,
    "right_elbow_joint": 0.8,
}

# --- Motor armature: each joint's rotor inertia reflected through its gearbox, kg·m². ---------------
# Values and joint mapping from mjlab's G1 constants (public repository mujocolab/mjlab, file
# src/mjlab/asset_zoo/robots/unitree_g1/g1_constants.py, commit 0234b2e9628b; rotor inertias and gear
# ratios "from Unitree"). Each motor has a two-stage planetary gearbox: rotor inertias (I1, I2, I3) of
# motor rotor and the two stages, stage ratios (1, r2, r3); reflected inertia = I1·(r2·r3)² + I2·r3² + I3
# (mjlab src/mjlab/utils/actuator.py, ``reflected_inertia_from_two_stage_planetary``).
_MOTORS: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "5020": ((0.139e-4, 0.017e-4, 0.169e-4), (1.0, 1.0 + 46.0 / 18.0, 1.0 + 56.0 / 16.0)),
    "7520-14": ((0.489e-4, 0.098e-4, 0.533e-4), (1.0, 4.5, 1.0 + 48.0 / 22.0)),
    "7520-22": ((0.489e-4, 0.109e-4, 0.738e-4), (1.0, 4.5, 5.0)),
    "4010": ((0.068e-4, 0.0, 0.0), (1.0, 5.0, 5.0)),
}


def reflected_inertia(rotor_inertia: tuple[float, float, float], gears: tuple[float, float, float]) -> float:
    """Rotor inertia of a two-stage planetary gearmotor seen at its output, kg·m².

    Args:
        rotor_inertia: (motor rotor, stage 1, stage 2) inertias, kg·m².
        gears: (1, stage-1 ratio, stage-2 ratio).
    """
    i1, i2, i3 = rotor_inertia
    _, r2, r3 = gears
    return i1 * (r2 * r3) ** 2 + i2 * r3**2 + i3


ARMATURE_BY_MOTOR: dict[str, float] = {name: reflected_inertia(*motor) for name, motor in _MOTORS.items()}
"""Reflected rotor inertia per G1 motor type, kg·m² (5020 ≈ 0.00361, 7520-14 ≈ 0.01018, 7520-22 ≈ 0.02510,
4010 ≈ 0.00425), as mjlab's ``ARMATURE_5020`` etc."""

# Motor type of each joint (matched by substring, first hit), and how many motors drive it. The ankles
# and waist roll/pitch are each driven through a parallel linkage by two 5020s: mjlab models them as
# 2 x ARMATURE_5020 (and 2 x its torque, matching the 50 N·m limits above).
_MOTOR_BY_KEY: tuple[tuple[str, str, int], ...] = (
    ("hip_pitch", "7520-14", 1),
    ("hip_yaw", "7520-14", 1),
    ("waist_yaw", "7520-14", 1),
    ("hip_roll", "7520-22", 1),
    ("knee", "7520-22", 1),
    ("ankle", "5020", 2),
    ("waist_roll", "5020", 2),
    ("waist_pitch", "5020", 2),
    ("shoulder", "5020", 1),
    ("elbow", "5020", 1),
    ("wrist_roll", "5020", 1),
    ("wrist_pitch", "4010", 1),
    ("wrist_yaw", "4010", 1),
)


def motor_of(joint: str) -> tuple[str, int]:
    """(motor type, number of motors) driving ``joint``, e.g. ``("5020", 2)`` for an ankle joint.

    Raises:
        KeyError: a joint name that matches no entry.
    """
    for key, motor, count in _MOTOR_BY_KEY:
        if key in joint:
            return motor, count
    raise KeyError(f"No motor type for joint '{joint}' (keys {[k for k, _, _ in _MOTOR_BY_KEY]})")


def joint_armature(joint: str) -> float:
    """Armature of ``joint``, kg·m²: its motor's reflected rotor inertia times the number of motors driving it."""
    motor, count = motor_of(joint)
    return count * ARMATURE_BY_MOTOR[motor]


SOFT_LIMIT_FACTOR = 0.9
"""Soft joint position/velocity limits are 0.9 x the URDF limits (HoST ``soft_dof_pos_limit``)."""


def soft_position_limits(lower: np.ndarray, upper: np.ndarray, factor: float = SOFT_LIMIT_FACTOR):
    """Soft joint position limits as HoST computes them: each bound scaled by ``factor`` towards 0 rad.

    HoST (InternRobotics/HoST, ``legged_gym/envs/base/host_ground.py``, ``_init_buffers``) multiplies the URDF's
    lower and upper limits by ``soft_dof_pos_limit`` (0.9); it does not shrink the range about its centre as
    legged_gym's ``LeggedRobot`` does. The difference matters for a joint whose range ends near 0: the G1 knee's
    [-0.087, 2.88] rad gives [-0.079, 2.59] here (a straight knee is inside) but [0.061, 2.73] about the centre.

    Args:
        lower, upper: (J,) joint limits, rad (array-likes or tensors).
        factor: scale of each bound (HoST: 0.9).

    Returns:
        (soft lower, soft upper), the same type and shape as the inputs, rad.
    """
    return lower * factor, upper * factor


HEAD_OFFSET_IN_TORSO = (0.0, 0.0, 0.45)
"""Head keyframe: torso_link origin + 0.45 m along z (HoST URDF ``keyframe_head``)."""

# Ankle points for HoST's ankle-parallel reward: the ankle-roll origin plus four sole corners
# (HoST URDF ``auxiliary_*_ankle_roll_link``), in the ankle_roll_link frame, m.
ANKLE_POINTS_IN_FOOT: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, 0.0),
    (0.13, 0.025, -0.03),
    (0.13, -0.025, -0.03),
    (-0.05, 0.025, -0.03),
    (-0.05, -0.025, -0.03),
)


def _match(name: str, table: tuple[tuple[str, float, float], ...]) -> tuple[float, float]:
    for key, a, b in table:
        if key in name:
            return a, b
    raise KeyError(f"No entry for joint '{name}' in table keys {[k for k, _, _ in table]}")


@dataclass(frozen=True)
class RobotInfo:
    """Per-joint constants of a robot, in :data:`JOINT_NAMES` order (all 29 joints).

    Attributes are float64 numpy arrays of shape (29,) unless noted.
    """

    joint_names: tuple[str, ...]
    """All actuated joints, model order."""
    policy_joint_names: tuple[str, ...]
    """Policy-controlled subset, fixed order."""
    policy_joint_ids: np.ndarray
    """int64 (23,): index of each policy joint in ``joint_names``."""
    held_joint_ids: np.ndarray
    """int64 (6,): index of each held joint in ``joint_names``."""
    kp: np.ndarray
    """Position gains Kp, N·m/rad."""
    kd: np.ndarray
    """Damping gains Kd, N·m·s/rad."""
    torque_limit: np.ndarray
    """Symmetric torque limits, N·m."""
    velocity_limit: np.ndarray
    """Joint velocity limits, rad/s."""
    default_pose: np.ndarray
    """Default joint angles, rad."""
    armature: np.ndarray
    """Joint armature (reflected motor rotor inertia), kg·m²."""


def robot_info() -> RobotInfo:
    """Return the G1's per-joint constants (see :class:`RobotInfo`)."""
    gains = np.array([_match(j, _GAINS_BY_KEY) for j in JOINT_NAMES])
    limits = np.array([_match(j, _LIMITS_BY_KEY) for j in JOINT_NAMES])
    return RobotInfo(
        joint_names=JOINT_NAMES,
        policy_joint_names=POLICY_JOINT_NAMES,
        policy_joint_ids=np.array([JOINT_NAMES.index(j) for j in POLICY_JOINT_NAMES], dtype=np.int64),
        held_joint_ids=np.array([JOINT_NAMES.index(j) for j in HELD_JOINT_NAMES], dtype=np.int64),
        kp=gains[:, 0].copy(),
        kd=gains[:, 1].copy(),
        torque_limit=limits[:, 0].copy(),
        velocity_limit=limits[:, 1].copy(),
        default_pose=np.array([_DEFAULT_POSE.get(j, 0.0) for j in JOINT_NAMES]),
        armature=np.array([joint_armature(j) for j in JOINT_NAMES]),
    )


# --- Contact filtering --------------------------------------------------------------------------
# One contact set for every backend (native MuJoCo and MJX): every robot collision geom touches the
# floor/terrain (contype/conaffinity bits), and self-collisions are explicit <pair>s, a fixed list
# (MJX compiles one static contact set from it).
ROBOT_CONTYPE, ROBOT_CONAFFINITY = 2, 1
"""Robot collision geoms: collide with terrain (contype 1 / conaffinity 2), never with each other."""
TERRAIN_CONTYPE, TERRAIN_CONAFFINITY = 1, 2
"""Terrain geoms (floor, boxes, height fields)."""


def self_collision_pairs() -> list[tuple[str, str]]:
    """Explicit self-collision geom pairs: every pair of collision geoms that can touch.

    The list is :data:`upright.robots.g1_collision_pairs.PAIRS`: every pair of the model's collision
    geoms on different bodies, except parent-child body pairs, the model's own ``<exclude>`` body pairs
    (pelvis-hip_roll, elbow-wrist_pitch: overlapping at every joint angle) and the pairs that the joint
    limits keep more than 3 cm apart in a sampling check over 400,000 random joint configurations
    (:mod:`upright.robots.self_collision` generates it; the file's header gives the settings).

    Returns:
        List of (geom1, geom2) collision-geom names of the Menagerie G1, model order.
    """
    return list(g1_collision_pairs.PAIRS)


_LEFT_LEG = (
    "left_hip_collision",
    "left_thigh_collision",
    "left_shin_collision",
    "left_linkage_brace_collision",
    "left_foot4_collision",
)
_RIGHT_LEG = tuple(g.replace("left_", "right_") for g in _LEFT_LEG)
_ARMS = (
    "left_elbow_yaw_collision",
    "left_wrist_collision",
    "left_hand_collision",
    "right_elbow_yaw_collision",
    "right_wrist_collision",
    "right_hand_collision",
)
_TRUNK = ("torso_collision", "pelvis_collision")
_HANDS = ("left_hand_collision", "right_hand_collision")
_THIGHS = ("left_thigh_collision", "right_thigh_collision")


def legacy_self_collision_pairs() -> list[tuple[str, str]]:
    """The 41 pairs used before the sampled list: legs with legs, arms with torso, hands with thighs.

    Kept for comparisons only (benchmarks, and the test showing that with them a curled leg passes
    through the trunk): shins, knees and feet never touch the torso or pelvis, feet never touch the arms.
    """
    pairs = [(a, b) for a in _LEFT_LEG for b in _RIGHT_LEG]
    pairs += [(a, b) for a in _ARMS for b in _TRUNK]
    pairs += [(a, b) for a in _HANDS for b in _THIGHS]
    return pairs


def g1_spec() -> mujoco.MjSpec:
    """Build the G1 as an ``MjSpec``: Menagerie MJCF + actuators, sites, sensors, contact filter.

    Adds, in :data:`JOINT_NAMES` order, one ``position`` actuator per joint with Kp as ``kp``, Kd as
    ``kv`` and ``forcerange`` = ± torque limit; sets each joint's armature to its motor's reflected rotor
    inertia (:func:`joint_armature`); adds sites
    ``head`` (on torso_link), ``{left,right}_knee``, ``{left,right}_hip`` (hip-roll joint origin, the thigh's
    upper end), ``{left,right}_ankle``, five
    ``{side}_ankle_point{i}``; and framepos sensors ``head_pos``, ``left_foot_pos``, ``right_foot_pos``
    (world frame, m). The model's own IMU sensors (``imu_ang_vel`` gyro in rad/s, ``imu_upvector``)
    stay.

    Raises:
        ModelNotFoundError: the Menagerie model cannot be found (set ``MENAGERIE_ROOT``).
    """
    spec = mujoco.MjSpec.from_file(str(model_path(MENAGERIE_NAME, ENTRY_FILE)))
    info = robot_info()

    for joint in spec.joints:
        if joint.type != mujoco.mjtJoint.mjJNT_FREE:
            joint.armature = joint_armature(joint.name)

    for i, name in enumerate(JOINT_NAMES):
        act = spec.add_actuator(name=name.removesuffix("_joint"), target=name)
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        act.set_to_position(kp=float(info.kp[i]), kv=float(info.kd[i]))
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-float(info.torque_limit[i]), float(info.torque_limit[i])]
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE

    torso = spec.body("torso_link")
    torso.add_site(name="head", pos=list(HEAD_OFFSET_IN_TORSO), size=[0.02] * 3)
    for side in ("left", "right"):
        spec.body(f"{side}_knee_link").add_site(name=f"{side}_knee", size=[0.01] * 3)
        spec.body(f"{side}_hip_roll_link").add_site(name=f"{side}_hip", size=[0.01] * 3)
        foot = spec.body(f"{side}_ankle_roll_link")
        foot.add_site(name=f"{side}_ankle", size=[0.01] * 3)
        for k, p in enumerate(ANKLE_POINTS_IN_FOOT):
            foot.add_site(name=f"{side}_ankle_point{k}", pos=list(p), size=[0.005] * 3)

    for sensor_name, site in (("head_pos", "head"), ("left_foot_pos", "left_foot"), ("right_foot_pos", "right_foot")):
        s = spec.add_sensor(name=sensor_name, type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objname=site)
        s.objtype = mujoco.mjtObj.mjOBJ_SITE

    for geom in spec.geoms:
        if geom.contype or geom.conaffinity:
            geom.contype, geom.conaffinity = ROBOT_CONTYPE, ROBOT_CONAFFINITY
    for g1, g2 in self_collision_pairs():
        spec.add_pair(geomname1=g1, geomname2=g2)
    return spec
