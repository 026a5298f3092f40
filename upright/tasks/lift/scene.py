"""Lift scene: Menagerie's ``mjx_single_cube.xml`` (Panda, floor, cube, target marker; Playground's ``PandaPickCube``
scene) plus the sensors and cameras the task reads, compiled to one ``MjModel`` for every backend.

Added to the file: one MuJoCo ``contact`` sensor per robot geom that can touch the floor (``hand_capsule``,
``left_finger_pad``, ``right_finger_pad``; Playground's ``no_floor_collision`` term checks exactly these three), one
per finger pad against the cube (the grasp test of the ``grasp`` and ``lifted`` reward terms; the pads are the only
finger geoms that collide in ``mjx_panda.xml``), a
``framequat`` sensor of the gripper site, and two cameras: ``front`` (fixed, facing the robot across the table) and
``wrist`` (on the hand, looking along the fingers). The file's physics options stay (``mjx_scene.xml``: dt 0.005 s,
``implicitfast``, 5 solver and 8 line-search iterations, Euler damping off), the settings Playground trains with.
"""

from __future__ import annotations

import mujoco

from upright.robots import panda

FLOOR_SENSOR_SUFFIX = "_floor"
"""Contact sensor name = robot geom name + this suffix."""
FLOOR_CONTACT_GEOMS: tuple[str, ...] = (panda.HAND_GEOM, *panda.FINGER_PAD_GEOMS)
"""Robot geoms whose contact with the floor is penalised (Playground ``pick.py``: hand capsule and both pads)."""
GRASP_SENSOR_SUFFIX = "_cube"
"""Pad-cube contact sensor name = finger pad geom name + this suffix."""
GRIPPER_QUAT_SENSOR = "gripper_quat"
"""``framequat`` sensor of the gripper site: (w, x, y, z), world frame."""
_FORCE = 1 << 1
"""``mjtConDataField`` bit of the contact force (contact frame: normal first)."""
_MAXFORCE = 2
"""Contact sensor reduction ``maxforce``."""
CAMERAS = ("front", "wrist")
"""Camera names of the scene."""
FRONT_CAMERA_POS = (1.45, 0.0, 0.55)
"""Front camera position, world frame, m: 0.75 m beyond the cube's nominal start (0.7, 0, 0.03), facing -x."""
FRONT_CAMERA_TARGET = (0.6, 0.0, 0.12)
"""Point the front camera looks at, m (the work area between the cube start and the target heights)."""


def _look_at_xyaxes(pos, target) -> list[float]:
    """MJCF ``xyaxes`` of a camera at ``pos`` looking at ``target`` with world z up (camera -z is the view axis)."""
    import numpy as np

    fwd = np.asarray(target, float) - np.asarray(pos, float)
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    return [*right.tolist(), *up.tolist()]


def lift_scene(timestep: float = 0.005) -> mujoco.MjModel:
    """Compile the lift scene.

    Args:
        timestep: physics step, s (Playground ``sim_dt`` 0.005).

    Raises:
        ModelNotFoundError: the Menagerie Panda cannot be found (set ``MENAGERIE_ROOT``).
        ValueError: ``timestep`` <= 0.
    """
    if timestep <= 0:
        raise ValueError(f"sim.timestep must be > 0 s, got {timestep}")
    spec = panda.panda_spec(panda.SCENE_FILE)
    for geom in FLOOR_CONTACT_GEOMS:
        s = spec.add_sensor(
            name=geom + FLOOR_SENSOR_SUFFIX,
            type=mujoco.mjtSensor.mjSENS_CONTACT,
            objtype=mujoco.mjtObj.mjOBJ_GEOM,
            objname=geom,
            reftype=mujoco.mjtObj.mjOBJ_GEOM,
            refname=panda.FLOOR_GEOM,
        )
        s.intprm = [_FORCE, _MAXFORCE, 1]
    for geom in panda.FINGER_PAD_GEOMS:
        s = spec.add_sensor(
            name=geom + GRASP_SENSOR_SUFFIX,
            type=mujoco.mjtSensor.mjSENS_CONTACT,
            objtype=mujoco.mjtObj.mjOBJ_GEOM,
            objname=geom,
            reftype=mujoco.mjtObj.mjOBJ_GEOM,
            refname=panda.CUBE_GEOM,
        )
        s.intprm = [_FORCE, _MAXFORCE, 1]
    q = spec.add_sensor(name=GRIPPER_QUAT_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEQUAT, objname=panda.GRIPPER_SITE)
    q.objtype = mujoco.mjtObj.mjOBJ_SITE
    spec.worldbody.add_camera(
        name="front", pos=list(FRONT_CAMERA_POS), xyaxes=_look_at_xyaxes(FRONT_CAMERA_POS, FRONT_CAMERA_TARGET), fovy=58
    )
    # on the side of the hand, looking along the fingers (view axis = hand +z), image up = hand +x
    spec.body("hand").add_camera(name="wrist", pos=[0.07, 0.0, 0.05], xyaxes=[0, 1, 0, 1, 0, 0], fovy=75)
    spec.option.timestep = timestep
    return spec.compile()


def floor_sensor_slices(model: mujoco.MjModel) -> list[int]:
    """``sensordata`` address of the normal force of each :data:`FLOOR_CONTACT_GEOMS` sensor (0 when not touching).

    Raises:
        ValueError: the model lacks a sensor (build it with :func:`lift_scene`).
    """
    out = []
    for geom in FLOOR_CONTACT_GEOMS:
        sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, geom + FLOOR_SENSOR_SUFFIX)
        if sid < 0:
            raise ValueError(f"Scene lacks contact sensor '{geom}{FLOOR_SENSOR_SUFFIX}'; build it with lift_scene()")
        out.append(int(model.sensor_adr[sid]))
    return out


def grasp_sensor_slices(model: mujoco.MjModel) -> list[int]:
    """``sensordata`` address of the normal force (N) between each finger pad (left, right) and the cube.

    Raises:
        ValueError: the model lacks a sensor (build it with :func:`lift_scene`).
    """
    out = []
    for geom in panda.FINGER_PAD_GEOMS:
        sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, geom + GRASP_SENSOR_SUFFIX)
        if sid < 0:
            raise ValueError(f"Scene lacks contact sensor '{geom}{GRASP_SENSOR_SUFFIX}'; build it with lift_scene()")
        out.append(int(model.sensor_adr[sid]))
    return out
