"""Learning speed of standup recipes: HoST-protocol learning curves of training runs, and the clean cost per
iteration of each recipe (issue 12, part 1). A script, not a test; ``benchmarks/README.md`` and
``docs/standup_learning.md`` say how to use it.

Subcommands::

    python benchmarks/standup_learning.py curve --run-dir logs/standup/A_s1 logs/standup/A_s2 [--every 100]
        [--episodes 100] [--out standup_learning/curve] [--cost standup_learning/cost.json]
    python benchmarks/standup_learning.py cost --recipe host="recipe=host"
        --recipe fast="recipe=host train.critic_shared_trunk=true"
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

Layout: this script holds the recipes, the ``cost`` and ``run`` subcommands and the CLI; reading run directories
(checkpoints, configs, training seconds, recipes of runs) is in ``learning_runs.py``, the ``curve`` evaluation, its
cache and its CSV/Markdown/PNG report in ``learning_report.py`` (sibling modules, imported by name).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
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
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from learning_report import Cache, EvalSettings, curve_rows, load_costs, write_curve
from learning_runs import (  # noqa: F401  also re-exports what tests/test_standup_learning.py and lift_learning.py import
    COLLECTION_TAG,
    LEARNING_TAG,
    UsageError,
    compose_config,
    cumulative_seconds,
    flat_config,
    flatten,
    format_value,
    last_by_step,
    mtime_seconds,
    open_run,
    read_perf_seconds,
    recipe_overrides,
    run_recipe,
    select_checkpoints,
)
from machine import CpuMeter, cpu_model

REPO = pathlib.Path(__file__).resolve().parents[1]

RECIPES: dict[str, str] = {
    "default": "",
    "shared_trunk": "train.critic_shared_trunk=true",
    "shared_bf16": "train.critic_shared_trunk=true train.use_mixed_precision=true",
}
"""Named recipes ``--recipe NAME`` accepts without ``=``: Hydra overrides on ``task=standup``'s defaults.
``default`` is whatever the defaults are today."""


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


# ----------------------------------------------------------------------------------------------- curve
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
