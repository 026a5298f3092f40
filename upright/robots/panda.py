"""Franka Emika Panda with its parallel-jaw hand: model source, joint order, actuators, limits, home pose, sites.

The model comes from MuJoCo Menagerie, folder ``franka_emika_panda/`` (google-deepmind/mujoco_menagerie), through
:mod:`upright.robots.menagerie` (which honours ``MENAGERIE_ROOT``). Nothing of it is copied into upright.

**Which file, and why the primitive-collision variant.** Menagerie ships two Pandas:

* ``panda.xml`` (+ ``hand.xml``): every link collides through its mesh, and the two fingers are driven by one
  ``general`` actuator on a ``fixed`` tendon ``split`` (ctrl 0-255).
* ``mjx_panda.xml``: the same kinematics and inertias, tuned for MJX: the link meshes are kept for looks but do
  not collide (``contype = conaffinity = 0``); what collides is a capsule around the hand (``hand_capsule``) and a
  box pad on each fingertip (``left_finger_pad``, ``right_finger_pad``), and the finger actuator is a ``general``
  position servo on ``finger_joint1`` (ctrl 0-0.04 m) with ``finger_joint2`` coupled to it by a joint equality.

upright uses ``mjx_panda.xml`` on both backends (its scene ``mjx_single_cube.xml`` is MuJoCo Playground's
``PandaPickCube`` scene). MJX (``impl="jax"``) turns every collision mesh into a convex hull and runs
mesh-mesh narrowphase per pair, which for the 11 link meshes of ``panda.xml`` against each other and the cube makes
the compiled step far larger and slower; the primitive set (capsule, boxes, plane) has closed-form
collision functions in MJX. Using the same file on the native backend keeps one contact set, so the two
backends simulate the same thing (the parity test compares them). What this gives up: arm links other than the
hand pass through the cube and the table, which the lift task does not need (the arm works above the table).

Sources of every constant below: ``mjx_panda.xml`` and ``mjx_single_cube.xml`` in google-deepmind/mujoco_menagerie
(``franka_emika_panda/``), as noted per constant; ``tests/test_robot_panda.py`` checks each against the compiled
model, so a changed upstream file fails loudly instead of silently changing the task.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from upright.robots.menagerie import model_path

MENAGERIE_NAME = "franka_emika_panda"
"""Menagerie robot folder."""

ROBOT_FILE = "mjx_panda.xml"
"""Robot-only MJCF entry point (primitive collision geoms; see the module docstring)."""

SCENE_FILE = "mjx_single_cube.xml"
"""Scene entry point: ``mjx_scene.xml`` (the robot, a floor plane, the physics options) + the free cube ``box`` and
the mocap body ``mocap_target``, with the ``home`` keyframe (MuJoCo Playground's ``PandaPickCube`` scene)."""

ARM_JOINT_NAMES: tuple[str, ...] = tuple(f"joint{i}" for i in range(1, 8))
"""The 7 arm hinges, base to flange (``mjx_panda.xml`` ``joint1`` ... ``joint7``); qpos addresses 0-6."""

FINGER_JOINT_NAMES: tuple[str, str] = ("finger_joint1", "finger_joint2")
"""The two finger slides, m (0 closed, 0.04 open per finger; ``mjx_panda.xml``, class ``finger``). ``finger_joint2``
follows ``finger_joint1`` through the file's joint equality; only ``finger_joint1`` is actuated."""

JOINT_NAMES: tuple[str, ...] = ARM_JOINT_NAMES + FINGER_JOINT_NAMES
"""All 9 robot joints in model (qpos) order."""

ACTUATOR_NAMES: tuple[str, ...] = tuple(f"actuator{i}" for i in range(1, 9))
"""``actuator1``-``actuator7`` drive ``joint1``-``joint7`` (``position``: Kp, Kd below); ``actuator8`` drives
``finger_joint1`` (``general`` with affine bias: a position servo, ctrl in m of one finger's opening)."""

GRIPPER_ACTUATOR = "actuator8"
"""The finger actuator (``mjx_panda.xml``)."""

KP: tuple[float, ...] = (1000.0, 1000.0, 750.0, 750.0, 300.0, 300.0, 300.0, 350.0)
"""Position gains of :data:`ACTUATOR_NAMES`: arm N·m/rad (``kp`` of ``actuator1``-``7``), gripper N/m
(``gainprm`` 350 of ``actuator8``)."""

KD: tuple[float, ...] = (20.0, 20.0, 4.0, 4.0, 2.0, 2.0, 2.0, 10.0)
"""Damping gains of :data:`ACTUATOR_NAMES`: arm N·m·s/rad (``kv``), gripper N·s/m (``biasprm[2]`` = -10)."""

FORCE_LIMIT: tuple[float, ...] = (100.0, 100.0, 100.0, 100.0, 12.0, 12.0, 12.0, 200.0)
"""Actuator force limits: N·m for the arm, N for the finger (``forcerange`` in ``mjx_panda.xml``; the Franka
datasheet's joint torque limits are 87 N·m for joints 1-4 and 12 N·m for joints 5-7)."""

CTRL_RANGE: tuple[tuple[float, float], ...] = (
    (-2.8973, 2.8973),
    (-1.7628, 1.7628),
    (-2.8973, 2.8973),
    (-3.0718, -0.0698),
    (-2.8973, 2.8973),
    (-0.0175, 3.7525),
    (-2.8973, 2.8973),
    (0.0, 0.04),
)
"""Control (position-target) range of each actuator, rad (arm) or m (finger): ``ctrlrange`` in ``mjx_panda.xml``
(``actuator7`` inherits class ``panda``'s ±2.8973). Equal to the joint ranges, which are the Franka datasheet's
joint limits."""

VELOCITY_LIMIT: tuple[float, ...] = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61, 0.2)
"""Velocity limits of :data:`ACTUATOR_NAMES`' joints: rad/s for the arm (Franka Emika's "Robot and interface
specifications", also ``panda.urdf`` of franka_ros: 2.1750 for joints 1-4, 2.6100 for 5-7), m/s for a finger
(franka_ros' hand URDF: ``velocity="0.2"``). Not in the MJCF (MuJoCo has no joint velocity limit); the deploy
daemon's robot table stores them (``velocity_limit``), no check reads them."""

