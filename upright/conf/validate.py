"""Check command-line overrides before Hydra runs, with an error that lists the valid choices."""

from __future__ import annotations

import difflib
import pathlib
import re
import sys

from hydra import compose, initialize
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException, ValidationError

from upright.conf import (
    NO_VARIANT,
    RECIPE_TASKS,
    RECIPES,
    REMOVED_IN,
    TASK_GROUPS_OFF,
    TASKS,
    register_configs,
    removed_setting,
    task_of,
    with_task_groups,
)
from upright.conf.train_cfg import noise_cut_metric_problem, noise_cut_problem
from upright.tasks.standup.getup.config import validate_getup
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


GROUPS = ("task", "terrain", "posture", "recipe")
"""Config groups an override may select (``task=lift``); they are keys of no composed config."""


def _node(cfg, key: str):
    """The OmegaConf node of dotted ``key`` in ``cfg`` (list indices dropped), or None where there is none."""
    node = cfg
    for part in re.sub(r"\[\d+\]", "", key).split("."):
        if not OmegaConf.is_dict(node):
            return None
        node = node._get_node(part)
        if node is None:
            return None
    return node


def expected_type(cfg, key: str) -> str | None:
    """What the leaf ``key`` of ``cfg`` takes, in words (``an integer``, ``true or false``, ``one of a, b``), with its
    default as an example; None where ``key`` is not a typed leaf."""
    from omegaconf.nodes import BooleanNode, EnumNode, FloatNode, IntegerNode, StringNode

    node = _node(cfg, key)
    if node is None:
        return None
    key = re.sub(r"\[\d+\]", "", key)
    if isinstance(node, EnumNode):
        return f"one of {', '.join(m.name for m in node.enum_type)}"
    if OmegaConf.is_list(node):
        return f"a list, e.g. {key}=[{','.join(str(v) for v in OmegaConf.to_container(node, resolve=True))}]"
    kinds = {IntegerNode: "an integer", FloatNode: "a number", BooleanNode: "true or false", StringNode: "a string"}
    kind = next((text for cls, text in kinds.items() if isinstance(node, cls)), None)
    if kind is None:
        return None
    value = node._value()
    example = "" if value is None else f", e.g. {key}={str(value).lower() if isinstance(value, bool) else value}"
    return kind + example


def suggest_keys(key: str, cfg) -> str:
    """``did you mean env.num_envs?`` for an unknown override ``key`` (the nearest keys of ``cfg`` and the config
    groups, :func:`difflib.get_close_matches`); without a close one, the keys at the deepest level of ``key`` that
    exists, on one line."""
    valid = [k for k in leaf_keys(cfg) if k != "defaults"] + list(GROUPS)
    near = difflib.get_close_matches(key, valid, n=2, cutoff=0.8)
    if not near:  # the right leaf under the wrong parent, or with the parent left out: num_envs=8
        near = [k for k in valid if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]][:2]
    if near:
        return f"did you mean {' or '.join(near)}?"
    parent, node = "", cfg
    for part in key.split(".")[:-1]:
        child = node.get(part) if OmegaConf.is_dict(node) else None
        if not OmegaConf.is_dict(child):
            break
        parent, node = f"{parent}{part}.", child
    names = [f"{k}.*" if OmegaConf.is_dict(node[k]) else str(k) for k in node if k != "defaults"]
    if not parent:
        names += [f"{g}=" for g in GROUPS]
    return f"keys of {parent.rstrip('.') or 'the config'}: {', '.join(names)}"


def override_error(err: Exception, overrides: list[str], base) -> str:
    """One line for an override that Hydra or OmegaConf refused (``err``): a value of the wrong type names the key
    and the type it takes, an unknown key the nearest valid ones (:func:`suggest_keys`); ``base`` is the config
    composed without the overrides."""
    cause = err
    while cause.__cause__ is not None and not isinstance(cause, ValidationError):
        cause = cause.__cause__
    given = dict(a.split("=", 1) for a in overrides if "=" in a)
    if isinstance(cause, ValidationError) and getattr(cause, "full_key", None):
        key = re.sub(r"\[\d+\]", "", str(cause.full_key))
        takes = expected_type(base, key)
        if takes is not None:
            value = given.get(key, getattr(cause, "value", "?"))
            return f"{key}={value}: {key} takes {takes}."
    unknown = re.search(r"Could not override '([^']+)'", str(err))
    message = " ".join(str(err).strip().splitlines()[:2])
    # Hydra suggests '+key=value' to append a key; upright's structured configs take no new keys
    message = re.sub(r"\s*To append to your config use \S+", " (unknown key; upright's keys are fixed)", message)
    if unknown:
        return f"Invalid override: {message}; {suggest_keys(unknown.group(1), base)}"
    return f"Invalid override: {message}"


