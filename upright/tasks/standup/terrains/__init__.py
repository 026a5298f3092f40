"""Terrains and start postures of the standup task (HoST: ground, platform, wall, slope; supine, prone).

* :mod:`.geometry`: the ``MjSpec`` terrain builders (a row of box sub-terrains in one world).
* :mod:`.settings`: HoST's per-terrain settings (:data:`TERRAINS`) and variant validation.
* :mod:`.starts`: where each env starts at a reset (random sub-terrain, pelvis pose).

Select with ``python train.py task=standup recipe=host terrain=platform posture=prone`` (HoST's recipe; the get-up
recipe is written for flat ground).
"""

from upright.tasks.standup.terrains.geometry import (
    TERRAIN_NAMES,
    SubTerrain,
    TerrainLayout,
    add_terrain,
    check_terrain,
    terrain_layout,
)
from upright.tasks.standup.terrains.settings import (
    POSTURE_NAMES,
    TERRAINS,
    TerrainSpec,
    apply_overrides,
    check_variant,
    standup_env_cfg,
    variant_overrides,
)
from upright.tasks.standup.terrains.starts import StartSampler

__all__ = [
    "POSTURE_NAMES",
    "TERRAINS",
    "TERRAIN_NAMES",
    "StartSampler",
    "SubTerrain",
    "TerrainLayout",
    "TerrainSpec",
    "add_terrain",
    "apply_overrides",
    "check_terrain",
    "check_variant",
    "standup_env_cfg",
    "terrain_layout",
    "variant_overrides",
]
