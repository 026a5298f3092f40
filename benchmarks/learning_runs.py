"""Training runs as ``benchmarks/standup_learning.py`` reads them: a run directory's checkpoints
(``model_<it>.pt``) and session configs (``config_<k>.yaml``), the training wall clock up to each checkpoint (rsl-rl's
``Perf/*`` TensorBoard scalars, else file times), Hydra composition of a config and the recipe of a run (its
overrides against today's defaults), and the pure helpers behind them (checkpoint choice, cumulative seconds, config
flattening). Also :class:`UsageError`, the one-line error every part of the script raises. Imported by its sibling
scripts by name (``from learning_runs import ...``: the script's folder is on ``sys.path``).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from collections.abc import Iterable
from typing import Any

COLLECTION_TAG = "Perf/collection_time"
"""TensorBoard scalar rsl-rl-lib 5.x writes per iteration (step = 0-based iteration): rollout seconds."""
LEARNING_TAG = "Perf/learning_time"
"""TensorBoard scalar rsl-rl-lib 5.x writes per iteration: returns + PPO update seconds."""

NOT_RECIPE = ("run.", "resume", "seed", "train.max_iterations", "train.save_interval")
"""Config keys (prefixes) that are no part of a recipe: where a run writes, its seed, its length, its save cadence."""

SEED_SUFFIX = re.compile(r"[_-]s(?:eed)?\d+$")


class UsageError(Exception):
    """Bad input; ``main`` prints the message on one line and exits with status 2."""


# ----------------------------------------------------------------------------------------------- helpers (pure)
def recipe_name_of_run(run_name: str) -> str:
    """A run's recipe name from its directory name: a trailing ``_s<seed>`` / ``-seed<seed>`` removed."""
    return SEED_SUFFIX.sub("", run_name) or run_name


def checkpoint_iteration(path: pathlib.Path) -> int | None:
    """``model_<it>.pt`` -> it (0-based index of the last iteration it holds), else None."""
    m = re.fullmatch(r"model_(\d+)\.pt", path.name)
    return int(m.group(1)) if m else None


def select_checkpoints(iterations: Iterable[int], every: int | None) -> list[int]:
    """Checkpoint indices to evaluate, ascending: all (``every`` None or <= 0), else the first, then each one at
    least ``every`` iterations after the last one kept, and always the last."""
    its = sorted(set(iterations))
    if not its or not every or every <= 0:
        return its
    kept = [its[0]]
    for it in its[1:]:
        if it - kept[-1] >= every:
            kept.append(it)
    if kept[-1] != its[-1]:
        kept.append(its[-1])
    return kept


def last_by_step(events: Iterable[tuple[int, float]]) -> dict[int, float]:
    """(step, value) pairs in the order they were written -> step -> the last value written for it.

    A run resumed from an earlier checkpoint than its last logged iteration logs those steps again; the later
    values belong to the iterations that led to the later checkpoints."""
    out: dict[int, float] = {}
    for step, value in events:
        out[int(step)] = float(value)
    return out


def cumulative_seconds(per_iteration: dict[int, float], completed: Iterable[int]) -> dict[int, float | None]:
    """Training seconds up to each count of completed iterations: the sum of ``per_iteration[i]`` (seconds of
    0-based iteration i) for i < n; None where an iteration below n is missing."""
    out: dict[int, float | None] = {}
    todo = sorted(set(completed))
    total, i = 0.0, 0
    for n in todo:
        while i < n and i in per_iteration:
            total += per_iteration[i]
            i += 1
        out[n] = total if i >= n else None
    return out


def mtime_seconds(checkpoints: dict[int, float], sessions: dict[int, float]) -> dict[int, float]:
    """Fallback training seconds from file times: ``checkpoints`` maps completed iterations -> checkpoint mtime,
    ``sessions`` maps the completed iterations a session started from (``config_<k>.yaml``) -> that file's mtime
    (written just before the first iteration). A checkpoint belongs to the last session with k < its count; its
    seconds are its mtime minus that session's start plus the span of every earlier session (start to its last
    checkpoint); gaps between sessions do not count. Includes checkpoint saves, excludes env construction."""
    if not sessions:
        return {}
    starts = sorted(sessions)

    def session_of(n: int) -> int:
        s = starts[0]
        for k in starts:
            if k < n:
                s = k
        return s

    by_session: dict[int, list[int]] = {}
    for n in sorted(checkpoints):
        by_session.setdefault(session_of(n), []).append(n)
    out, offset = {}, 0.0
    for k in starts:
        members = by_session.get(k, [])
        for n in members:
            out[n] = offset + max(0.0, checkpoints[n] - sessions[k])
        if members:
            offset += max(0.0, checkpoints[members[-1]] - sessions[k])
    return out


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> dotted leaf keys (lists are leaves)."""
    if not isinstance(tree, dict):
        return {prefix.rstrip("."): tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}{key}."))
    return out


def format_value(value: Any) -> str:
    """A config value as Hydra override syntax (``true``, ``null``, ``[512,256]``, ``0.25``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, str) and re.search(r"[\s,\[\]{}=:'\"]", value):
        return json.dumps(value)
    return str(value)


