"""Standup scene: the ground plane, the terrain's sub-terrains and the G1, compiled to one ``MjModel``
used by every backend."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco

from upright.robots import g1
from upright.sim.options import PhysicsOptions, apply_physics_options
from upright.tasks.standup.foot_contact import add_foot_contact_sensors
from upright.tasks.standup.terrains.geometry import add_terrain

FLOOR_FRICTION = (0.8, 0.005, 0.0001)
"""Floor sliding/torsional/rolling friction. Sliding 0.8: HoST ground plane ``static_friction``."""


def set_position_gains(spec: mujoco.MjSpec, kp_by_key: Sequence[tuple[str, float]]) -> None:
    """Set the stiffness Kp (N·m/rad) of the G1's ``position`` actuators whose name contains a key (first match).

    Kd is unchanged. Used for HoST's slope gains (hip 100, knee 150; spec §1).
    """
    for act in spec.actuators:
        kp = next((value for key, value in kp_by_key if key in act.name), None)
        if kp is not None:
            act.gainprm[0] = kp
            act.biasprm[1] = -kp


def standup_scene(
    physics: PhysicsOptions | None = None, terrain: str = "ground", kp_overrides: Sequence[tuple[str, float]] = ()
) -> mujoco.MjModel:
    """Compile the standup scene (floor plane + ``terrain``'s sub-terrains + G1) into an ``MjModel``: the compiled
    :func:`standup_spec`. Arguments and errors as :func:`standup_spec`."""
    return standup_spec(physics, terrain, kp_overrides).compile()


def standup_spec(
    physics: PhysicsOptions | None = None, terrain: str = "ground", kp_overrides: Sequence[tuple[str, float]] = ()
) -> mujoco.MjSpec:
    """The standup scene (floor plane + ``terrain``'s sub-terrains + G1) as an ``MjSpec``, ready to compile.

    Adds the foot contact sensors (:func:`~upright.tasks.standup.foot_contact.add_foot_contact_sensors`) that
    the feet-stumble reward reads.

    Args:
        physics: timestep, integrator and solver settings; defaults to :class:`PhysicsOptions`.
        terrain: ground | platform | wall | slope (see :mod:`upright.tasks.standup.terrains.geometry`).
        kp_overrides: (joint-name substring, Kp N·m/rad) pairs applied to the actuators (:func:`set_position_gains`).

    Raises:
        ModelNotFoundError: the G1 model cannot be found (set ``MENAGERIE_ROOT``).
        ValueError: unknown terrain (the message lists the valid ones).
    """
    spec = g1.g1_spec()
    spec.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    spec.add_texture(
        name="grid",
        type=mujoco.mjtTexture.mjTEXTURE_2D,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        rgb1=[0.2, 0.3, 0.4],
        rgb2=[0.1, 0.2, 0.3],
        width=300,
        height=300,
    )
    spec.add_material(name="grid", textures=["", "grid"], texrepeat=[5, 5], reflectance=0.1)
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0, 0, 0.05],
        material="grid",
        friction=list(FLOOR_FRICTION),
        contype=g1.TERRAIN_CONTYPE,
        conaffinity=g1.TERRAIN_CONAFFINITY,
    )
    add_terrain(spec, terrain)
    add_foot_contact_sensors(spec)
    set_position_gains(spec, kp_overrides)
    apply_physics_options(spec, physics or PhysicsOptions())
    return spec
