"""Check command-line overrides before Hydra runs, with an error that lists the valid choices."""

from __future__ import annotations

import pathlib
import re
import sys

from hydra import compose, initialize
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from upright.conf import NO_VARIANT, RECIPE_TASKS, RECIPES, TASK_GROUPS_OFF, TASKS, register_configs, with_task_groups
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
    if task != "standup":
        for group in TASK_GROUPS_OFF:
            value = next((a.split("=", 1)[1] for a in overrides if a.startswith(group + "=")), NO_VARIANT)
            if group == "recipe":  # lift has recipes of its own: checked below with every task's
                continue
            if value != NO_VARIANT:
                return f"{group}={value}: {group} applies to task=standup only; drop it for task={task}."
        overrides = with_task_groups(overrides)
    recipe = next((a.split("=", 1)[1] for a in overrides if a.startswith("recipe=")), "host")
    if recipe not in RECIPES and not (task != "standup" and recipe == NO_VARIANT):
        return f"Unknown recipe '{recipe}'. Valid recipes: {', '.join(RECIPES)} (recipe=host is HoST's as published)."
    if recipe in RECIPES and RECIPE_TASKS[recipe] != task:
        mine = [r for r, t in RECIPE_TASKS.items() if t == task]
        return (f"recipe={recipe} is a task={RECIPE_TASKS[recipe]} recipe; for task={task} use "
                + (" or ".join(f"recipe={r}" for r in mine) if mine else "no recipe") + ".")
    for key in ("env.terrain", "env.posture"):
        if any(a.lstrip("+~").startswith(key + "=") for a in overrides):
            top = key.split(".")[1]
            return f"Set the {top} with the top-level key {top}=<name>, not {key}= (it also sets the {top}'s settings)."
    terrain = next((a.split("=", 1)[1] for a in overrides if a.startswith("terrain=")), "ground")
    posture = next((a.split("=", 1)[1] for a in overrides if a.startswith("posture=")), "supine")
    if task == "standup":
        try:
            check_variant(terrain, posture)
        except ValueError as err:
            return str(err)
    plain = [a.lstrip("+") for a in overrides]
    try:
        with initialize(version_base=None, config_path=None):
            cfg = compose(config_name=config_name, overrides=plain)
    except (HydraException, OmegaConfBaseException, ValueError) as err:
        with initialize(version_base=None, config_path=None):
            base = compose(config_name=config_name, overrides=with_task_groups([f"task={task}"]))
        valid = [k for k in leaf_keys(base) if k != "defaults"]
        message = " ".join(str(err).strip().splitlines()[:2])
        # Hydra suggests '+key=value' to append a key; upright's structured configs take no new keys
        message = re.sub(r"\s*To append to your config use \S+", " (unknown key; upright's keys are fixed)", message)
        return (
            f"Invalid override: {message}\n"
            f"Valid tasks: {', '.join(sorted(TASKS))}\n"
            "Valid keys (resume=<run dir or checkpoint .pt>):\n  " + "\n  ".join(valid)
        )
    for arg in overrides:
        if arg.startswith("+"):
            key = arg.lstrip("+").split("=", 1)[0]
            return f"'{arg}': '{key}' already exists and upright takes no new keys; drop the '+': {arg.lstrip('+')}"
    return check_values(cfg)


def check_values(cfg) -> str | None:
    """One-line error for a composed config's values that would train nothing or fail later; None if fine."""
    train, env = cfg.get("train"), cfg.get("env")
    if train is not None and "max_iterations" in train and int(train.max_iterations) < 1:
        return f"train.max_iterations must be >= 1 (got {train.max_iterations}); e.g. train.max_iterations=12000."
    if env is not None and "num_envs" in env and int(env.num_envs) < 1:
        return f"env.num_envs must be >= 1 (got {env.num_envs}); e.g. env.num_envs=512."
    resume = cfg.get("resume")
    if resume and not pathlib.Path(str(resume)).expanduser().exists():
        return f"resume={resume}: no such run directory or checkpoint file (give logs/<task>/<run.name> or a model_<it>.pt)."
    policy = cfg.get("policy")
    if policy is not None and "base" in policy and policy.base:
        from upright.vla.residual_config import ResidualCfg, check_residual_cfg, is_remote_base, resolve_base_file

        try:
            check_residual_cfg(ResidualCfg(**OmegaConf.to_container(policy, resolve=True)), str(cfg.task_name))
            if is_remote_base(str(policy.base)):  # a policy server: it must answer now
                from upright.vla.remote import fetch_metadata

                try:
                    fetch_metadata(str(policy.base), timeout=10.0)
                except ConnectionError as err:
                    raise ValueError(f"policy.base={policy.base}: {err}; start it with upright-policy-server "
                                     "--policy <base> --port <port>") from None
            else:
                resolve_base_file(pathlib.Path(str(policy.base)).expanduser())
        except (ValueError, FileNotFoundError) as err:
            return str(err)
    return None


def exit_on_invalid_overrides(args: list[str] | None = None) -> None:
    """Print the validation error and exit with status 2 if the overrides are invalid."""
    error = validate_overrides(sys.argv[1:] if args is None else args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2)