def recipe_overrides(
    config: dict[str, Any], defaults: dict[str, Any], before: dict[str, Any] | None = None
) -> list[str]:
    """The overrides that turn ``defaults`` into ``config`` (both flat, :func:`flatten`), keys that are no part of a
    recipe (:data:`NOT_RECIPE`) left out, sorted: the run's recipe as ``key=value`` strings. Keys the defaults lack
    (removed since the run) are kept. Keys the run's config lacks (added since the run) count with their value in
    ``before`` (what the run had: the setting's schema default, i.e. off), when that differs from ``defaults``."""
    out = []
    config = {**{k: v for k, v in (before or {}).items() if k in defaults and k not in config}, **config}
    for key in sorted(config):
        if any(key == p or key.startswith(p) for p in NOT_RECIPE):
            continue
        if key not in defaults or defaults[key] != config[key]:
            out.append(f"{key}={format_value(config[key])}")
    return out


def parse_override(text: str) -> tuple[str, str]:
    """``key=value`` -> (key, value) (leading ``+``/``~`` dropped)."""
    key, _, value = text.partition("=")
    return key.lstrip("+~"), value


# ----------------------------------------------------------------------------------------------- run directories
def compose_config(overrides: list[str]):
    """Hydra-compose ``config`` with ``overrides`` as ``train.py`` would (validated first).

    Raises:
        UsageError: invalid overrides (first line of the validator's message, which lists the valid keys).
    """
    from hydra import compose, initialize

    from upright.conf import register_configs
    from upright.conf.validate import validate_overrides

    problem = validate_overrides(list(overrides))
    if problem:
        raise UsageError(f"{problem.splitlines()[0]} (overrides: {' '.join(overrides) or 'none'})")
    register_configs()
    with initialize(version_base=None, config_path=None):
        return compose("config", overrides=list(overrides))


_DEFAULTS: dict[tuple[str, str, str], dict[str, Any]] = {}


def flat_config(cfg) -> dict[str, Any]:
    """A composed or loaded config as flat ``key -> value`` (``task``, ``env.*``, ``sim.*``, ``train.*``, ``seed``,
    ``device``; ``run.*`` and ``resume`` left out)."""
    from omegaconf import OmegaConf

    flat: dict[str, Any] = {"task": cfg.get("task_name"), "seed": cfg.get("seed"), "device": cfg.get("device")}
    for section in ("env", "sim", "train"):
        if section in cfg:
            flat.update(flatten(OmegaConf.to_container(cfg[section], resolve=True), f"{section}."))
    return flat


def default_flat_config(task: str, terrain: str, posture: str) -> dict[str, Any]:
    """Today's defaults of ``task=<task> terrain=<terrain> posture=<posture>``, flat (:func:`flat_config`)."""
    key = (task, terrain, posture)
    if key not in _DEFAULTS:
        _DEFAULTS[key] = flat_config(compose_config([f"task={task}", f"terrain={terrain}", f"posture={posture}"]))
    return _DEFAULTS[key]


def schema_flat_defaults(task: str) -> dict[str, Any]:
    """The dataclass defaults of ``train.*`` (:class:`~upright.conf.train_cfg.TrainCfg`) and of the task's ``env.*``
    (its spec's ``env_cfg``), flat: what a run from before a setting existed ran with (new settings default to off)."""
    from upright.conf.train_cfg import TrainCfg
    from upright.tasks.spec import resolve, task_spec

    env_cls = resolve(task_spec(task).env_cfg)
    return {
        **flatten(dataclasses.asdict(TrainCfg()), "train."),
        **flatten(dataclasses.asdict(env_cls()), "env."),
    }


