"""Learning speed of standup recipes: HoST-protocol learning curves of training runs, and the clean cost per
iteration of each recipe (issue 12, part 1). A script, not a test; ``benchmarks/README.md`` and
``docs/standup_learning.md`` say how to use it.

Subcommands::

    python benchmarks/standup_learning.py curve --run-dir logs/standup/A_s1 logs/standup/A_s2 [--every 100]
        [--episodes 100] [--out standup_learning/curve] [--cost standup_learning/cost.json]
    python benchmarks/standup_learning.py cost --recipe host="" --recipe fast="train.critic_shared_trunk=true"
        [--iters 10] [--warmup 2] [--overrides env.num_envs=512 ...] [--out standup_learning/cost]
    python benchmarks/standup_learning.py run --recipe fast="train.critic_shared_trunk=true" --seeds 1 2
        --budget-min 180 [--parallel 1] [--root logs] [curve options]

``curve``: every kept checkpoint ``model_<it>.pt`` of each run directory is evaluated with HoST's protocol exactly as
``python -m upright.training.evaluate --policy <checkpoint>`` does (its
:func:`~upright.training.evaluate.make_eval_env`,
:func:`~upright.training.evaluate.run_episodes` and :func:`~upright.training.evaluate.summarize`): 5 s episodes, domain
randomisation on, no pull force, no observation noise, β = the mean β of the checkpoint's training envs, the
terrain's success criterion (ground supine: pelvis z > 0.7 m, then never < 0.5 m), evaluation seed 0 (the same
start states and randomisation for every checkpoint). The eval env is the task's default for the run's terrain and
posture; of the run's overrides only the actor's layout (``train.actor_hidden_dims``, ``train.obs_normalization``)
is passed on, so that the checkpoint loads. Results are cached per checkpoint and episode count under the output
folder, so a re-run evaluates only new checkpoints.

``cost``: each recipe's env and runner are built from its composed Hydra config as ``train.py`` builds them
(:mod:`upright.training.train_loop`'s functions), then W untimed and K timed PPO iterations run with the recipes
alternating iteration by iteration (order reversed every iteration), so that load drift hits all alike. Collection
and update seconds are rsl-rl's own ``collect_time`` / ``learn_time`` of each iteration (the figures TensorBoard
logs as ``Perf/collection_time`` / ``Perf/learning_time``). Checkpoint saves are skipped (no files but TensorBoard
events in a temporary folder).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import pathlib
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import CpuMeter, cpu_model

REPO = pathlib.Path(__file__).resolve().parents[1]

COLLECTION_TAG = "Perf/collection_time"
"""TensorBoard scalar rsl-rl-lib 5.x writes per iteration (step = 0-based iteration): rollout seconds."""
LEARNING_TAG = "Perf/learning_time"
"""TensorBoard scalar rsl-rl-lib 5.x writes per iteration: returns + PPO update seconds."""

CACHE_VERSION = 1
"""Bumped when the cached record or the evaluation protocol changes (older cache files are re-evaluated)."""

ACTOR_KEYS = ("train.actor_hidden_dims", "train.obs_normalization")
"""Run overrides passed on to the evaluation: the actor's layout, which ``model_<it>.pt`` must fit to load."""

NOT_RECIPE = ("run.", "resume", "seed", "train.max_iterations", "train.save_interval")
"""Config keys (prefixes) that are no part of a recipe: where a run writes, its seed, its length, its save cadence."""

RECIPES: dict[str, str] = {
    "default": "",
    "shared_trunk": "train.critic_shared_trunk=true",
    "shared_bf16": "train.critic_shared_trunk=true train.use_mixed_precision=true",
}
"""Named recipes ``--recipe NAME`` accepts without ``=``: Hydra overrides on ``task=standup``'s defaults.
``default`` is whatever the defaults are today."""

SEED_SUFFIX = re.compile(r"[_-]s(?:eed)?\d+$")


class UsageError(Exception):
    """Bad input; ``main`` prints the message on one line and exits with status 2."""


# ----------------------------------------------------------------------------------------------- helpers (pure)
def parse_recipe(spec: str) -> tuple[str, list[str]]:
    """``NAME=OVERRIDES`` (shell-quoted overrides, may be empty) or a name of :data:`RECIPES` -> (name, overrides).

    Raises:
        UsageError: no ``=`` and not a named recipe, or an empty name.
    """
    if "=" in spec:
        name, overrides = spec.split("=", 1)
    elif spec in RECIPES:
        name, overrides = spec, RECIPES[spec]
    else:
        raise UsageError(f"unknown recipe '{spec}': give NAME=\"overrides\" or one of {', '.join(RECIPES)}")
    if not name or not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
        raise UsageError(f"recipe '{spec}': the name must be letters, digits, '_', '.', '+' or '-'")
    return name, shlex.split(overrides)


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


