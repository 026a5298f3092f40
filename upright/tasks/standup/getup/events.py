"""Reset events of the get-up MDP: which start each resetting env gets, and the standing and dropped starts.

mujocolab/mjlab_playground ``g1-getup`` (``src/mjlab_playground/getup/mdp/events.py``, ``reset_fallen_or_standing``):
with probability 0.6 the robot is dropped from 0.8 m with a uniformly random orientation, its joints drawn about the
centres of their ranges and small random velocities; otherwise it stands in the default pose. upright adds a third
kind, the terrain's HoST posture start (supine or prone, the evaluation protocol's start), with the remaining
probability (0 in ``recipe=getup``).
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

STAND, FALL, POSTURE = 0, 1, 2
"""Start kinds returned by :func:`choose_start_kind`."""


def choose_start_kind(m: int, stand_fraction: float, fall_fraction: float, rng: torch.Generator) -> torch.Tensor:
    """(M,) int64 start kind per resetting env: :data:`STAND` with ``stand_fraction``, :data:`FALL` with
    ``fall_fraction``, else :data:`POSTURE`. Drawn on the CPU generator ``rng``."""
    u = torch.rand(m, generator=rng)
    kind = torch.full((m,), POSTURE, dtype=torch.long)
    kind[u < stand_fraction + fall_fraction] = FALL
    kind[u < stand_fraction] = STAND
    return kind


def random_quaternions(m: int, rng: torch.Generator) -> torch.Tensor:
    """(M, 4) float32 unit quaternions (w, x, y, z), uniform on SO(3) (a normalised 4-D Gaussian sample)."""
    q = torch.randn(m, 4, generator=rng)
    return q / q.norm(dim=1, keepdim=True).clamp(min=1e-9)


def fallen_joints(
    m: int, lower: torch.Tensor, upper: torch.Tensor, fraction: float, rng: torch.Generator
) -> torch.Tensor:
    """(M, J) joint angles drawn uniformly over the central ``fraction`` of each range [lower, upper] (J,), rad."""
    mid, half = 0.5 * (lower + upper), 0.5 * fraction * (upper - lower)
    u = torch.rand(m, lower.numel(), generator=rng).to(lower.device)
    return mid + (2.0 * u - 1.0) * half


def uniform_velocities(m: int, n: int, limit: float, rng: torch.Generator) -> torch.Tensor:
    """(M, n) float32 velocities from U(-limit, limit) (m/s for linear, rad/s for angular and joint components)."""
    return (2.0 * torch.rand(m, n, generator=rng) - 1.0) * float(limit)


def standing_heights(model: mujoco.MjModel, joint_qpos: dict[int, float], torso_body: int) -> tuple[float, float]:
    """Heights of the pelvis (free-joint origin) and of ``torso_body``'s origin above a flat floor at z = 0, m,
    when the robot stands upright in the pose ``joint_qpos`` (qpos address -> angle, rad) with its lowest collision
    geom touching the floor.

    Computed from the model: the pose is placed with the pelvis at 1 m and the smallest signed distance between the
    floor geom (``floor``) and any robot geom (``mj_geomDistance``) is subtracted.

    Raises:
        ValueError: the model has no geom named ``floor``.
    """
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    if floor < 0:
        raise ValueError("standing_heights needs the scene's geom 'floor'")
    data = mujoco.MjData(model)
    data.qpos[:] = model.qpos0
    data.qpos[0:3] = (0.0, 0.0, 1.0)
    data.qpos[3:7] = (1.0, 0.0, 0.0, 0.0)
    for adr, angle in joint_qpos.items():
        data.qpos[adr] = angle
    mujoco.mj_forward(model, data)
    robot = [
        g
        for g in range(model.ngeom)
        if model.geom_bodyid[g] != 0 and (model.geom_contype[g] or model.geom_conaffinity[g])
    ]
    fromto = np.zeros(6)
    gap = min(mujoco.mj_geomDistance(model, data, floor, g, 2.0, fromto) for g in robot)
    return 1.0 - gap, float(data.xpos[torso_body, 2]) - gap
