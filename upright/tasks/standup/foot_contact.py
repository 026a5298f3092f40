"""Net contact force on each foot, read from MuJoCo ``contact`` sensors (both backends).

HoST's feet-stumble term (spec §3(b), platform/slope/wall) compares the horizontal and vertical parts of the
net contact force on each foot (Isaac Gym ``contact_forces`` of the foot bodies, world frame). upright
adds one MuJoCo ``contact`` sensor per foot collision geom (:func:`add_foot_contact_sensors`) and sums
their readings into a world-frame force per foot (:class:`FootContactReader`), from ``sensordata``, which
every backend exposes (:class:`upright.sim.base.SimState`), so no backend code is involved.

Sensor layout, chosen for what MJX (mujoco-mjx 3.17, ``impl="jax"``) supports:

* MJX matches contact sensors by geom only (not body or subtree), hence one sensor per foot geom
  (the G1 foot has 7 capsules, ``{side}_foot{1..7}_collision``).
* MJX lacks the ``netforce`` reduction and reports forces in the contact frame, so each sensor returns
  :data:`SLOTS` contacts (reduction ``maxforce``: the strongest first) with ``force``, ``normal`` and
  ``tangent``; the world force of one contact is ``f_n·n + f_t1·t1 + f_t2·(n × t1)``. Unused slots read 0.
  Capsule-plane and capsule-box pairs give at most 2 contacts; 4 slots leave a margin.
* The sensors compute at the acceleration stage; both backends read them from the last physics
  substep's forward pass (the state 5 ms before the env step's end, like ``actuator_force``). After a
  reset they read 0 until the first step.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

FOOT_BODIES: tuple[str, str] = ("left_ankle_roll_link", "right_ankle_roll_link")
"""The G1 foot bodies (left, right) whose collision geoms get a contact sensor."""
SLOTS = 4
"""Contacts reported per foot geom (reduction ``maxforce``)."""
_FORCE, _NORMAL, _TANGENT = 1 << 1, 1 << 5, 1 << 6
"""``mjtConDataField`` bits of the ``contact`` sensor's data spec."""
_MAXFORCE = 2
"""Contact sensor reduction ``maxforce`` (MuJoCo ``reduce`` attribute; MJX implements it)."""
_SLOT_SIZE = 9
"""Floats per slot: force (3, contact frame), normal (3, world), tangent (3, world)."""
SENSOR_SUFFIX = "_contact"
"""Sensor name = foot geom name + this suffix."""


def foot_geom_names(spec: mujoco.MjSpec, body: str) -> list[str]:
    """Names of the collision geoms (``contype`` or ``conaffinity`` non-zero) of ``body``, in spec order.

    Raises:
        ValueError: ``body`` has no named collision geom.
    """
    names = [g.name for g in spec.body(body).geoms if (g.contype or g.conaffinity) and g.name]
    if not names:
        raise ValueError(f"Body '{body}' has no named collision geom for a foot contact sensor")
    return names


def add_foot_contact_sensors(spec: mujoco.MjSpec) -> None:
    """Add one ``contact`` sensor per collision geom of each :data:`FOOT_BODIES` body (name: geom + ``_contact``).

    Each reads :data:`SLOTS` contacts of that geom with any other geom (force, normal, tangent; ``maxforce``).
    """
    for body in FOOT_BODIES:
        for geom in foot_geom_names(spec, body):
            s = spec.add_sensor(
                name=geom + SENSOR_SUFFIX,
                type=mujoco.mjtSensor.mjSENS_CONTACT,
                objtype=mujoco.mjtObj.mjOBJ_GEOM,
                objname=geom,
            )
            s.intprm = [_FORCE | _NORMAL | _TANGENT, _MAXFORCE, SLOTS]


class FootContactReader:
    """Turns ``sensordata`` into the net contact force on each foot.

    Args:
        model: a compiled scene with :func:`add_foot_contact_sensors`'s sensors.

    Raises:
        ValueError: the model lacks the sensors (the message names the missing one).
    """

    def __init__(self, model: mujoco.MjModel):
        per_foot = []
        for body in FOOT_BODIES:
            bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
            if bid < 0:
                raise ValueError(f"Scene lacks foot body '{body}'")
            adrs = []
            for g in np.flatnonzero(model.geom_bodyid == bid):
                if not (model.geom_contype[g] or model.geom_conaffinity[g]):
                    continue
                name = model.geom(int(g)).name + SENSOR_SUFFIX
                sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
                if sid < 0:
                    raise ValueError(f"Scene lacks foot contact sensor '{name}' (see add_foot_contact_sensors)")
                if int(model.sensor_dim[sid]) != SLOTS * _SLOT_SIZE:
                    raise ValueError(f"Sensor '{name}' has dim {model.sensor_dim[sid]}, expected {SLOTS * _SLOT_SIZE}")
                adrs.append(int(model.sensor_adr[sid]) + np.arange(SLOTS * _SLOT_SIZE))
            per_foot.append(np.stack(adrs))
        if per_foot[0].shape != per_foot[1].shape:
            raise ValueError("Left and right feet have different numbers of collision geoms")
        self.index = torch.as_tensor(np.stack(per_foot), dtype=torch.long)
        """(2, G, SLOTS·9) sensordata addresses: foot, geom, slot data."""

    def __call__(self, sensordata: torch.Tensor) -> torch.Tensor:
        """Net contact force of the terrain (and any other geom) ON each foot.

        Args:
            sensordata: (N, nsensordata) float32 (:attr:`upright.sim.base.SimState.sensordata`).

        Returns:
            (N, 2, 3) float32, world frame, N; [:, 0] left, [:, 1] right. A foot standing on flat
            ground reads about (0, 0, +its weight share).
        """
        idx = self.index.to(sensordata.device)
        x = sensordata[:, idx].reshape(sensordata.shape[0], 2, -1, SLOTS, _SLOT_SIZE)
        f, n, t1 = x[..., 0:3], x[..., 3:6], x[..., 6:9]
        t2 = torch.linalg.cross(n, t1)
        world = f[..., 0:1] * n + f[..., 1:2] * t1 + f[..., 2:3] * t2  # (N, 2, G, SLOTS, 3)
        # The sensor reports the force that the sensor's geom (the foot) exerts on the other geom: negate.
        return -world.sum(dim=(2, 3))
