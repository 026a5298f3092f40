"""The evaluation and report half of ``benchmarks/standup_learning.py curve``: each checkpoint evaluated with
HoST's protocol (:func:`evaluate_checkpoint`), the per-checkpoint result cache (:class:`EvalSettings`,
:class:`Cache`), the curve's rows (:func:`curve_rows`, with the clean wall clock of a ``cost --out`` report) and their
outputs: the CSV (:data:`CSV_FIELDS`), the Markdown table and the PNG plot (:func:`write_curve`).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import math
import pathlib
import time
from typing import Any

from learning_runs import (
    Run,
    UsageError,
    flat_config,
    format_value,
    run_recipe,
    select_checkpoints,
    training_seconds,
)

CACHE_VERSION = 1
"""Bumped when the cached record or the evaluation protocol changes (older cache files are re-evaluated)."""

ACTOR_KEYS = ("train.actor_hidden_dims", "train.obs_normalization")
"""Run overrides passed on to the evaluation: the actor's layout, which ``model_<it>.pt`` must fit to load."""


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
