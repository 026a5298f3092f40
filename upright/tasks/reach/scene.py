"""The reach scene: Menagerie's ``mjx_scene.xml`` (the Panda with primitive collision geoms, a floor plane and the
physics options MuJoCo Playground trains with), compiled to one ``MjModel`` for every backend."""

from __future__ import annotations

import mujoco

from upright.robots import panda

SCENE_FILE = "mjx_scene.xml"
"""The Panda and a floor, no objects (``franka_emika_panda/mjx_scene.xml``)."""


def reach_scene(timestep: float = 0.005) -> mujoco.MjModel:
    """Compile the reach scene.

    Raises:
        ModelNotFoundError: the Menagerie Panda cannot be found (set ``MENAGERIE_ROOT``).
        ValueError: ``timestep`` <= 0.
    """
    if timestep <= 0:
        raise ValueError(f"sim.timestep must be > 0 s, got {timestep}")
    model = panda.panda_spec(SCENE_FILE).compile()
    model.opt.timestep = timestep
    return model
