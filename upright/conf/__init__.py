"""Hydra structured configs for ``train.py`` / ``play.py``, built from the tasks' specs (:mod:`upright.tasks.spec`:
every ``upright/tasks/<name>/spec.py``): config groups ``task`` (one entry per task: ``standup``, ``lift``,
``reach``, ...), ``recipe`` (each task's recipes) and each task's own groups, e.g. ``terrain`` and ``posture`` (the
standup task's variants; other tasks select their empty option ``none``).

Command line: ``python train.py task=standup recipe=host terrain=platform posture=supine env.num_envs=256
train.max_iterations=100 seed=3 run.name=my_run resume=logs/standup/my_run``.

``terrain=<name>`` sets ``env.terrain`` and the terrain's HoST values of other ``env.*`` fields
(:meth:`upright.tasks.standup.terrains.TerrainSpec.env_overrides`); ``posture=<name>`` sets ``env.posture``, the
posture's HoST ``env.*`` values (:data:`~upright.tasks.standup.terrains.settings.POSTURE_ENV_OVERRIDES`; prone:
Kp/Kd ranges, ungated pull force) and ``train.group_weights`` (prone [1, 0.1, 1, 1]).
Explicit ``env.*`` overrides on the command line still win.

``recipe=<name>`` (:data:`RECIPES`, from the task specs) sets the training recipe: ``host`` is HoST's recipe as
published; ``getup`` is the get-up MDP (``docs/experiments/2026-11-26_getup_recipe.md``); ``cartesian`` is upright's
lift recipe (``task=lift recipe=cartesian``; without it the lift task trains with Playground's settings,
``docs/lift_learning.md``); ``vlm_kneel`` trains the G1 to kneel from a sentence through a CLIP reward
(``docs/vlm_reward.md``). Explicit ``env.*`` and ``train.*`` overrides still win.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from upright.conf.train_cfg import TrainCfg
from upright.policy_io.residual_base import ResidualCfg
from upright.tasks.spec import TaskSpec, nested, task_specs


@dataclass
class RunCfg:
    """Where a run writes: ``<root>/<task_name>/<name>``."""

    name: str = "${now:%Y-%m-%d_%H-%M-%S}"
    """Run name (default: the start time)."""
    root: str = "logs"
    """Root folder of all runs."""


TASKS: dict[str, TaskSpec] = task_specs()
"""Registered tasks (``task=<name>``): every task folder's spec, by name."""

DEFAULT_TASK = "standup"
"""The task of a command line that names none (the flagship)."""


def task_schema(name: str) -> dict[str, Any]:
    """The typed config of ``task=<name>``: ``task_name`` and its ``env``, ``sim`` and ``train`` dataclass schemas with
    the task's defaults (unknown keys and bad types are errors).

    Raises:
        ValueError: no such task (the message lists the valid ones).
    """
    if name not in TASKS:
        raise ValueError(f"Unknown task '{name}'. Valid tasks: {', '.join(TASKS)}")
    spec = TASKS[name]
    return {
        "task_name": name,
        "env": OmegaConf.structured(spec.env_config()),
        "sim": OmegaConf.structured(spec.sim_config()),
        "train": OmegaConf.structured(TrainCfg(**dict(spec.train_defaults))),
    }


NO_VARIANT = "none"
"""The empty option of every group but ``task``: a task selects it for the groups it does not declare
(:attr:`~upright.tasks.spec.TaskSpec.default_groups`) unless the command line names one (terrains and postures are
standup's only; a recipe must be one of the task's own, :data:`RECIPE_TASKS`)."""

TASK_GROUPS_OFF: tuple[str, ...] = tuple(
    dict.fromkeys(
        [*TASKS[DEFAULT_TASK].default_groups, "recipe", *(g for spec in TASKS.values() for g in spec.default_groups)]
    )
)
"""Config groups besides ``task`` (the default task's first, in its order): ``terrain``, ``posture``, ``recipe``."""


def task_of(args: list[str]) -> str:
    """The ``task=`` of command-line ``args`` (default :data:`DEFAULT_TASK`)."""
    return next((a.split("=", 1)[1] for a in args if a.startswith("task=")), DEFAULT_TASK)


