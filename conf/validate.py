"""Check command-line overrides before Hydra runs, with an error that lists the valid choices."""

from __future__ import annotations

import sys

from hydra import compose, initialize
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from upright.conf import RECIPES, TASKS, register_configs
from upright.tasks.standup.terrains import check_variant


def leaf_keys(cfg, prefix: str = "") -> list[str]:
    """Dotted names of every leaf of a config (what an override may set)."""
    keys = []
    for key in cfg:
        value = cfg[key] if OmegaConf.is_dict(cfg) else None
        full = f"{prefix}{key}"
        if OmegaConf.is_dict(value):
            keys += leaf_keys(value, full + ".")
        else:
            keys.append(full)
    return keys


def validate_overrides(args: list[str], config_name: str = "config") -> str | None:
    """Compose the config with ``args``; return None if valid, else an error naming the valid options."""
    overrides = [a for a in args if not a.startswith("-") and not a.lstrip("+~").startswith("hydra")]
    register_configs()
    task = next((a.split("=", 1)[1] for a in overrides if a.startswith("task=")), "standup")
    if task not in TASKS:
        return f"Unknown task '{task}'. Valid tasks: {', '.join(sorted(TASKS))}."
    recipe = next((a.split("=", 1)[1] for a in overrides if a.startswith("recipe=")), "host")
    if recipe not in RECIPES:
        return f"Unknown recipe '{recipe}'. Valid recipes: {', '.join(RECIPES)} (recipe=host is HoST's as published)."
    for key in ("env.terrain", "env.posture"):
        if any(a.lstrip("+~").startswith(key + "=") for a in overrides):
            top = key.split(".")[1]
            return f"Set the {top} with the top-level key {top}=<name>, not {key}= (it also sets the {top}'s settings)."
    terrain = next((a.split("=", 1)[1] for a in overrides if a.startswith("terrain=")), "ground")
    posture = next((a.split("=", 1)[1] for a in overrides if a.startswith("posture=")), "supine")
    try:
        check_variant(terrain, posture)
    except ValueError as err:
        return str(err)
    try:
        with initialize(version_base=None, config_path=None):
            compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException, ValueError) as err:
        with initialize(version_base=None, config_path=None):
            base = compose(config_name=config_name, overrides=[f"task={task}"])
        valid = [k for k in leaf_keys(base) if k != "defaults"]
        message = " ".join(str(err).strip().splitlines()[:2])
        return (
            f"Invalid override: {message}\n"
            f"Valid tasks: {', '.join(sorted(TASKS))}\n"
            "Valid keys (resume=<run dir or checkpoint .pt>):\n  " + "\n  ".join(valid)
        )
    return None


def exit_on_invalid_overrides(args: list[str] | None = None) -> None:
    """Print the validation error and exit with status 2 if the overrides are invalid."""
    error = validate_overrides(sys.argv[1:] if args is None else args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2)
