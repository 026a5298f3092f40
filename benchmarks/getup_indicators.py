"""Leading indicators of standup runs, side by side: how high the robots get, how often the pelvis passes 0.5 m, how
often an episode meets HoST's success criterion, against PPO iterations, env steps and each run's own clock.

    python benchmarks/getup_indicators.py logs/standup/A_s1 logs/standup/B_s1 [--every 25] [--smooth 10]
        [--out docs/experiments/data/getup_indicators]

Reads each run's TensorBoard scalars (written by ``train.py``) and its saved config (``config_<n>.yaml``, for
N envs x T steps per iteration). The indicators are the training episodes' own (``recipe=getup`` logs them; episodes
that started standing are left out): ``Metrics/peak_pelvis_height`` (m), ``Metrics/pelvis_passed_0.5`` and
``Metrics/host_success`` (fractions), plus the per-step reward of the torso-orientation term. The run's clock is the
sum of rsl-rl's ``Perf/collection_time`` and ``Perf/learning_time`` up to each iteration (seconds the run spent
training, whatever else shared the CPU: runs that shared it with each other are comparable, others are not; say
which). Values are moving means over ``--smooth`` iterations. The first iterations after a start or a resume count
robots that were mid-drop when rsl-rl randomised the episode clocks; read the indicators after ~30 iterations.

Writes ``<out>.csv`` (one row per run and reported iteration) and ``<out>.png`` (one panel per indicator against env
steps) when ``--out`` is given; prints a Markdown table either way.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import sys

INDICATORS = (
    ("Metrics/peak_pelvis_height", "peak pelvis height, m"),
    ("Metrics/pelvis_passed_0.5", "episodes whose pelvis passed 0.5 m"),
    ("Metrics/host_success", "episodes meeting HoST's success criterion"),
    ("Episode_Reward/getup/orientation", "torso-orientation reward per env step"),
    ("Metrics/standing_start_time_up", "standing starts: s until the pelvis fell below 0.5 m"),
)
"""(TensorBoard tag, label) of each indicator."""


def _smoothed(steps: list[int], values: list[float], window: int) -> dict[int, float]:
    out, acc = {}, []
    for s, v in zip(steps, values):
        acc.append(v)
        acc = acc[-window:]
        out[s] = sum(acc) / len(acc)
    return out


def run_table(run_dir: pathlib.Path, every: int, smooth: int) -> list[dict]:
    """Rows of one run: iteration, env steps, run clock (h) and each indicator (NaN where not logged).

    Raises:
        FileNotFoundError: no TensorBoard events or no saved config in ``run_dir``.
    """
    from omegaconf import OmegaConf

    from upright.training.plot_scalars import load_scalars

    configs = sorted(run_dir.glob("config_*.yaml"), key=lambda p: int(p.stem.split("_")[1]))
    if not configs:
        raise FileNotFoundError(f"{run_dir}: no config_<n>.yaml (not a train.py run directory)")
    cfg = OmegaConf.load(configs[0])
    per_iteration = int(cfg.env.num_envs) * int(cfg.train.num_steps_per_env)
    scalars = load_scalars(run_dir)
    if not scalars:
        raise FileNotFoundError(f"{run_dir}: no TensorBoard scalars")
    clock, total = {}, 0.0
    c_steps, c_vals = scalars.get("Perf/collection_time", ([], []))
    l_vals = dict(zip(*scalars.get("Perf/learning_time", ([], []))))
    for s, v in zip(c_steps, c_vals):
        total += v + l_vals.get(s, 0.0)
        clock[s] = total
    series = {tag: _smoothed(*scalars[tag], smooth) if tag in scalars else {} for tag, _ in INDICATORS}
    last = max(clock) if clock else 0
    rows = []
    for it in sorted(clock):
        if it % every and it != last:
            continue
        row = {
            "run": run_dir.name,
            "iteration": it + 1,
            "env_steps": (it + 1) * per_iteration,
            "run_clock_h": clock[it] / 3600.0,
        }
        for tag, _ in INDICATORS:
            row[tag] = series[tag].get(it, float("nan"))
        rows.append(row)
    return rows


def plot(rows: list[dict], out: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(INDICATORS), 1, figsize=(7, 2.3 * len(INDICATORS)), sharex=True)
    for run in dict.fromkeys(r["run"] for r in rows):
        mine = [r for r in rows if r["run"] == run]
        for ax, (tag, label) in zip(axes, INDICATORS):
            ax.plot([r["env_steps"] / 1e6 for r in mine], [r[tag] for r in mine], lw=1.2, label=run)
            ax.set_ylabel(label, fontsize=7)
            ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[-1].set_xlabel("env steps (millions)")
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dirs", nargs="+", type=pathlib.Path)
    p.add_argument("--every", type=int, default=25, help="report every K iterations (default 25)")
    p.add_argument("--smooth", type=int, default=10, help="moving mean over this many iterations (default 10)")
    p.add_argument("--out", type=pathlib.Path, default=None, help="write <out>.csv and <out>.png")
    args = p.parse_args(argv)
    rows = []
    for run_dir in args.run_dirs:
        try:
            rows += run_table(run_dir, args.every, args.smooth)
        except FileNotFoundError as err:
            sys.exit(f"error: {err}")
    short = ["peak pelvis (m)", "pelvis > 0.5 m", "HoST success", "orientation rew.", "standing kept (s)"]
    print("| run | iteration | env steps (M) | run clock (h) | " + " | ".join(short) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(short))
    for r in rows:
        vals = " | ".join(f"{r[tag]:.3f}" for tag, _ in INDICATORS)
        print(f"| {r['run']} | {r['iteration']} | {r['env_steps'] / 1e6:.1f} | {r['run_clock_h']:.2f} | {vals} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.with_suffix(".csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        plot(rows, args.out)
        print(f"wrote {args.out.with_suffix('.csv')} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