def recipe_overrides(config: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """The overrides that turn ``defaults`` into ``config`` (both flat, :func:`flatten`), keys that are no part of a
    recipe (:data:`NOT_RECIPE`) left out, sorted: the run's recipe as ``key=value`` strings. Keys the defaults lack
    (removed since the run) are kept."""
    out = []
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


# ----------------------------------------------------------------------------------------------- cache
@dataclasses.dataclass(frozen=True)
class EvalSettings:
    """What an evaluation depends on besides the checkpoint (part of the cache key)."""

    episodes: int
    seed: int = 0
    num_envs: int = 100
    episode_length_s: float = 5.0
    overrides: tuple[str, ...] = ()


class Cache:
    """Evaluation results per checkpoint, one JSON file each: ``<root>/<run name>-<hash of its path>/
    model_<it>.e<episodes>-<hash of the settings>.json``. A file is used only when its key (checkpoint size and
    mtime, the settings, :data:`CACHE_VERSION`) matches; else the checkpoint is evaluated again and the file
    replaced."""

    def __init__(self, root: str | pathlib.Path):
        self.root = pathlib.Path(root)

    def path(self, checkpoint: pathlib.Path, settings: EvalSettings) -> pathlib.Path:
        run = checkpoint.resolve().parent
        tag = hashlib.sha1(str(run).encode()).hexdigest()[:8]
        setting = hashlib.sha1(json.dumps(dataclasses.asdict(settings), sort_keys=True).encode()).hexdigest()[:6]
        return self.root / f"{run.name}-{tag}" / f"{checkpoint.stem}.e{settings.episodes}-{setting}.json"

    @staticmethod
    def key(checkpoint: pathlib.Path, settings: EvalSettings) -> dict[str, Any]:
        st = checkpoint.stat()
        settings_dict = dataclasses.asdict(settings) | {"overrides": list(settings.overrides)}
        return {"version": CACHE_VERSION, "checkpoint": checkpoint.name, "size": st.st_size,
                "mtime_ns": st.st_mtime_ns, **settings_dict}  # fmt: skip

    def load(self, checkpoint: pathlib.Path, settings: EvalSettings) -> dict[str, Any] | None:
        """The cached record of ``checkpoint`` under ``settings``, or None (absent, stale or unreadable)."""
        p = self.path(checkpoint, settings)
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            return None
        return data.get("result") if data.get("key") == self.key(checkpoint, settings) else None

    def store(self, checkpoint: pathlib.Path, settings: EvalSettings, result: dict[str, Any]) -> pathlib.Path:
        p = self.path(checkpoint, settings)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": self.key(checkpoint, settings), "result": result}, indent=1))
        tmp.replace(p)
        return p


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


def run_recipe(flat: dict[str, Any]) -> list[str]:
    """The recipe of a run config (flat): ``terrain=``/``posture=`` when not ground/supine, then its overrides
    against those defaults (:func:`recipe_overrides`)."""
    task = flat.get("task") or "standup"
    terrain, posture = flat.get("env.terrain", "ground"), flat.get("env.posture", "supine")
    defaults = default_flat_config(task, terrain, posture)
    head = [f"terrain={terrain}"] * (terrain != "ground") + [f"posture={posture}"] * (posture != "supine")
    skip = ("env.terrain", "env.posture", "task", "device")
    return head + [o for o in recipe_overrides(flat, defaults) if parse_override(o)[0] not in skip]


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


# ----------------------------------------------------------------------------------------------- evaluation
def evaluate_checkpoint(checkpoint: pathlib.Path, run_flat: dict[str, Any], settings: EvalSettings) -> dict[str, Any]:
    """Evaluate one checkpoint with HoST's protocol (``upright/training/evaluate.py``'s env builder, episodes and
    metrics).

    Returns:
        a record: ``E_succ`` (%), ``E_feet`` (cm²/step), ``E_smth``, ``E_engy`` (kJ), ``peak_height`` (mean peak
        pelvis z, m), ``final_head_height`` (mean final head height above the feet, m), ``beta``, ``episodes``,
        ``completed_iterations``, ``env_steps``, ``eval_seconds``.

    Raises:
        PolicyLoadError / RuntimeError: the checkpoint cannot be read (e.g. still being written).
    """
    import torch

    from upright.training import evaluate

    data = torch.load(checkpoint, weights_only=False, map_location="cpu")
    infos = data.get("infos") or {}
    completed = int(infos.get("completed_iterations", data["iter"] + 1))
    env_steps = infos.get("env_step_counter")
    if env_steps is None:
        env_steps = completed * int(run_flat.get("env.num_envs", 0)) * int(run_flat.get("train.num_steps_per_env", 0))
    del data
    actor = [f"{k}={format_value(run_flat[k])}" for k in ACTOR_KEYS if k in run_flat]
    start = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()):
        env, policy, beta, _ = evaluate.make_eval_env(
            str(checkpoint), task=run_flat.get("task") or "standup", terrain=run_flat.get("env.terrain", "ground"),
            posture=run_flat.get("env.posture", "supine"), overrides=[*actor, *settings.overrides],
            num_envs=min(settings.num_envs, settings.episodes), episode_length_s=settings.episode_length_s,
            seed=settings.seed,
        )  # fmt: skip
    torch.set_num_threads(1)  # as the evaluate CLI
    try:
        summary = evaluate.summarize(evaluate.run_episodes(env, policy, settings.episodes))
    finally:
        env.close()
    return {
        **{k: summary[k] for k in (*evaluate.METRICS, evaluate.PEAK, evaluate.FINAL_HEAD)},
        "beta": beta,
        "episodes": settings.episodes,
        "completed_iterations": completed,
        "env_steps": int(env_steps),
        "eval_seconds": time.monotonic() - start,
    }


