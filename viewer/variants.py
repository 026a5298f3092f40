"""Posture/terrain variants a viewer can switch between (native: PageUp/PageDown; web: a dropdown).

A variant is a name plus ``env.*`` overrides applied on top of the task config; switching rebuilds the
env with them. The standup task has one variant today (ground terrain, supine start); the prone
posture and the slope/wall/platform terrains add entries here when their tasks exist.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf


@dataclass(frozen=True)
class Variant:
    """One posture/terrain combination of a task."""

    name: str
    """Shown in the viewers and accepted by ``variant=``."""
    posture: str
    terrain: str
    env_overrides: dict[str, Any] = field(default_factory=dict)
    """``env.<key>`` values that select this variant."""


TASK_VARIANTS: dict[str, tuple[Variant, ...]] = {
    "standup": (Variant("ground/supine", posture="supine", terrain="ground"),),
}
"""Variants per task, the first being the task's default."""


def task_variants(task_name: str) -> tuple[Variant, ...]:
    """The variants of ``task_name`` (one default variant for a task that lists none)."""
    return TASK_VARIANTS.get(task_name, (Variant("default", posture="default", terrain="default"),))


def find_variant(task_name: str, name: str | None) -> int:
    """Index of variant ``name`` (None: 0).

    Raises:
        ValueError: unknown name (the message lists the valid ones).
    """
    variants = task_variants(task_name)
    if name is None:
        return 0
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
    return dataclasses.replace(env_cfg, **variant.env_overrides)
