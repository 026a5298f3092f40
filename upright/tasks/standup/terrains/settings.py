"""Per-terrain and per-posture settings of the standup task (HoST's terrain configs), and their validation.

HoST trains one policy per terrain, each with its own config (``g1_config_ground.py``,
``g1_config_platform.py``, ...; spec §1, §2, §4, §7). :data:`TERRAINS` holds what differs between
them, in one :class:`TerrainSpec` per terrain:

* env config values (:meth:`TerrainSpec.env_overrides`; ``terrain=<name>`` on the command line
  applies them): unactuated steps, start height, reset-pose scaling, β floor, passive-phase push;
* constants the env reads directly: reset-pose joint overrides, PD-gain overrides, where the
  robot starts on its sub-terrain, terminations and the evaluation success criterion.

Postures (``posture=supine|prone``): supine (HoST ``rot`` xyzw [0, -1, 0, 1]) and prone
([0, 1, 0, 1], HoST ``g1_ground_prone``). HoST trains prone on the ground only; upright also offers
it on the slope (face down, head uphill). Platform and wall exist for ``posture=supine`` only: the
platform start has the legs hanging over the edge, which a prone robot cannot do from 0.4 m behind
the edge (its feet would rest on the box, and HoST's platform termination, mean foot z > 0.35 m,
would end the episode at once); the wall start is HoST's seated one, leaning back onto the ramp.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from upright.tasks.standup.metrics import SUCCESS_CRITERIA, SuccessCriterion
from upright.tasks.standup.terminations import (
    GROUND_TERMINATION,
    PLATFORM_TERMINATION,
    SLOPE_TERMINATION,
    WALL_TERMINATION,
    TerrainTermination,
)
from upright.tasks.standup.terrains.geometry import TERRAIN_NAMES, check_terrain

POSTURE_NAMES: tuple[str, ...] = ("supine", "prone")
"""Start postures (``posture=<name>``)."""

_H = math.sqrt(0.5)
SUPINE_QUAT = (_H, 0.0, -_H, 0.0)
"""Supine pelvis orientation (w, x, y, z): -90 deg about y, face up, head toward -x (HoST rot xyzw [0, -1, 0, 1])."""
PRONE_QUAT = (_H, 0.0, _H, 0.0)
"""Prone pelvis orientation (w, x, y, z): +90 deg about y, face down, head toward +x (HoST rot xyzw [0, 1, 0, 1])."""
PRONE_FEET_FORWARD_QUAT = (0.0, -_H, 0.0, _H)
"""Prone, turned 180 deg about z: face down, head toward -x, feet toward +x (downhill on the slope), so that
a prone start lies like the supine one, head uphill."""
SEATED_QUAT = (1.0, 0.0, 0.0, 0.0)
"""Seated upright (wall): pelvis frame aligned with the world, facing +x, back toward the ramp."""


@dataclass(frozen=True)
class TerrainSpec:
    """HoST's settings of one terrain (spec section in brackets)."""

    name: str
    postures: tuple[str, ...]
    """Postures this terrain supports."""
    start_description: str
    """How the robot starts, in words (for messages)."""
    unactuated_steps: int
    """Passive env steps at the episode start [§1]: 30 (0.6 s); wall and slope 50 (1 s)."""
    init_height: float
    """Pelvis height at reset above the terrain surface below the start point, m [§4]."""
    init_joint_scale: tuple[float, float]
    """Reset joint angles = reset pose x U(scale) + offset [§4]: (0.9, 1.1) ground, (0.8, 1.2) others."""
    beta_min: float
    """Floor of the action bound β [§2]: 0.25; slope 0.3."""
    passive_push_force: float
    """Force along world x on the torso during the passive phase, N [§4]: HoST 2 x -50 N on wall and slope."""
    reset_joint_overrides: tuple[tuple[str, float], ...]
    """Reset-pose angles that differ from the G1 default pose, (joint name, rad) [§1]."""
    kp_overrides: tuple[tuple[str, float], ...]
    """PD stiffness by joint-name substring, (key, N·m/rad) [§1]: slope hip 100, knee 150."""
    start_run: tuple[float, float]
    """Pelvis start, m along -x from the sub-terrain anchor, drawn uniformly in this range [§4]:
    platform 0.4-0.5 m from the edge; slope 1.5-2.5 m up the ramp; wall -0.1 m (0.1 m in front of the
    foot: the spec says "at the foot"; this puts the back on the ramp after the passive phase on all 9 ramps)."""
    seated: bool
    """Start seated upright (:data:`SEATED_QUAT`) instead of lying (wall) [§4]."""
    prone_feet_forward: bool
    """Prone starts use :data:`PRONE_FEET_FORWARD_QUAT` (legs toward the edge/downhill) instead of HoST's
    ground :data:`PRONE_QUAT`."""
    termination: TerrainTermination
    """Terrain height terminations [§7]."""
    success: SuccessCriterion
    """Evaluation success criterion [§7]."""

    def start_quat(self, posture: str) -> tuple[float, float, float, float]:
        """Pelvis orientation (w, x, y, z) at reset for ``posture``."""
        if self.seated:
            return SEATED_QUAT
        if posture == "prone":
            return PRONE_FEET_FORWARD_QUAT if self.prone_feet_forward else PRONE_QUAT
        return SUPINE_QUAT

    def env_overrides(self) -> dict[str, Any]:
        """``env.*`` config values of this terrain, dotted keys (``curriculum.beta_min``)."""
        return {
            "terrain": self.name,
            "unactuated_steps": self.unactuated_steps,
            "init_height": self.init_height,
            "init_joint_scale": list(self.init_joint_scale),
            "passive_push_force": self.passive_push_force,
            "curriculum.beta_min": self.beta_min,
        }


