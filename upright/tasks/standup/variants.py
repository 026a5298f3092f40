"""The standup task's own Hydra groups: ``terrain=<name>`` (HoST's four scenes, with each terrain's settings) and
``posture=<name>`` (supine or prone, with the posture's settings and reward group weights)."""

from __future__ import annotations

from typing import Any

from upright.tasks.spec import nested


def config_groups() -> dict[str, dict[str, dict[str, Any]]]:
    """``{"terrain": {name: node}, "posture": {name: node}}``, each node ``{"env": {...}[, "train": {...}]}``."""
    from upright.tasks.standup.rewards.variants import POSTURE_REWARDS
    from upright.tasks.standup.terrains import POSTURE_NAMES, TERRAINS
    from upright.tasks.standup.terrains.settings import POSTURE_ENV_OVERRIDES

    terrain = {name: {"env": nested(spec.env_overrides())} for name, spec in TERRAINS.items()}
    posture = {
        name: {
            "env": nested({"posture": name, **POSTURE_ENV_OVERRIDES[name]}),
            "train": {"group_weights": list(POSTURE_REWARDS[name].group_weights)},
        }
        for name in POSTURE_NAMES
    }
    return {"terrain": terrain, "posture": posture}
