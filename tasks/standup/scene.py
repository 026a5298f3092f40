"""Standup scene: flat ground + the G1, compiled to one ``MjModel`` used by every backend."""

from __future__ import annotations

import mujoco

from upright.robots import g1
from upright.sim.options import PhysicsOptions, apply_physics_options

FLOOR_FRICTION = (0.8, 0.005, 0.0001)
"""Floor sliding/torsional/rolling friction. Sliding 0.8: HoST ground plane ``static_friction``."""


def standup_scene(physics: PhysicsOptions | None = None) -> mujoco.MjModel:
    """Compile the ground standup scene (floor plane + G1) into an ``MjModel``.

    Args:
        physics: timestep, integrator and solver settings; defaults to :class:`PhysicsOptions`.

    Raises:
        ModelNotFoundError: the G1 model cannot be found (set ``MENAGERIE_ROOT``).
    """
    spec = g1.g1_spec()
    spec.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    spec.add_texture(name="grid", type=mujoco.mjtTexture.mjTEXTURE_2D, builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
                     rgb1=[0.2, 0.3, 0.4], rgb2=[0.1, 0.2, 0.3], width=300, height=300)
    spec.add_material(name="grid", textures=["", "grid"], texrepeat=[5, 5], reflectance=0.1)
    spec.worldbody.add_geom(
        name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], material="grid",
        friction=list(FLOOR_FRICTION), contype=g1.TERRAIN_CONTYPE, conaffinity=g1.TERRAIN_CONAFFINITY,
    )  # fmt: skip
    apply_physics_options(spec, physics or PhysicsOptions())
    return spec.compile()