CSV_FIELDS = (
    "run", "recipe", "seed", "checkpoint", "iterations", "env_steps", "wall_clock_s", "wall_clock_source",
    "clean_wall_clock_s", "episodes", "beta", "E_succ", "peak_height", "final_head_height", "E_feet", "E_smth",
    "E_engy", "overrides", "run_dir",
)  # fmt: skip
"""Columns of ``curve``'s CSV: ``iterations`` = completed PPO iterations of ``checkpoint`` (``model_<it>.pt`` holds
it + 1), ``wall_clock_s`` = training seconds up to it, ``clean_wall_clock_s`` = iterations x the recipe's clean cost
per iteration (``--cost``), E_succ in %, heights in m, ``overrides`` = the run's recipe against today's defaults."""


def load_costs(path: str | pathlib.Path | None) -> list[dict[str, Any]]:
    """The recipes of a ``cost --out`` JSON file ([] without one).

    Raises:
        UsageError: the file is missing or not a cost report.
    """
    if not path:
        return []
    p = pathlib.Path(path)
    try:
        return list(json.loads(p.read_text())["recipes"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"--cost {p}: not a JSON report written by `cost --out`") from None


def match_cost(costs: list[dict[str, Any]], recipe: str, overrides: list[str]) -> dict[str, Any] | None:
    """The cost entry of a run: the one with the same recipe overrides, else the one with the same name."""
    for c in costs:
        if sorted(c.get("recipe_overrides", [])) == sorted(overrides):
            return c
    return next((c for c in costs if c.get("name") == recipe), None)


def curve_rows(runs: list[Run], every: int | None, settings: EvalSettings, cache: Cache, refresh: bool = False,
               costs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Evaluate (or read from the cache) the kept checkpoints of each run; one row per point (:data:`CSV_FIELDS`)."""
    from omegaconf import OmegaConf

    rows = []
    for run in runs:
        kept = select_checkpoints(run.checkpoints, every)
        points = []
        for it in kept:
            ckpt = run.checkpoints[it]
            cfg_path = run.config_path(it + 1)
            flat = flat_config(OmegaConf.load(cfg_path)) if cfg_path else {}
            result = None if refresh else cache.load(ckpt, settings)
            tag = "cached"
            if result is None:
                print(f"[{run.name}] {ckpt.name}: evaluating {settings.episodes} episodes ...", flush=True)
                try:
                    result = evaluate_checkpoint(ckpt, flat, settings)
                except Exception as err:  # noqa: BLE001  e.g. a checkpoint still being written by the training run
                    print(f"[{run.name}] {ckpt.name}: skipped ({type(err).__name__}: {str(err)[:200]})", flush=True)
                    continue
                cache.store(ckpt, settings, result)
                tag = f"{result['eval_seconds']:.0f} s"
            print(
                f"[{run.name}] {ckpt.name}: E_succ {result['E_succ']:.1f} %, "
                f"peak pelvis {result['peak_height']:.3f} m, "
                f"final head {result['final_head_height']:.3f} m ({tag})",
                flush=True,
            )
            points.append((ckpt, flat, result))
        seconds = training_seconds(run, [r["completed_iterations"] for _, _, r in points])
        for ckpt, flat, r in points:
            n = r["completed_iterations"]
            overrides = run_recipe(flat) if flat else []
            cost = match_cost(costs or [], run.recipe, overrides)
            wall, source = seconds[n]
            rows.append({
                "run": run.name, "recipe": run.recipe, "seed": flat.get("seed", run.seed), "checkpoint": ckpt.name,
                "iterations": n, "env_steps": r["env_steps"], "wall_clock_s": wall, "wall_clock_source": source,
                "clean_wall_clock_s": n * cost["iteration_s"] if cost else None, "episodes": r["episodes"],
                "beta": r["beta"], **{k: r[k] for k in ("E_succ", "peak_height", "final_head_height", "E_feet",
                                                         "E_smth", "E_engy")},
                "overrides": " ".join(overrides), "run_dir": str(run.path),
            })  # fmt: skip
    return rows


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def _hms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def curve_markdown(rows: list[dict[str, Any]], settings: EvalSettings) -> str:
    """The points as a Markdown table, with the protocol and each recipe's overrides under it."""
    episodes = sorted({r["episodes"] for r in rows})
    lines = [
        f"HoST evaluation protocol (`upright.training.evaluate`): {'/'.join(map(str, episodes))} episodes per point, "
        f"{settings.episode_length_s:g} s episodes, domain randomisation on, no pull force, no observation noise, "
        f"β = the checkpoint's mean training β, evaluation seed {settings.seed}"
        + (f", extra overrides `{' '.join(settings.overrides)}`" if settings.overrides else "")
        + ". "
        "Wall clock = training seconds up to the checkpoint (TensorBoard `Perf/collection_time` + "
        "`Perf/learning_time`, or checkpoint file times where marked `mtime`); clean = iterations x the recipe's "
        "cost per iteration measured by `cost` on an idle CPU.",
        "",
        "| run | recipe | seed | iterations | env steps | wall clock | clean wall clock | episodes | β | E_succ (%) "
        "| peak pelvis (m) | final head (m) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        wall = _hms(r["wall_clock_s"]) + (
            f" ({r['wall_clock_source']})" if r["wall_clock_source"] != "tensorboard" else ""
        )
        lines.append(
            f"| {r['run']} | {r['recipe']} | {r['seed']} | {r['iterations']} | {r['env_steps']:.3g} | {wall} | "
            f"{_hms(r['clean_wall_clock_s'])} | {r['episodes']} | {_fmt(r['beta'], 2)} | {_fmt(r['E_succ'], 1)} | "
            f"{_fmt(r['peak_height'])} | {_fmt(r['final_head_height'])} |"
        )
    lines += ["", "Recipes (overrides against today's defaults of `task=standup`):", ""]
    seen: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        seen.setdefault((r["recipe"], r["overrides"]), [])
        if r["run"] not in seen[(r["recipe"], r["overrides"])]:
            seen[(r["recipe"], r["overrides"])].append(r["run"])
    for (recipe, overrides), run_names in seen.items():
        lines.append(f"- **{recipe}** ({', '.join(run_names)}): `{overrides or '(defaults)'}`")
    return "\n".join(lines) + "\n"


def plot_curves(rows: list[dict[str, Any]], out: pathlib.Path) -> None:
    """PNG: E_succ, mean peak pelvis height and mean final head height (rows) against training wall clock, clean
    wall clock (when any row has it), env steps and iterations (columns); one line per run, one colour per recipe."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [("wall_clock_s", "training wall clock (h)", 1 / 3600)]
    if any(r["clean_wall_clock_s"] is not None for r in rows):
        xs.append(("clean_wall_clock_s", "clean wall clock (h)", 1 / 3600))
    xs += [("env_steps", "env steps", 1.0), ("iterations", "PPO iterations", 1.0)]
    ys = [
        ("E_succ", "E_succ (%)"),
        ("peak_height", "mean peak pelvis z (m)"),
        ("final_head_height", "mean final head (m)"),
    ]
    recipes = list(dict.fromkeys(r["recipe"] for r in rows))
    colours = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(recipes)}
    styles = ("-", "--", ":", "-.")
    fig, axes = plt.subplots(len(ys), len(xs), figsize=(3.6 * len(xs), 2.6 * len(ys)), squeeze=False)
    runs = list(dict.fromkeys(r["run"] for r in rows))
    for run in runs:
        pts = sorted((r for r in rows if r["run"] == run), key=lambda r: r["iterations"])
        recipe = pts[0]["recipe"]
        k = [r["run"] for r in rows if r["recipe"] == recipe]
        style = styles[list(dict.fromkeys(k)).index(run) % len(styles)]
        for a, (ykey, _) in enumerate(ys):
            for b, (xkey, _, scale) in enumerate(xs):
                xy = [(r[xkey] * scale, r[ykey]) for r in pts if r[xkey] is not None and r[ykey] is not None]
                if xy:
                    axes[a][b].plot(
                        *zip(*xy), style, marker="o", ms=3, lw=1.2, color=colours[recipe], label=f"{run} ({recipe})"
                    )
    for a, (_, ylabel) in enumerate(ys):
        axes[a][0].set_ylabel(ylabel, fontsize=8)
        for b, (_, xlabel, _) in enumerate(xs):
            ax = axes[a][b]
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
            if a == len(ys) - 1:
                ax.set_xlabel(xlabel, fontsize=8)
    for b in range(len(xs)):
        lo, hi = axes[0][b].get_ylim()
        axes[0][b].set_ylim(min(lo, -1.0), max(hi, 5.0))  # E_succ: keep 0 % visible as a floor
    handles, labels = axes[0][0].get_legend_handles_labels()
    rows_legend = math.ceil(len(labels) / 4) if labels else 0
    top = 1 - (0.35 + 0.18 * rows_legend) / fig.get_figheight()
    if handles:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.3 / fig.get_figheight()),
                   ncol=min(4, len(labels)), fontsize=7, frameon=False)  # fmt: skip
    episodes = "/".join(map(str, sorted({r["episodes"] for r in rows})))
    fig.suptitle(f"standup learning curves, HoST protocol, {episodes} episodes per point", fontsize=9, y=0.995)
    fig.tight_layout(rect=(0, 0, 1, top))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def write_curve(rows: list[dict[str, Any]], settings: EvalSettings, prefix: pathlib.Path) -> None:
    """Write ``<prefix>.csv``, ``<prefix>.md`` and ``<prefix>.png``."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(prefix.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        w.writerows({k: ("" if r[k] is None else r[k]) for k in CSV_FIELDS} for r in rows)
    md = curve_markdown(rows, settings)
    prefix.with_suffix(".md").write_text(md)
    plot_curves(rows, prefix.with_suffix(".png"))
    print(md)
    print(f"wrote {prefix}.csv, {prefix}.md and {prefix}.png")


def cmd_curve(args: argparse.Namespace) -> None:
    if args.episodes <= 0:
        raise UsageError(f"--episodes must be positive, got {args.episodes}")
    runs = [open_run(d) for d in args.run_dir]
    prefix = pathlib.Path(args.out)
    cache = Cache(args.cache or prefix.parent / "cache")
    settings = EvalSettings(
        episodes=args.episodes, seed=args.seed, num_envs=args.num_envs, overrides=tuple(args.eval_overrides)
    )
    if args.eval_overrides:
        compose_config(list(args.eval_overrides))  # one-line error before any work
    rows = curve_rows(runs, args.every, settings, cache, refresh=args.refresh, costs=load_costs(args.cost))
    if not rows:
        raise UsageError("no checkpoint could be evaluated")
    write_curve(rows, settings, prefix)


# ----------------------------------------------------------------------------------------------- cost
@dataclasses.dataclass
class Recipe:
    """A recipe under ``cost``: its env, runner and the timings of its iterations."""

    name: str
    overrides: list[str]
    cfg: Any
    env: Any = None
    runner: Any = None
    collection: list[float] = dataclasses.field(default_factory=list)
    update: list[float] = dataclasses.field(default_factory=list)
    first: bool = True


def build_recipe(recipe: Recipe, log_root: pathlib.Path) -> None:
    """Env and runner from the composed config, as :func:`upright.training.train_loop.train` builds them (seeded
    the same way; a fresh run, rank 0), with checkpoint saves turned off and each iteration's rsl-rl
    ``collect_time`` / ``learn_time`` recorded."""
    from upright.tasks.registry import make_env, policy_metadata
    from upright.training.rsl_rl_cfg import rsl_rl_config
    from upright.training.runner import UprightRunner
    from upright.training.train_loop import seed_everything

    cfg = recipe.cfg
    seed_everything(cfg.seed)
    run_dir = log_root / recipe.name
    run_dir.mkdir(parents=True, exist_ok=True)
    env = make_env(cfg.task_name, cfg.env, cfg.sim, device=cfg.device, seed=cfg.seed)
    meta = policy_metadata(cfg.task_name, env) | {"run_path": str(run_dir)}
    with contextlib.redirect_stdout(io.StringIO()):
        runner = UprightRunner(env, rsl_rl_config(cfg.train), log_dir=str(run_dir), device=cfg.device,
                               onnx_metadata=meta, update_threads=cfg.train.update_threads)  # fmt: skip
    runner.save = lambda *a, **k: None  # no checkpoint/ONNX files: this measures iterations, not saves
    log = runner.logger.log

    def record(**kw):
        recipe.collection.append(float(kw["collect_time"]))
        recipe.update.append(float(kw["learn_time"]))
        return log(**kw)

    runner.logger.log = record
    recipe.env, recipe.runner = env, runner


def one_iteration(recipe: Recipe) -> tuple[float, float]:
    """Run one PPO iteration of the recipe's runner (``learn_until`` one more); return (collection s, update s)."""
    runner = recipe.runner
    if runner.logger.writer is not None:  # learn() opens a new writer per call
        runner.logger.writer.close()
    with contextlib.redirect_stdout(io.StringIO()):
        runner.learn_until(
            runner.completed_iterations + 1,
            init_at_random_ep_len=recipe.first and bool(recipe.cfg.train.init_at_random_ep_len),
        )
    recipe.first = False
    return recipe.collection[-1], recipe.update[-1]


def cost_report(
    recipes: list[Recipe], warmup: int, iters: int, load_before, load_after, others: float
) -> tuple[str, dict]:
    """Markdown report and JSON record of the timed iterations (medians; ratios to the first recipe)."""
    import torch

    cpus = os.cpu_count() or 1
    entries = []
    for r in recipes:
        n_env, steps = int(r.cfg.env.num_envs), int(r.cfg.train.num_steps_per_env)
        coll, upd = r.collection[warmup:], r.update[warmup:]
        total = [c + u for c, u in zip(coll, upd)]
        entries.append({
            "name": r.name, "overrides": r.overrides, "recipe_overrides": run_recipe(flat_config(r.cfg)),
            "num_envs": n_env, "num_steps_per_env": steps, "collection_s": statistics.median(coll),
            "update_s": statistics.median(upd), "iteration_s": statistics.median(total),
            "env_steps_per_s": n_env * steps / statistics.median(total), "collection_all_s": coll, "update_all_s": upd,
        })  # fmt: skip
    base = entries[0]
    for e in entries:
        e["ratio_to_first"] = e["iteration_s"] / base["iteration_s"]
    idle = load_before[0] < 0.25 * cpus and others < 0.10
    lines = [
        f"Cost per PPO iteration, {iters} timed after {warmup} untimed iterations per recipe, recipes alternating "
        f"(order reversed every iteration); medians. Machine: {cpus} CPUs, {cpu_model()}, torch {torch.__version__}; "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}.",
        f"Load average (1/5/15 min) before: {'/'.join(f'{x:.2f}' for x in load_before)}, after: "
        f"{'/'.join(f'{x:.2f}' for x in load_after)}; other processes' share of all CPUs during the timed "
        f"iterations: {100 * others:.0f} %. CPU "
        + ("idle." if idle else "NOT idle: timings are inflated, re-run on an idle machine."),
        "",
        f"| recipe | overrides | envs x steps | collection (s/it) | update (s/it) | iteration (s/it) | env-steps/s "
        f"| ratio to {base['name']} |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for e in entries:
        lines.append(
            f"| {e['name']} | `{' '.join(e['overrides']) or '(defaults)'}` | "
            f"{e['num_envs']} x {e['num_steps_per_env']} | "
            f"{e['collection_s']:.2f} | {e['update_s']:.2f} | {e['iteration_s']:.2f} | {e['env_steps_per_s']:,.0f} | "
            f"{e['ratio_to_first']:.3f} |"
        )
    lines += ["", "All timed iterations (collection + update, s):", ""]
    for e in entries:
        pairs = zip(e["collection_all_s"], e["update_all_s"])
        lines.append(f"- {e['name']}: " + ", ".join(f"{c:.2f}+{u:.2f}" for c, u in pairs))
    record = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "warmup": warmup,
        "iters": iters,
        "cpus": cpus,
        "loadavg_before": list(load_before),
        "loadavg_after": list(load_after),
        "others_cpu_share": others,
        "idle": idle,
        "recipes": entries,
    }
    return "\n".join(lines) + "\n", record


def parse_recipes(specs: list[str] | None, common: list[str]) -> list[tuple[str, list[str]]]:
    """``--recipe`` specs (or one ``default`` recipe) -> [(name, overrides + common)].

    Raises:
        UsageError: an unknown recipe or a repeated name.
    """
    parsed = [parse_recipe(s) for s in (specs or ["default"])]
    names = [n for n, _ in parsed]
    if len(set(names)) != len(names):
        raise UsageError(f"recipe names must differ, got {', '.join(names)}")
    return [(n, o + list(common)) for n, o in parsed]


def cmd_cost(args: argparse.Namespace) -> None:
    if args.iters < 1 or args.warmup < 0:
        raise UsageError(f"--iters must be >= 1 and --warmup >= 0, got {args.iters} and {args.warmup}")
    recipes = [Recipe(n, o, compose_config(o)) for n, o in parse_recipes(args.recipe, args.overrides)]
    load_before = os.getloadavg()
    print(f"load average before: {'/'.join(f'{x:.2f}' for x in load_before)} ({os.cpu_count()} CPUs)", flush=True)
    with tempfile.TemporaryDirectory(prefix="standup_cost_") as tmp:
        for r in recipes:
            t0 = time.monotonic()
            build_recipe(r, pathlib.Path(tmp))
            print(
                f"[{r.name}] built in {time.monotonic() - t0:.0f} s: {r.cfg.env.num_envs} envs, "
                f"overrides {' '.join(r.overrides) or '(defaults)'}",
                flush=True,
            )
        meter = CpuMeter().start()
        for i in range(args.warmup + args.iters):
            order = recipes if i % 2 == 0 else recipes[::-1]
            if i == args.warmup:
                meter.start()
            for r in order:
                c, u = one_iteration(r)
                kind = "warm-up" if i < args.warmup else "timed"
                print(
                    f"[{r.name}] {kind} {i + 1}/{args.warmup + args.iters}: collection {c:.2f} s, update {u:.2f} s",
                    flush=True,
                )
        others = meter.stop()
        for r in recipes:
            if r.runner.logger.writer is not None:
                r.runner.logger.writer.close()
            r.env.close()
    load_after = os.getloadavg()
    print(f"load average after: {'/'.join(f'{x:.2f}' for x in load_after)}", flush=True)
    md, record = cost_report(recipes, args.warmup, args.iters, load_before, load_after, max(0.0, others))
    record["torch_threads_update"] = [int(r.cfg.train.update_threads) for r in recipes]
    print(md)
    if args.out:
        prefix = pathlib.Path(args.out)
        prefix.parent.mkdir(parents=True, exist_ok=True)
        prefix.with_suffix(".md").write_text(md)
        prefix.with_suffix(".json").write_text(json.dumps(record, indent=1))
        print(f"wrote {prefix}.md and {prefix}.json")


# ----------------------------------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> None:
    if args.budget_min <= 0:
        raise UsageError(f"--budget-min must be positive, got {args.budget_min}")
    if not args.recipe:
        raise UsageError('give at least one --recipe NAME="overrides" (or a named recipe)')
    root = pathlib.Path(args.root).resolve()
    jobs = []
    for name, overrides in parse_recipes(args.recipe, args.overrides):
        for seed in args.seeds:
            run_name = f"{name}_s{seed}"
            full = [*overrides, f"seed={seed}", f"run.name={run_name}", f"run.root={root}"]
            cfg = compose_config(full)
            run_dir = root / cfg.task_name / run_name
            if any(run_dir.glob("model_*.pt")):
                raise UsageError(f"run directory {run_dir} already has checkpoints; choose another recipe name or root")
            jobs.append((name, seed, run_dir, full))
    for name, seed, run_dir, full in jobs:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "recipe.json").write_text(
            json.dumps({"recipe": name, "seed": seed, "overrides": full[:-3], "budget_min": args.budget_min}, indent=1)
        )
    pending, running, done = list(jobs), [], []
    budget = args.budget_min * 60.0

    def launch(job):
        name, seed, run_dir, full = job
        cmd = ["nice", "-n", str(args.nice), sys.executable, str(REPO / "train.py"), *full]
        log = open(run_dir / "train.log", "a")
        print(
            f"start {run_dir.name}: {shlex.join(cmd)} (budget {args.budget_min:g} min, log {run_dir / 'train.log'})",
            flush=True,
        )
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO))
        return {"job": job, "proc": proc, "log": log, "start": time.monotonic(), "term": None}

    def stop(item, why: str):
        if item["term"] is None and item["proc"].poll() is None:
            print(f"stop {item['job'][2].name}: {why}; SIGTERM (train.py saves a checkpoint)", flush=True)
            item["proc"].send_signal(signal.SIGTERM)
            item["term"] = time.monotonic()

    try:
        while pending or running:
            while pending and len(running) < args.parallel:
                running.append(launch(pending.pop(0)))
            time.sleep(2.0)
            for item in list(running):
                if time.monotonic() - item["start"] >= budget:
                    stop(item, f"budget of {args.budget_min:g} min reached")
                if item["term"] is not None and item["proc"].poll() is None and time.monotonic() - item["term"] > 600:
                    print(f"kill {item['job'][2].name}: no exit 10 min after SIGTERM", flush=True)
                    item["proc"].kill()
                if item["proc"].poll() is not None:
                    item["log"].close()
                    print(f"done {item['job'][2].name}: exit status {item['proc'].returncode}", flush=True)
                    running.remove(item)
                    done.append(item["job"])
    except KeyboardInterrupt:
        for item in running:
            stop(item, "interrupted")
        for item in running:
            item["proc"].wait()
        raise
    dirs = [str(run_dir) for _, _, run_dir, _ in done if any(run_dir.glob("model_*.pt"))]
    if not dirs:
        raise UsageError("no run wrote a checkpoint (see train.log in the run directories)")
    args.run_dir = dirs
    cmd_curve(args)


