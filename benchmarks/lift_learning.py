"""Learning curve of lift training runs (issue 14): success against wall clock, env steps and iterations.

    python benchmarks/lift_learning.py --run-dir logs/lift/<run> [<run> ...] --every 50 --episodes 100 \\
        --out docs/lift_learning/<name>

Each checkpoint ``model_<it>.pt`` (every ``--every`` iterations, and the last) is evaluated with the lift protocol
of :mod:`upright.training.lift_evaluate` (full reset ranges, curriculum off, domain randomisation on, ``--episodes``
episodes, seed ``--seed``). A checkpoint ``model_<it>.pt`` holds ``it`` completed iterations, so its env steps are
``it x env.num_envs x train.num_steps_per_env`` (from the run's ``config_*.yaml``). Wall clock is the run's own
training time: the sum of rsl-rl's ``Perf/collection_time`` + ``Perf/learning_time`` TensorBoard scalars over the
completed iterations (so it is the time the run took on whatever CPU it had: say in the notes whether it was shared).
Residual runs (``policy.base=...``, issue 15) are evaluated from their ``policy_<it>.onnx`` snapshots
(``train.onnx_snapshots=true``) with the frozen base beside them
(:func:`upright.vla.evaluate_lift.evaluate_chunk_policy`). Writes ``<out>.csv``, ``<out>.md`` and ``<out>.png``;
evaluations are cached beside each checkpoint (``<checkpoint stem>.eval<episodes>_s<seed>.json``).
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import re
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from standup_learning import cumulative_seconds, read_perf_seconds


def is_residual(run: pathlib.Path) -> bool:
    """Whether ``run`` is a residual run on a frozen VLA base (``python train.py task=lift policy.base=...``)."""
    return (run / "base_checksum.json").is_file()


def checkpoints(run: pathlib.Path, every: int) -> list[tuple[int, pathlib.Path]]:
    """(iteration, path) of the run's checkpoints to evaluate: multiples of ``every`` and the last one. A residual
    run's points are its ``policy_<it>.onnx`` snapshots (``train.onnx_snapshots=true``), evaluated with their base."""
    pattern = r"policy_(\d+)\.onnx" if is_residual(run) else r"model_(\d+)\.pt"
    found = sorted((int(m.group(1)), p) for p in run.iterdir() if (m := re.fullmatch(pattern, p.name)))
    if not found:
        what = (
            "policy_<it>.onnx snapshots (train with train.onnx_snapshots=true)"
            if is_residual(run)
            else ("model_<it>.pt checkpoints; train with python train.py task=lift")
        )
        raise FileNotFoundError(f"{run} has no {what}")
    keep = [(i, p) for i, p in found if every <= 0 or i % every == 0]
    if keep[-1][0] != found[-1][0]:
        keep.append(found[-1])
    return keep


def run_config(run: pathlib.Path) -> dict:
    """The run's newest resolved config (``config_*.yaml``) as a dict."""
    from omegaconf import OmegaConf

    configs = sorted(run.glob("config_*.yaml"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    if not configs:
        raise FileNotFoundError(f"{run} has no config_*.yaml (not a train.py run directory)")
    return OmegaConf.to_container(OmegaConf.load(configs[-1]), resolve=True)


def evaluate(checkpoint: pathlib.Path, episodes: int, seed: int, num_envs: int) -> dict:
    """Lift-protocol evaluation of one checkpoint (cached beside it)."""
    cache = checkpoint.with_name(f"{checkpoint.stem}.eval{episodes}_s{seed}.json")
    if cache.exists():
        return json.loads(cache.read_text())
    if checkpoint.suffix == ".onnx":  # a residual snapshot: residual + its frozen base, from the run's files
        from upright.vla.evaluate_lift import evaluate_chunk_policy

        result = evaluate_chunk_policy(
            checkpoint, episodes, min(num_envs, episodes), seed, overrides=["sim.num_threads=1"]
        )[0]
        cache.write_text(json.dumps(result))
        return result
    from upright.tasks.lift.evaluation import run_episodes, summarize
    from upright.training.lift_evaluate import make_lift_eval_env, policy_action_overrides
    from upright.viewer.policy import load_policy

    overrides = ["sim.num_threads=1", *policy_action_overrides(str(checkpoint))]  # the run's action mode
    env, cfg = make_lift_eval_env(overrides, min(num_envs, episodes), True, seed)
    policy = load_policy(str(checkpoint), env, "lift", cfg.train, seed=seed)

    def act() -> torch.Tensor:
        with torch.no_grad():
            return policy(env.get_observations()["actor"])

    result = summarize(run_episodes(env, act, episodes))
    env.close()
    cache.write_text(json.dumps(result))
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run-dir", nargs="+", required=True)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--num-envs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="output prefix: <out>.csv, <out>.md, <out>.png")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for run_dir in a.run_dir:
        run = pathlib.Path(run_dir)
        cfg = run_config(run)
        per_iteration = cumulative_seconds(read_perf_seconds(run), [i for i, _ in checkpoints(run, a.every)])
        steps_per_it = int(cfg["env"]["num_envs"]) * int(cfg["train"]["num_steps_per_env"])
        for it, path in checkpoints(run, a.every):
            r = evaluate(path, a.episodes, a.seed, a.num_envs)
            rows.append(
                {
                    "run": run.name,
                    "iteration": it,
                    "env_steps": it * steps_per_it,
                    "wall_clock_s": per_iteration.get(it),
                    "success": r["success"],
                    "success_at_end": r["success_at_end"],
                    "time_to_success_s": r["time_to_success_s"],
                    "final_distance_m": r["final_distance_m"],
                }
            )
            print(rows[-1], flush=True)
    out = pathlib.Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [
        f"Lift protocol, {a.episodes} episodes per point (seed {a.seed}, domain randomisation on, full ranges).",
        "",
        "| run | iteration | env steps | training wall clock | success | success at end | time to success "
        "| final distance |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        wc = "-" if r["wall_clock_s"] is None else f"{r['wall_clock_s'] / 60:.1f} min"
        lines.append(
            f"| {r['run']} | {r['iteration']} | {r['env_steps']:.3g} | {wc} | {100 * r['success']:.1f} % | "
            f"{100 * r['success_at_end']:.1f} % | {r['time_to_success_s']:.2f} s | "
            f"{100 * r['final_distance_m']:.1f} cm |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for name in dict.fromkeys(r["run"] for r in rows):
        rs = [r for r in rows if r["run"] == name]
        ax1.plot([r["env_steps"] for r in rs], [100 * r["success"] for r in rs], "o-", label=name)
        timed = [r for r in rs if r["wall_clock_s"] is not None]
        ax2.plot([r["wall_clock_s"] / 60 for r in timed], [100 * r["success"] for r in timed], "o-", label=name)
    ax1.set_xlabel("env steps")
    ax2.set_xlabel("training wall clock (min)")
    for ax in (ax1, ax2):
        ax.set_ylabel("success (%)")
        ax.axhline(95, color="gray", ls="--", lw=0.8)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=110)
    print(f"wrote {out}.csv/.md/.png")


if __name__ == "__main__":
    main()
