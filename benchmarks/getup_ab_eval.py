"""E_succ of the arms of a get-up A/B: each run's checkpoint at one iteration, HoST protocol, one table.

    python benchmarks/getup_ab_eval.py --arm control=logs/standup/ft_ctrl_s1,logs/standup/ft_ctrl_s2 \\
        --arm std04=logs/standup/ft_std04_s1,logs/standup/ft_std04_s2 --iteration 1350 --episodes 500 \\
        [--nominal] [--json out.json]

For every run of every arm it evaluates ``model_<iteration>.pt`` (``--iteration latest``: each run's newest
checkpoint) with ``python -m upright.training.evaluate --posture supine|prone`` (ground, domain randomisation on, 5 s
episodes, no pull force; the evaluator's seed 0, so every arm meets the same randomised models and starts), and with
``--nominal`` also on the nominal model (``--no-domain-rand``, supine: one deterministic episode, 0 or 100 %;
pooled, the share of runs that stand). Prints one Markdown table: a row per run and a
pooled row per arm, each E_succ with its binomial standard error sqrt(p(1-p)/n) in points and the share of
episodes that stood and fell again. ``--json`` writes the rows.

Raises SystemExit (one line) when a run has no such checkpoint or an evaluation fails.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import pathlib
import subprocess
import sys
import tempfile


def checkpoint(run: pathlib.Path, iteration: str) -> pathlib.Path:
    """``run/model_<iteration>.pt``, or the newest intact one when ``iteration`` is ``latest`` (as ``resume=``)."""
    if iteration == "latest":
        from upright.training.runner import latest_checkpoint

        try:
            return latest_checkpoint(run)
        except (FileNotFoundError, ValueError) as err:
            raise SystemExit(f"getup_ab_eval: {err}") from None
    path = run / f"model_{int(iteration)}.pt"
    if not path.is_file():
        raise SystemExit(f"getup_ab_eval: {path} does not exist; pick an iteration every run has saved (or latest)")
    return path


def esucc(
    policy: pathlib.Path, posture: str, episodes: int, num_envs: int, nominal: bool, threads: int
) -> tuple[float, float]:
    """(E_succ, fell after standing) in % of one evaluation (the evaluator's eval.csv; the second is NaN in a csv
    written before that column existed)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "upright.training.evaluate", "--policy", str(policy), "--posture", posture]
        cmd += ["--episodes", str(episodes), "--num-envs", str(num_envs), "--out", out, f"sim.num_threads={threads}"]
        if nominal:
            cmd.append("--no-domain-rand")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            raise SystemExit(f"getup_ab_eval: evaluating {policy} ({posture}) failed: {tail}")
        with open(pathlib.Path(out) / "eval.csv") as f:
            row = next(csv.DictReader(f))
        return float(row["E_succ"]), float(row.get("fell_after_standing", "nan"))


def stderr_points(p_percent: float, n: int) -> float:
    """Binomial standard error of a success rate of ``p_percent`` % over ``n`` episodes, in points."""
    p = p_percent / 100.0
    return 100.0 * math.sqrt(max(p * (1.0 - p), 0.0) / max(n, 1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arm", action="append", required=True, help="NAME=RUN_DIR[,RUN_DIR...] (repeat per arm)")
    parser.add_argument("--iteration", default="latest", help="checkpoint iteration every run has, or latest")
    parser.add_argument("--episodes", type=int, default=500, help="episodes per posture and run")
    parser.add_argument("--num-envs", type=int, default=250, help="envs per evaluation wave")
    parser.add_argument("--nominal", action="store_true", help="also evaluate supine on the nominal model")
    parser.add_argument("--threads", type=int, default=1, help="sim.num_threads of each evaluation")
    parser.add_argument("--json", default=None, help="write the rows to this file")
    args = parser.parse_args(argv)
    columns = ["supine", "prone"] + (["nominal"] if args.nominal else [])
    rows = []
    for spec in args.arm:
        name, _, runs = spec.partition("=")
        if not runs:
            raise SystemExit(f"getup_ab_eval: --arm {spec!r} needs the form NAME=RUN_DIR[,RUN_DIR...]")
        pooled = {key: [] for c in columns for key in (c, f"{c}_fell")}
        for run in runs.split(","):
            ckpt = checkpoint(pathlib.Path(run), args.iteration)
            row = {"arm": name, "run": run, "checkpoint": ckpt.name}
            for c in columns:
                posture = "supine" if c == "nominal" else c
                n = 1 if c == "nominal" else args.episodes  # the nominal episode is deterministic: one is all
                row[c], row[f"{c}_fell"] = esucc(ckpt, posture, n, min(n, args.num_envs), c == "nominal", args.threads)
                pooled[c].append(row[c])
                pooled[f"{c}_fell"].append(row[f"{c}_fell"])
            rows.append(row)
            print(f"# {name} {ckpt}: " + ", ".join(f"{c} {row[c]:.1f} %" for c in columns), flush=True)
        rows.append({"arm": name, "run": "pooled", "checkpoint": "", **{k: sum(v) / len(v) for k, v in pooled.items()}})
        rows[-1]["n_runs"] = len(runs.split(","))
    print(f"\n| arm | run | checkpoint | {' | '.join(f'{c} E_succ (%)' for c in columns)} |")
    print("|---|---|---|" + "---:|" * len(columns))
    for row in rows:
        n = args.episodes * row.get("n_runs", 1)
        cells = " | ".join(
            f"{row[c]:.1f}"
            if c == "nominal"
            else f"{row[c]:.1f} ± {stderr_points(row[c], n):.1f} (fell again {row[c + '_fell']:.1f})"
            for c in columns
        )
        print(f"| {row['arm']} | {row['run']} | {row['checkpoint']} | {cells} |")
    print(
        f"\n{args.episodes} episodes per posture and run; ± one binomial standard error; fell again: % of episodes "
        "that passed the standing height and later fell below the fall height (the evaluator's fell_after_standing)."
    )
    if args.nominal:
        print("nominal: one deterministic episode per run (100 % = it stood from 0.7 m to the end without < 0.5 m).")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