TERRAINS: dict[str, TerrainSpec] = {
    "ground": TerrainSpec(
        "ground",
        postures=("supine", "prone"),
        start_description="lying on the ground",
        unactuated_steps=30,
        init_height=0.5,
        init_joint_scale=(0.9, 1.1),
        beta_min=0.25,
        passive_push_force=0.0,
        reset_joint_overrides=(),
        kp_overrides=(),
        start_run=(0.0, 0.0),
        seated=False,
        prone_feet_forward=False,
        termination=GROUND_TERMINATION,
        success=SUCCESS_CRITERIA["ground"],
    ),
    "platform": TerrainSpec(
        "platform",
        postures=("supine",),
        start_description="supine on the box 0.4-0.5 m from its edge, legs hanging over it",
        unactuated_steps=30,
        init_height=0.5,
        init_joint_scale=(0.8, 1.2),
        beta_min=0.25,
        passive_push_force=0.0,
        reset_joint_overrides=(("left_knee_joint", 1.0), ("right_knee_joint", 1.0)),
        kp_overrides=(),
        start_run=(0.4, 0.5),
        seated=False,
        prone_feet_forward=False,
        termination=PLATFORM_TERMINATION,
        success=SUCCESS_CRITERIA["platform"],
    ),
    "wall": TerrainSpec(
        "wall",
        postures=("supine",),
        start_description="seated at the ramp's foot, leaning back on it",
        unactuated_steps=50,
        init_height=0.45,
        init_joint_scale=(0.8, 1.2),
        beta_min=0.25,
        passive_push_force=-100.0,
        reset_joint_overrides=(
            ("left_hip_pitch_joint", -1.5),
            ("right_hip_pitch_joint", -1.5),
            ("left_knee_joint", 0.0),
            ("right_knee_joint", 0.0),
            ("left_elbow_joint", 0.0),
            ("right_elbow_joint", 0.0),
        ),
        kp_overrides=(),
        start_run=(-0.1, -0.1),
        seated=True,
        prone_feet_forward=False,
        termination=WALL_TERMINATION,
        success=SUCCESS_CRITERIA["wall"],
    ),
    "slope": TerrainSpec(
        "slope",
        postures=("supine", "prone"),
        start_description="lying on the ramp, head uphill",
        unactuated_steps=50,
        init_height=0.8,
        init_joint_scale=(0.8, 1.2),
        beta_min=0.3,
        passive_push_force=-100.0,
        reset_joint_overrides=(("left_knee_joint", 1.0), ("right_knee_joint", 1.0)),
        kp_overrides=(("hip", 100.0), ("knee", 150.0)),
        start_run=(1.5, 2.5),
        seated=False,
        prone_feet_forward=True,
        termination=SLOPE_TERMINATION,
        success=SUCCESS_CRITERIA["slope"],
    ),
}
"""HoST's settings per terrain (see :class:`TerrainSpec`)."""