HYDRA_FLAGS_WITH_VALUE = frozenset(
    {
        "--cfg",
        "-c",
        "--package",
        "-p",
        "--config-path",
        "-cp",
        "--config-name",
        "-cn",
        "--config-dir",
        "-cd",
        "--experimental-rerun",
    }
)
"""Hydra's command-line flags that take the next argument as their value (``--cfg job``); ``--info`` may too."""


def split_hydra_flags(args: list[str]) -> tuple[list[str], list[str]]:
    """``args`` split into the overrides and Hydra's own flags with their values (``--cfg job``, ``--help``,
    ``--info [KIND]``). Hydra reads overrides only before its flags, so entry points put the flags last."""
    overrides, flags, takes_value = [], [], False
    for a in args:
        if takes_value and not a.startswith("-") and "=" not in a:
            flags.append(a)
        elif a.startswith("-"):
            flags.append(a)
        else:
            overrides.append(a)
        takes_value = a in HYDRA_FLAGS_WITH_VALUE or a == "--info"
    return overrides, flags


def validate_overrides(args: list[str], config_name: str = "config") -> str | None:
    """Compose the config with ``args``; return None if valid, else a one-line error that names the fix (the valid
    options, the expected type, the nearest key: :func:`override_error`, :func:`check_values`). Hydra's own flags
    (``--cfg job``, ``--help``: :func:`split_hydra_flags`) are left to Hydra."""
    overrides = [a for a in split_hydra_flags(args)[0] if not a.lstrip("+~").startswith("hydra")]
    register_configs()
    task = task_of(overrides)
    if task not in TASKS:
        return f"Unknown task '{task}'. Valid tasks: {', '.join(sorted(TASKS))}."
    own = TASKS[task].default_groups
    for group in TASK_GROUPS_OFF:
        value = next((a.split("=", 1)[1] for a in overrides if a.startswith(group + "=")), NO_VARIANT)
        if group == "recipe" or group in own:  # recipes: checked below with every task's
            continue
        if value != NO_VARIANT:
            owners = [name for name, spec in TASKS.items() if group in spec.default_groups]
            return f"{group}={value}: {group} applies to task={' or task='.join(owners)} only; drop it for task={task}."
    overrides = with_task_groups(overrides)
    recipe = next((a.split("=", 1)[1] for a in overrides if a.startswith("recipe=")), own.get("recipe", NO_VARIANT))
    if recipe not in RECIPES and not ("recipe" not in own and recipe == NO_VARIANT):
        mine = [r for r, t in RECIPE_TASKS.items() if t == task]
        if not mine:
            return f"Unknown recipe '{recipe}': task={task} has no recipes; drop recipe={recipe}."
        default = f" (default: {own['recipe']})" if "recipe" in own else ""
        return f"Unknown recipe '{recipe}' for task={task}. Valid recipes: {', '.join(mine)}{default}."
    if recipe in RECIPES and RECIPE_TASKS[recipe] != task:
        mine = [r for r, t in RECIPE_TASKS.items() if t == task]
        return (
            f"recipe={recipe} is a task={RECIPE_TASKS[recipe]} recipe; for task={task} use "
            + (" or ".join(f"recipe={r}" for r in mine) if mine else "no recipe")
            + "."
        )
    for arg in overrides:
        gone = removed_setting(arg.lstrip("+~").split("=", 1)[0])
        if gone is not None:
            return (
                f"{arg}: {gone} was removed (a lever that measured no gain; its code last lived in commit "
                f'{REMOVED_IN}, docs/standup_learning.md "Removed levers").'
            )
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
        return override_error(err, plain, base)
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
    if env is not None and env.get("mdp") == "getup":  # the get-up env's own checks (flat ground only), one line here
        try:
            validate_getup(env.getup, str(env.terrain))
        except ValueError as err:
            return str(err)
    if train is not None and (train.get("noise_cut_iteration") is not None or train.get("noise_cut_metric")):
        iteration = 1 if train.get("noise_cut_iteration") is None else train.noise_cut_iteration
        problem = noise_cut_problem(iteration, train.noise_cut_std, train.noise_cut_entropy_coef)
        if problem:
            return problem
    if train is not None:
        problem = noise_cut_metric_problem(
            train.get("noise_cut_metric"), train.get("noise_cut_metric_at_least"), train.get("noise_cut_metric_window")
        )
        if problem:
            return problem
    resume = cfg.get("resume")
    if train is not None and train.get("resume_std") is not None and not resume:
        return "train.resume_std applies to a resumed run (resume=...); a new run uses train.init_noise_std."
    init_policy = train.get("init_policy") if train is not None else None
    if init_policy and resume:
        return (
            f"train.init_policy={init_policy} starts a new run's actor from a policy file; resume={resume} continues a "
            "checkpoint. Give one of them."
        )
    policy_cfg = cfg.get("policy")
    if init_policy and policy_cfg is not None and "base" in policy_cfg and policy_cfg.base:
        return (
            f"train.init_policy={init_policy} starts a new actor; a residual run (policy.base={policy_cfg.base}) "
            "starts its residual at 0. Give one of them."
        )
    if init_policy and not pathlib.Path(str(init_policy)).expanduser().is_file():
        return f"train.init_policy={init_policy}: no such policy file (give a policy.onnx exported by upright)."
    if train is not None and int(train.get("critic_warmup_iterations", 0)) < 0:
        return f"train.critic_warmup_iterations must be >= 0 (got {train.critic_warmup_iterations})."
    if resume and not pathlib.Path(str(resume)).expanduser().exists():
        return (
            f"resume={resume}: no such run directory or checkpoint file (give logs/<task>/<run.name> or a "
            "model_<it>.pt)."
        )
    if resume and "task_name" in cfg:
        problem = check_resume_task(str(resume), str(cfg.task_name)) or check_resume_mdp(str(resume), cfg)
        if problem:
            return problem
    device = cfg.get("device")
    if device is not None and str(device) != "cpu":
        problem = check_device(str(device))
        if problem:
            return problem
    policy = cfg.get("policy")
    if policy is not None and "base" in policy and policy.base:
        from upright.policy_io.residual_base import ResidualCfg, check_residual_cfg, is_remote_base, resolve_base_file

        try:
            check_residual_cfg(ResidualCfg(**OmegaConf.to_container(policy, resolve=True)), str(cfg.task_name))
            if not is_remote_base(str(policy.base)):  # a policy server is asked by train.py before the run folder
                resolve_base_file(pathlib.Path(str(policy.base)).expanduser())
        except (ValueError, FileNotFoundError) as err:
            return str(err)
    return None