JOINT_RANGE: tuple[tuple[float, float], ...] = CTRL_RANGE + ((0.0, 0.04),)
"""Range of each of :data:`JOINT_NAMES`, rad or m (``range`` in ``mjx_panda.xml``; ``finger_joint2`` 0-0.04 m)."""

HOME_QPOS: tuple[float, ...] = (0.0, 0.3, 0.0, -1.57079, 0.0, 2.0, -0.7853, 0.04, 0.04)
"""Robot part of keyframe ``home`` (``mjx_single_cube.xml``): arm rad, fingers open 0.04 m. The hand points down
with the gripper site at about (0.68, 0, 0.38) m."""

HOME_CTRL: tuple[float, ...] = (0.0, 0.3, 0.0, -1.57079, 0.0, 2.0, -0.7853, 0.04)
"""``ctrl`` of keyframe ``home``: the position targets that hold :data:`HOME_QPOS`."""

CUBE_HOME_POS: tuple[float, float, float] = (0.7, 0.0, 0.03)
"""Cube centre in keyframe ``home``, world frame, m (resting on the floor: half height 0.03 m)."""

CUBE_HALF_SIZE: tuple[float, float, float] = (0.02, 0.02, 0.03)
"""Half sizes of the cube geom ``box``, m (``mjx_single_cube.xml``: a 4 x 4 x 6 cm block)."""

GRIPPER_SITE = "gripper"
"""Site between the fingertips, 0.1 m along the hand's z axis from the ``hand`` body (``mjx_panda.xml``)."""

FINGERTIP_SITES: tuple[str, str] = ("left_fingertip", "right_fingertip")
"""Sites upright adds at the centre of each fingertip pad (:data:`FINGERTIP_PAD_POS` in each finger's frame)."""

FINGERTIP_PAD_POS: tuple[float, float, float] = (0.0, 0.00758, 0.04525)
"""Centre of the collision pad ``fingertip_pad_collision_4`` in its finger's frame, m (``mjx_panda.xml``)."""

FINGER_PAD_GEOMS: tuple[str, str] = ("left_finger_pad", "right_finger_pad")
"""The fingertip collision boxes that touch the cube and the floor (``mjx_panda.xml``)."""

HAND_GEOM = "hand_capsule"
"""The capsule around the hand that touches the floor (``mjx_panda.xml``)."""

FLOOR_GEOM = "floor"
"""The floor plane of ``mjx_scene.xml``; the cube rests on it (the task's table top, z = 0)."""

CUBE_BODY = "box"
"""The cube's body and geom name (``mjx_single_cube.xml``)."""

CUBE_GEOM = "box"
"""The cube's collision geom (``mjx_single_cube.xml``; same name as its body)."""

TARGET_BODY = "mocap_target"
"""The mocap body showing the lift target (``mjx_single_cube.xml``; visual only, no collision)."""


@dataclass(frozen=True)
class PandaInfo:
    """Per-actuator constants of the Panda, in :data:`ACTUATOR_NAMES` order: float64 numpy arrays of shape (8,)."""

    kp: np.ndarray
    """Kp: N·m/rad (arm), N/m (gripper)."""
    kd: np.ndarray
    """Kd: N·m·s/rad (arm), N·s/m (gripper)."""
    force_limit: np.ndarray
    """Symmetric force limits: N·m (arm), N (gripper)."""
    ctrl_lower: np.ndarray
    """Lower position target, rad / m."""
    ctrl_upper: np.ndarray
    """Upper position target, rad / m."""
    home_ctrl: np.ndarray
    """Home position targets, rad / m."""


def panda_info() -> PandaInfo:
    """The Panda's per-actuator constants (see :class:`PandaInfo`)."""
    rng = np.array(CTRL_RANGE, dtype=np.float64)
    return PandaInfo(
        kp=np.array(KP),
        kd=np.array(KD),
        force_limit=np.array(FORCE_LIMIT),
        ctrl_lower=rng[:, 0].copy(),
        ctrl_upper=rng[:, 1].copy(),
        home_ctrl=np.array(HOME_CTRL),
    )


def add_fingertip_sites(spec: mujoco.MjSpec) -> None:
    """Add :data:`FINGERTIP_SITES` to the ``left_finger`` / ``right_finger`` bodies at :data:`FINGERTIP_PAD_POS`."""
    for site, body in zip(FINGERTIP_SITES, ("left_finger", "right_finger")):
        spec.body(body).add_site(name=site, pos=list(FINGERTIP_PAD_POS), size=[0.005] * 3)


def panda_spec(entry_file: str = ROBOT_FILE) -> mujoco.MjSpec:
    """Load a Menagerie Panda MJCF as an ``MjSpec`` and add the fingertip sites.

    Args:
        entry_file: :data:`ROBOT_FILE` (robot only) or :data:`SCENE_FILE` (robot, floor, cube, target, keyframes).

    Raises:
        ModelNotFoundError: the Menagerie model cannot be found (set ``MENAGERIE_ROOT``).
    """
    spec = mujoco.MjSpec.from_file(str(model_path(MENAGERIE_NAME, entry_file)))
    add_fingertip_sites(spec)
    return spec
