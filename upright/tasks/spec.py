"""A task's one description, :class:`TaskSpec`, and the registry that finds every task's spec.

A task is a folder ``upright/tasks/<name>/`` holding its config, its env on the env core (:mod:`upright.envs`), its
term files and a ``spec.py`` whose ``SPEC`` is its :class:`TaskSpec`. :func:`task_specs` finds every such folder, so
adding a task touches no other file (a folder outside the repository works too: name its parent in
:data:`TASKS_PATH_VAR`): ``train.py task=<name>``, play, export, evaluation, the configs and the
gymnasium ids read the spec. ``spec.py`` imports nothing heavy (no torch, MuJoCo or JAX; ``import upright`` reads
every spec to register the gymnasium ids): the config classes, the env, its metadata writer, its extra config groups
and the optional evaluator are named ``"module:attribute"`` and imported when used.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TaskSpec:
    """What every part of upright needs to know about one task.

    Attributes:
        name: ``task=<name>`` (the folder's name).
        description: one line (``train.py --help``, the docs' task table).
        env_cfg: ``"module:class"``, the dataclass of its ``env.*`` settings (its defaults are the task's).
        sim_cfg: ``"module:callable"``, a factory of its ``sim.*`` settings
            (:class:`upright.tasks.standup.config.SimCfg`).
        train_defaults: the ``train.*`` values (fields of :class:`upright.conf.train_cfg.TrainCfg`) this task's
            defaults change.
        env: ``"module:callable"``, ``callable(env_cfg, sim_cfg, device=..., seed=...)`` -> its env (a
            :class:`upright.envs.ManagerBasedRlEnv`).
        metadata: ``"module:callable"``, ``callable(env)`` -> the ONNX metadata dict of a policy for it
            (:mod:`upright.policy_io.schema`).
        recipes: ``recipe=<name>`` -> dotted ``env.*`` / ``train.*`` values set on top of the defaults.
        config_groups: ``"module:callable"`` returning further Hydra groups of this task only (e.g. standup's
            ``terrain`` and ``posture``): group -> option -> nested node (``{"env": {...}, "train": {...}}``); None:
            none.
        default_groups: the option each of its groups selects when the command line names none (groups of other
            tasks select ``none``).
        gym_id: gymnasium id (``upright/<Name>-v<k>``) or None (not offered through gymnasium).
        gym_adapter: module with ``make_env`` and ``make_vector_env`` for ``gym_id``.
        evaluator: ``"module:callable"`` of its evaluation CLI (``main(argv)``), or None.
        robot: the robot's name in policy metadata and the viewer.
    """

    name: str
    description: str
    env_cfg: str
    sim_cfg: str
    env: str
    metadata: str
    train_defaults: Mapping[str, Any] = field(default_factory=dict)
    recipes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    config_groups: str | None = None
    default_groups: Mapping[str, str] = field(default_factory=dict)
    gym_id: str | None = None
    gym_adapter: str | None = None
    evaluator: str | None = None
    robot: str = ""

    def env_config(self) -> Any:
        """A new ``env.*`` config with the task's defaults."""
        return resolve(self.env_cfg)()

    def sim_config(self) -> Any:
        """A new ``sim.*`` config with the task's defaults."""
        return resolve(self.sim_cfg)()

    def groups(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Its extra Hydra groups (:attr:`config_groups`; {} if none)."""
        return {} if self.config_groups is None else dict(resolve(self.config_groups)())

    def make_env(self, env_cfg, sim_cfg, device: str = "cpu", seed: int = 0):
        """Build the task's env (:attr:`env`)."""
        return resolve(self.env)(env_cfg, sim_cfg, device=device, seed=seed)

    def policy_metadata(self, env) -> dict[str, Any]:
        """The ONNX metadata of a policy for ``env`` (:attr:`metadata`)."""
        return resolve(self.metadata)(env)


def nested(dotted: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}`` (a recipe's dotted keys as a config node)."""
    out: dict[str, Any] = {}
    for key, value in dotted.items():
        *heads, leaf = key.split(".")
        node = out
        for h in heads:
            node = node.setdefault(h, {})
        node[leaf] = value
    return out


def resolve(ref: str) -> Any:
    """The attribute a ``"module:attribute"`` string names (imported now).

    Raises:
        ValueError: ``ref`` is not ``module:attribute``, or the module lacks the attribute.
    """
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"expected 'module:attribute', got {ref!r}")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module} has no attribute {attr!r} (named by a task spec: {ref!r})")
        obj = getattr(obj, part)
    return obj


TASKS_PATH_VAR = "UPRIGHT_TASKS_PATH"
"""Environment variable: folders (``os.pathsep``-separated) whose sub-folders are tasks too, found as
``upright.tasks.<name>`` beside the package's own (a user's tasks kept outside the repository)."""


@functools.cache
def task_specs() -> dict[str, TaskSpec]:
    """Every task's spec, by name: the ``SPEC`` of each ``upright.tasks.<name>.spec`` module (the package's folders
    and those under :data:`TASKS_PATH_VAR`), in name order.

    Raises:
        ValueError: a ``spec.py`` without a :class:`TaskSpec` ``SPEC``, or whose name is not its folder's, or a
            folder of :data:`TASKS_PATH_VAR` that does not exist.
    """
    import upright.tasks as tasks

    for folder in filter(None, os.environ.get(TASKS_PATH_VAR, "").split(os.pathsep)):
        if not os.path.isdir(folder):
            raise ValueError(f"{TASKS_PATH_VAR} names {folder!r}, which is not a folder; fix or unset it")
        if os.path.abspath(folder) not in map(os.path.abspath, tasks.__path__):
            tasks.__path__.append(os.path.abspath(folder))
    found: dict[str, TaskSpec] = {}
    for info in sorted(pkgutil.iter_modules(tasks.__path__), key=lambda m: m.name):
        if not info.ispkg or importlib.util.find_spec(f"upright.tasks.{info.name}.spec") is None:
            continue
        spec = getattr(importlib.import_module(f"upright.tasks.{info.name}.spec"), "SPEC", None)
        if not isinstance(spec, TaskSpec):
            raise ValueError(f"upright/tasks/{info.name}/spec.py must define SPEC = TaskSpec(...)")
        if spec.name != info.name:
            raise ValueError(f"upright/tasks/{info.name}/spec.py: SPEC.name is {spec.name!r}, not the folder's name")
        found[spec.name] = spec
    return found


def task_spec(name: str) -> TaskSpec:
    """The spec of ``task=<name>``.

    Raises:
        ValueError: no such task (the message lists the valid ones).
    """
    specs = task_specs()
    if name not in specs:
        raise ValueError(f"Unknown task '{name}'. Valid tasks: {', '.join(specs)}")
    return specs[name]
