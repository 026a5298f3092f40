"""Posture/terrain variants a viewer can switch between (native: PageUp/PageDown; web: a dropdown).

A variant is a name plus ``env.*`` overrides applied on top of the task config; switching rebuilds the
env with them. The standup task's variants are its terrain x posture combinations
(:func:`upright.tasks.standup.terrains.check_variant`): ground/supine, ground/prone, platform/supine,
wall/supine (HoST's seated start), slope/supine and slope/prone. Each carries the terrain's HoST
settings (:meth:`~upright.tasks.standup.terrains.TerrainSpec.env_overrides`), as ``terrain=<name>``
on the command line does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from upright.tasks.standup.terrains import POSTURE_NAMES, TERRAINS, apply_overrides, variant_overrides


@dataclass(frozen=True)
class Variant:
    """One posture/terrain combination of a task."""

    name: str
    """Shown in the viewers and accepted by ``variant=``."""
    posture: str
    terrain: str
    env_overrides: dict[str, Any] = field(default_factory=dict)
    """``env.<key>`` values that select this variant (dotted keys for nested fields: ``curriculum.beta_min``)."""


def standup_variants() -> tuple[Variant, ...]:
    """Every terrain x posture of the standup task, ground/supine first."""
    return tuple(
        Variant(f"{terrain}/{posture}", posture, terrain, env_overrides=variant_overrides(terrain, posture))
        for terrain, spec in TERRAINS.items()
        for posture in POSTURE_NAMES
        if posture in spec.postures
    )


TASK_VARIANTS: dict[str, tuple[Variant, ...]] = {
    "standup": standup_variants(),
}
"""Variants per task, the first being the task's default."""


def task_variants(task_name: str) -> tuple[Variant, ...]:
    """The variants of ``task_name`` (one default variant for a task that lists none)."""
    return TASK_VARIANTS.get(task_name, (Variant("default", posture="default", terrain="default"),))


def find_variant(task_name: str, name: str | None, env_cfg=None) -> int:
    """Index of variant ``name``; None: the variant matching ``env_cfg``'s ``terrain`` and ``posture`` (so that
    ``play.py terrain=slope`` starts on the slope), else 0.

    Raises:
        ValueError: unknown name (the message lists the valid ones).
    """
    variants = task_variants(task_name)
    if name is None:
        terrain, posture = getattr(env_cfg, "terrain", None), getattr(env_cfg, "posture", None)
        match = [i for i, v in enumerate(variants) if (v.terrain, v.posture) == (terrain, posture)]
        return match[0] if match else 0
    for i, v in enumerate(variants):
        if v.name == name:
            return i
    raise ValueError(f"variant={name}: task '{task_name}' has variants {[v.name for v in variants]}")


def apply_variant(env_cfg, variant: Variant):
    """A copy of ``env_cfg`` (dataclass or DictConfig) with the variant's overrides."""
    if isinstance(env_cfg, DictConfig):
        out = env_cfg.copy()
        for key, value in variant.env_overrides.items():
            OmegaConf.update(out, key, value, merge=False)
        return out
    return apply_overrides(env_cfg, variant.env_overrides)