def with_task_groups(args: list[str]) -> list[str]:
    """``args`` plus ``<group>=<option>`` for every group the command line does not name, when the task is not the
    default one: the task's own default option (:attr:`~upright.tasks.spec.TaskSpec.default_groups`), or
    :data:`NO_VARIANT` for a group it lacks (the primary defaults list selects the default task's options)."""
    task = task_of(args)
    if task == DEFAULT_TASK or task not in TASKS:
        return list(args)
    given = {a.split("=", 1)[0] for a in args}
    defaults = TASKS[task].default_groups
    return list(args) + [f"{g}={defaults.get(g, NO_VARIANT)}" for g in TASK_GROUPS_OFF if g not in given]


_BY_DEFAULT_FIRST = (TASKS[DEFAULT_TASK], *(spec for name, spec in TASKS.items() if name != DEFAULT_TASK))

RECIPES: dict[str, dict[str, Any]] = {r: dict(v) for spec in _BY_DEFAULT_FIRST for r, v in spec.recipes.items()}
"""``recipe=<name>``: dotted ``env.*`` / ``train.*`` values each recipe sets on top of its task's defaults (standup:
HoST's; lift: MuJoCo Playground's ``PandaPickCube``), from the task specs."""

RECIPE_TASKS: dict[str, str] = {r: spec.name for spec in _BY_DEFAULT_FIRST for r in spec.recipes}
"""The task each recipe of :data:`RECIPES` is written for (its keys exist only in that task's config)."""


def recipe_env(recipe: str) -> dict[str, Any]:
    """The ``env.*`` values (keys without ``env.``) of ``recipe=<recipe>`` that define its MDP: every ``env.*`` key of
    :data:`RECIPES` ``[recipe]`` except ``env.num_envs``, the recipe's training batch (play and the gymnasium adapters
    set their own number of envs).

    Raises:
        KeyError: an unknown recipe.
    """
    return {
        k.removeprefix("env."): v for k, v in RECIPES[recipe].items() if k.startswith("env.") and k != "env.num_envs"
    }


for _spec in TASKS.values():  # recipe=<name> is one Hydra group shared by every task
    for _recipe in _spec.recipes:
        if RECIPE_TASKS[_recipe] != _spec.name:
            raise ValueError(
                f"recipe '{_recipe}' is named by task {RECIPE_TASKS[_recipe]} and task {_spec.name}; recipe names are "
                f"shared by all tasks: rename it in upright/tasks/{_spec.name}/spec.py"
            )


def task_defaults() -> list[Any]:
    """Hydra defaults list of every top-level config: the ``task`` group (:data:`DEFAULT_TASK`), then each other group
    with the default task's option (standup: ``terrain`` ground, ``posture`` supine, ``recipe`` getup), then the config
    itself; Hydra's own logging is off (upright prints its own progress)."""
    own = TASKS[DEFAULT_TASK].default_groups
    return [
        {"task": DEFAULT_TASK},
        *({g: own.get(g, NO_VARIANT)} for g in TASK_GROUPS_OFF),
        "_self_",
        {"override hydra/job_logging": "none"},
        {"override hydra/hydra_logging": "none"},
    ]


@dataclass
class Config:
    """Top-level config. ``task`` picks env/sim/train defaults; the rest are run settings."""

    defaults: list[Any] = field(default_factory=task_defaults)
    seed: int = 1
    """Seed of torch, numpy and the env RNG."""
    device: str = "cpu"
    """Torch device of the networks (``cpu`` or ``cuda:0``)."""
    resume: str | None = None
    """Run directory or checkpoint ``.pt`` to continue from (iteration count and optimizer state)."""
    run: RunCfg = field(default_factory=RunCfg)
    policy: ResidualCfg = field(default_factory=ResidualCfg)
    """Residual RL on a frozen base policy (``policy.base=<VLA>``, task=lift; :mod:`upright.vla.residual`)."""
    task_name: str = MISSING
    env: Any = MISSING
    sim: Any = MISSING
    train: Any = MISSING