assert tuple(TERRAINS) == TERRAIN_NAMES


def check_variant(terrain: str, posture: str) -> TerrainSpec:
    """The :class:`TerrainSpec` of ``terrain``, after checking that it supports ``posture``.

    Raises:
        ValueError: unknown terrain or posture, or a posture the terrain lacks; the message lists the valid ones.
    """
    check_terrain(terrain)
    if posture not in POSTURE_NAMES:
        raise ValueError(f"Unknown posture '{posture}'. Valid postures: {', '.join(POSTURE_NAMES)} (posture=<name>).")
    spec = TERRAINS[terrain]
    if posture not in spec.postures:
        raise ValueError(
            f"terrain={terrain} has no posture={posture}: the {terrain} start is HoST's, {spec.start_description}. "
            f"Valid postures for terrain={terrain}: {', '.join(spec.postures)}."
        )
    return spec


POSTURE_ENV_OVERRIDES: dict[str, dict[str, Any]] = {
    "supine": {},
    "prone": {
        "domain_rand.kp_factor": [0.85, 1.25],
        "domain_rand.kd_factor": [0.85, 1.25],
        "curriculum.gravity_gate": None,
    },
}
"""``env.*`` values of each posture, dotted keys (HoST ``g1_config_ground_prone.py``, spec §3 "Ground-prone config"):
prone randomises Kp/Kd by U(0.85, 1.25) and pulls without the orientation gate. Prone's reward changes and group
weights are in :mod:`upright.tasks.standup.rewards.variants`."""


def variant_overrides(terrain: str, posture: str = "supine") -> dict[str, Any]:
    """``env.*`` overrides (dotted keys) that select ``terrain`` x ``posture`` with HoST's terrain and posture
    settings (:meth:`TerrainSpec.env_overrides`, :data:`POSTURE_ENV_OVERRIDES`).

    Raises:
        ValueError: as :func:`check_variant`.
    """
    spec = check_variant(terrain, posture)
    return {**spec.env_overrides(), **POSTURE_ENV_OVERRIDES[posture], "posture": posture}


def apply_overrides(cfg, overrides: dict[str, Any]):
    """A copy of dataclass ``cfg`` with dotted-key ``overrides`` applied (``{"curriculum.beta_min": 0.3}``)."""
    nested: dict[str, dict[str, Any]] = {}
    flat: dict[str, Any] = {}
    for key, value in overrides.items():
        head, _, rest = key.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            flat[key] = tuple(value) if isinstance(value, list) else value
    for head, sub in nested.items():
        flat[head] = apply_overrides(getattr(cfg, head), sub)
    return dataclasses.replace(cfg, **flat)


def standup_env_cfg(terrain: str = "ground", posture: str = "supine", **overrides: Any):
    """A :class:`~upright.tasks.standup.config.StandupEnvCfg` for ``terrain`` x ``posture`` with HoST's
    terrain settings, then ``overrides`` (dotted keys allowed via ``**{"curriculum.enabled": False}``).

    Raises:
        ValueError: as :func:`check_variant`.
    """
    from upright.tasks.standup.config import StandupEnvCfg

    return apply_overrides(StandupEnvCfg(), {**variant_overrides(terrain, posture), **overrides})