def run_task(resume: str) -> tuple[str, pathlib.Path] | None:
    """The task a run was trained for and the run config that says so: ``task_name`` of the ``config_<n>.yaml`` of
    the run directory ``resume`` (or beside the checkpoint ``resume``); None where there is no readable one."""
    from upright.conf.run_files import run_config_for

    path = pathlib.Path(resume).expanduser()
    try:
        config = max(path.glob("config_*.yaml")) if path.is_dir() else run_config_for(path)
        return str(OmegaConf.load(config).get("task_name", "standup")), config
    except (ValueError, FileNotFoundError, OmegaConfBaseException, OSError):  # no config, or not YAML
        return None


def check_resume_task(resume: str, task: str) -> str | None:
    """One-line error when ``resume=`` is a run of a task other than ``task`` (its networks do not fit); else None."""
    found = run_task(resume)
    if found is None or found[0] == task:
        return None
    other, config = found
    return (
        f"resume={resume} is a task={other} run ({config.name} says task_name: {other}), not task={task}; "
        f"resume it with task={other}, or give a task={task} run."
    )


def check_resume_mdp(resume: str, cfg) -> str | None:
    """One-line error when ``resume=`` is a run of another standup MDP (``env.mdp``: ``host`` | ``getup``) than the
    composed config's, e.g. a HoST run resumed with the default ``recipe=getup`` (its networks do not fit); else
    None. A run config without ``env.mdp`` predates the get-up MDP: ``host``."""
    running = OmegaConf.select(cfg, "env.mdp", default=None)
    found = run_task(resume)
    if running is None or found is None:
        return None
    trained = str(OmegaConf.select(OmegaConf.load(found[1]), "env.mdp", default="host"))
    if trained == str(running):
        return None
    return (
        f"resume={resume} is an env.mdp={trained} run ({found[1].name}), but this config runs env.mdp={running}; "
        f"resume it with recipe={trained}."
    )


def check_device(device: str) -> str | None:
    """One-line error when torch cannot use ``device=`` here (not a device name, no CUDA in this torch, no such GPU);
    else None."""
    import torch

    try:
        dev = torch.device(device)
    except RuntimeError:
        return f"device={device} is not a torch device; use device=cpu or device=cuda:0."
    if dev.type != "cuda":
        return None
    if torch.version.cuda is None:
        return f"device={device} but this torch ({torch.__version__}) has no CUDA; use device=cpu."
    count = torch.cuda.device_count()
    if count == 0:
        return f"device={device} but torch sees no CUDA device (CUDA_VISIBLE_DEVICES, driver); use device=cpu."
    if dev.index is not None and dev.index >= count:
        return f"device={device} but torch sees {count} CUDA device(s); use device=cuda:0 .. cuda:{count - 1}."
    return None


def exit_on_invalid_overrides(args: list[str] | None = None) -> None:
    """Print the validation error and exit with status 2 if the overrides are invalid."""
    error = validate_overrides(sys.argv[1:] if args is None else args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2)