# ----------------------------------------------------------------------------------------------- CLI
def _curve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--every",
        type=int,
        default=None,
        metavar="K",
        help="evaluate checkpoints at least K iterations apart (first and last always); default: all",
    )
    p.add_argument("--episodes", type=int, default=100, help="HoST-protocol episodes per point (default 100)")
    p.add_argument("--num-envs", type=int, default=100, help="evaluation envs per wave (default 100, as evaluate)")
    p.add_argument("--seed", type=int, default=0, help="evaluation seed (default 0, as evaluate)")
    p.add_argument(
        "--eval-overrides",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="extra overrides of the evaluation env, e.g. sim.num_threads=1 (part of the cache key)",
    )
    p.add_argument(
        "--out",
        default="standup_learning/curve",
        metavar="PREFIX",
        help="writes PREFIX.csv, PREFIX.md, PREFIX.png (default standup_learning/curve)",
    )
    p.add_argument("--cache", default=None, metavar="DIR", help="cache folder (default: PREFIX's folder/cache)")
    p.add_argument("--refresh", action="store_true", help="evaluate again even where a cached result exists")
    p.add_argument(
        "--cost",
        default=None,
        metavar="JSON",
        help="a `cost --out` JSON: adds the clean wall clock (iterations x the recipe's cost per iteration)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    curve = sub.add_parser("curve", help="HoST-protocol learning curves of training runs")
    curve.add_argument("--run-dir", nargs="+", required=True, metavar="DIR", help="run directories of train.py")
    _curve_options(curve)
    cost = sub.add_parser("cost", help="clean cost per PPO iteration of recipes (collection and update)")
    cost.add_argument(
        "--recipe",
        action="append",
        metavar='NAME="OVERRIDES"',
        help=f"a recipe (repeatable); named ones: {', '.join(RECIPES)}; default: one 'default' recipe",
    )
    cost.add_argument("--overrides", nargs="*", default=[], metavar="KEY=VALUE", help="overrides added to every recipe")
    cost.add_argument("--iters", type=int, default=10, help="timed iterations per recipe (default 10)")
    cost.add_argument("--warmup", type=int, default=2, help="untimed iterations per recipe first (default 2)")
    cost.add_argument("--out", default=None, metavar="PREFIX", help="also write PREFIX.md and PREFIX.json")
    run = sub.add_parser("run", help="train recipes for a wall-clock budget each, then `curve` them")
    run.add_argument("--recipe", action="append", metavar='NAME="OVERRIDES"', help="a recipe (repeatable)")
    run.add_argument("--overrides", nargs="*", default=[], metavar="KEY=VALUE", help="overrides added to every recipe")
    run.add_argument("--seeds", type=int, nargs="+", default=[1], help="seeds per recipe (default 1)")
    run.add_argument("--budget-min", type=float, required=True, help="wall clock per run, minutes (SIGTERM then)")
    run.add_argument("--parallel", type=int, default=1, help="runs at once (default 1; they share the CPU)")
    run.add_argument(
        "--root", default="logs", help="run.root of the runs (default logs): <root>/standup/<name>_s<seed>"
    )
    run.add_argument("--nice", type=int, default=0, help="nice level of the training processes")
    _curve_options(run)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        {"curve": cmd_curve, "cost": cmd_cost, "run": cmd_run}[args.command](args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