def run_recipe(flat: dict[str, Any]) -> list[str]:
    """The recipe of a run config (flat): ``terrain=``/``posture=`` when not ground/supine, then its overrides
    against those defaults (:func:`recipe_overrides`; settings added since the run count as off,
    :func:`schema_flat_defaults`)."""
    task = flat.get("task") or "standup"
    terrain, posture = flat.get("env.terrain", "ground"), flat.get("env.posture", "supine")
    defaults = default_flat_config(task, terrain, posture)
    head = [f"terrain={terrain}"] * (terrain != "ground") + [f"posture={posture}"] * (posture != "supine")
    skip = ("env.terrain", "env.posture", "task", "device")
    before = schema_flat_defaults(task)
    return head + [o for o in recipe_overrides(flat, defaults, before) if parse_override(o)[0] not in skip]


@dataclasses.dataclass
class Run:
    """A training run directory and what it says about itself."""

    path: pathlib.Path
    name: str
    recipe: str
    seed: int | None
    checkpoints: dict[int, pathlib.Path]
    """0-based iteration index -> ``model_<it>.pt``."""
    configs: dict[int, pathlib.Path]
    """Completed iterations a session started from -> ``config_<k>.yaml``."""

    def config_path(self, completed: int) -> pathlib.Path | None:
        """The config of the session that wrote the checkpoint with ``completed`` iterations."""
        if not self.configs:
            return None
        ks = sorted(self.configs)
        return self.configs[max([k for k in ks if k < completed], default=ks[0])]


def open_run(path: str | pathlib.Path) -> Run:
    """Read a run directory written by ``train.py``.

    Raises:
        UsageError: the directory does not exist or holds no ``model_<it>.pt``.
    """
    from omegaconf import OmegaConf

    p = pathlib.Path(path).expanduser()
    if not p.is_dir():
        raise UsageError(f"run directory {p} does not exist")
    ckpts = {it: f for f in p.glob("model_*.pt") if (it := checkpoint_iteration(f)) is not None}
    if not ckpts:
        raise UsageError(f"run directory {p} has no checkpoint model_<iteration>.pt")
    configs = {
        int(m.group(1)): f for f in p.glob("config_*.yaml") if (m := re.fullmatch(r"config_(\d+)\.yaml", f.name))
    }
    recipe, seed = recipe_name_of_run(p.name), None
    meta = p / "recipe.json"  # written by the `run` subcommand
    if meta.is_file():
        try:
            recipe = json.loads(meta.read_text()).get("recipe") or recipe
        except ValueError:
            pass
    if configs:
        seed = OmegaConf.load(configs[min(configs)]).get("seed")
    return Run(p, p.name, recipe, seed, ckpts, configs)


def read_perf_seconds(run_dir: str | pathlib.Path) -> dict[int, float]:
    """Training seconds of each logged iteration from a run's TensorBoard events: 0-based iteration ->
    ``Perf/collection_time`` + ``Perf/learning_time`` (s; the last value logged for a step wins); {} without them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}, purge_orphaned_data=False)
    acc.Reload()
    tags = acc.Tags().get("scalars", [])
    if COLLECTION_TAG not in tags or LEARNING_TAG not in tags:
        return {}
    coll = last_by_step((e.step, e.value) for e in acc.Scalars(COLLECTION_TAG))
    learn = last_by_step((e.step, e.value) for e in acc.Scalars(LEARNING_TAG))
    return {s: coll[s] + learn[s] for s in coll.keys() & learn.keys()}


def training_seconds(run: Run, completed: list[int]) -> dict[int, tuple[float | None, str]]:
    """Training wall clock (s) up to each count of completed iterations and where it came from: ``tensorboard``
    (sum of the Perf scalars), else ``mtime`` (:func:`mtime_seconds`), else (None, ``none``)."""
    tb = cumulative_seconds(read_perf_seconds(run.path), completed)
    ck_mtimes = {it + 1: f.stat().st_mtime for it, f in run.checkpoints.items()}
    mt = mtime_seconds(ck_mtimes, {k: f.stat().st_mtime for k, f in run.configs.items()})
    out = {}
    for n in completed:
        if tb.get(n) is not None:
            out[n] = (tb[n], "tensorboard")
        elif n in mt:
            out[n] = (mt[n], "mtime")
        else:
            out[n] = (None, "none")
    return out