REMOVED_SETTINGS: tuple[str, ...] = (
    "env.assisted_start",
    "env.state_archive",
    "env.rise_path",
    "env.curriculum.pull_assisted",
)
"""Standup settings of levers that measured no gain, removed on 2026-11-26 with ``recipe=fast`` (their code last lived
in commit :data:`REMOVED_IN`; ``docs/standup_learning.md``, "Removed levers"). A run config saved before loads without
them (:func:`load_run_config`): they only shaped training starts and the pull force, not the policy's inputs or actions,
so evaluation, export and play of such a run are unchanged. An override of one is refused with that commit named."""

REMOVED_IN = "a5b5807"
"""The commit where the code of :data:`REMOVED_SETTINGS` last lived."""


def removed_setting(key: str) -> str | None:
    """The entry of :data:`REMOVED_SETTINGS` that the dotted ``key`` is, or lies under; None for any other key."""
    return next((r for r in REMOVED_SETTINGS if key == r or key.startswith(r + ".")), None)


BEHAVIOUR_BEFORE_SETTING: dict[str, Any] = {"env.rewards.carry_off_floor": False}
"""Settings whose default is not what runs saved before the setting existed did: a saved config without the key gets
this value (the behaviour it was trained with), not the default. ``carry_off_floor``: the carry term was ungated
until session 12."""


def load_run_config(path) -> Any:
    """A run's saved ``config_<n>.yaml`` (or an exported ``config.yaml``) as a DictConfig whose ``env``, ``sim`` and
    ``train`` sit on their task's typed schema, so that a setting added after the run was saved gets its default
    instead of a missing-key error, or, where that default changed the behaviour, the value of
    :data:`BEHAVIOUR_BEFORE_SETTING`; the settings of :data:`REMOVED_SETTINGS` are dropped.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file names no registered task (``task_name``), or holds a key the schema no longer has.
    """
    import pathlib

    if not pathlib.Path(path).is_file():
        raise FileNotFoundError(f"run config {path} does not exist")
    cfg = OmegaConf.load(path)
    for key in REMOVED_SETTINGS:  # levers removed since the run was saved (all off in evaluation, export and play)
        parent, leaf = key.rsplit(".", 1)
        node = OmegaConf.select(cfg, parent)
        if OmegaConf.is_dict(node) and leaf in node:
            node.pop(leaf)
    absent = [key for key in BEHAVIOUR_BEFORE_SETTING if OmegaConf.select(cfg, key) is None]
    name = str(cfg.get("task_name", DEFAULT_TASK))
    if name not in TASKS:
        raise ValueError(f"{path}: task_name={cfg.get('task_name')!r} is not one of {sorted(TASKS)}")
    schema = task_schema(name)
    try:
        for key in ("env", "sim", "train"):
            if key in cfg:
                cfg[key] = OmegaConf.merge(schema[key], cfg[key])
    except Exception as err:  # noqa: BLE001  omegaconf's ConfigKeyError / ValidationError
        raise ValueError(f"{path}: {str(err).splitlines()[0]}; the config predates a change of its schema") from None
    for key in absent:
        if OmegaConf.select(cfg, key) is not None:  # the schema has it: the run predates it
            OmegaConf.update(cfg, key, BEHAVIOUR_BEFORE_SETTING[key])
    return cfg


def register_configs() -> None:
    """Register the structured configs with Hydra's ConfigStore (idempotent): the top-level config, one ``task``
    option per task spec, the empty option of every other group, each task's own groups' options and its recipes."""
    cs = ConfigStore.instance()
    cs.store(name="config", node=Config)
    for name in TASKS:
        # A plain dict of typed sub-configs, so it merges into the top level (package _global_)
        # while env/sim/train keep their dataclass schema (unknown keys and bad types are errors).
        cs.store(group="task", name=name, node=task_schema(name), package="_global_")
    for group in TASK_GROUPS_OFF:
        cs.store(group=group, name=NO_VARIANT, node={}, package="_global_")
    for spec in TASKS.values():
        for group, options in spec.groups().items():
            for option, node in options.items():
                cs.store(group=group, name=option, node=node, package="_global_")
    for name, values in RECIPES.items():
        cs.store(group="recipe", name=name, node=nested(values), package="_global_")
