"""The learning curve of one get-up run that moved between machines: the training indicators against env steps.

    python benchmarks/getup_run_curve.py <run dir> [--train-log LOG ...] [--esucc FILE] [--out curve.png]

Reads the run's TensorBoard scalars (``Metrics/pelvis_passed_0.5``, ``Metrics/host_success``,
``Metrics/head_height``; every segment trained where its event files were kept) and, for segments trained elsewhere
(a lent GPU returns only ``train.log``), the progress lines of ``--train-log`` files (``it N/...``, "pelvis above
0.5 m X %", "HoST success Y %", "head above feet Z m"). Env steps per iteration come from the run config
(``env.num_envs`` x ``train.num_steps_per_env``). ``--esucc`` is a JSON list of
``{"iteration": N, "supine": %, "prone": %}`` from the HoST evaluation (``python -m upright.training.evaluate``),
drawn as points. Writes a PNG with two panels (the fraction of training episodes whose pelvis passed 0.5 m and E_succ;
the mean head height above the feet) and prints the merged series as CSV.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re

LINE = re.compile(r"^it (\d+)/\d+ .*?pelvis above 0\.5 m ([\d.]+) % .*?HoST success ([\d.]+) %")
HEAD = re.compile(r"head above feet ([\d.]+) m")


def tensorboard_series(run_dir: pathlib.Path) -> dict[int, dict[str, float]]:
    """{iteration: {passed, success, head}} from the run's event files (iteration = TensorBoard step)."""
    from upright.training.plot_scalars import load_scalars

    scalars = load_scalars(str(run_dir))
    out: dict[int, dict[str, float]] = {}
    for tag, key, scale in (
        ("Metrics/pelvis_passed_0.5", "passed", 100.0),
        ("Metrics/host_success", "success", 100.0),
        ("Metrics/head_height", "head", 1.0),
    ):
        steps, values = scalars.get(tag, ([], []))
        for step, value in zip(steps, values):
            out.setdefault(int(step), {})[key] = float(value) * scale
    return out


def log_series(paths: list[pathlib.Path]) -> dict[int, dict[str, float]]:
    """{iteration: {passed, success, head}} from train.py progress lines (iterations counted from 1)."""
    out: dict[int, dict[str, float]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            m = LINE.match(line)
            if m:
                head = HEAD.search(line)
                out[int(m[1]) - 1] = {"passed": float(m[2]), "success": float(m[3])} | (
                    {"head": float(head[1])} if head else {}
                )
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=pathlib.Path)
    p.add_argument("--train-log", type=pathlib.Path, nargs="*", default=[])
    p.add_argument("--esucc", type=pathlib.Path, default=None)
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("getup_curve.png"))
    a = p.parse_args(argv)
    from omegaconf import OmegaConf

    configs = sorted(a.run_dir.glob("config_*.yaml"), key=lambda f: int(f.stem.split("_")[1]))
    if not configs:
        raise SystemExit(f"{a.run_dir}: no config_<it>.yaml; give a train.py run folder")
    cfg = OmegaConf.load(configs[-1])
    per_it = int(cfg.env.num_envs) * int(cfg.train.num_steps_per_env)
    series = tensorboard_series(a.run_dir) | log_series(a.train_log)
    its = sorted(series)
    print("iteration,env_steps_M,pelvis_passed_0.5_pct,host_success_pct,head_above_feet_m")
    for it in its:
        row = series[it]
        print(
            f"{it},{(it + 1) * per_it / 1e6:.2f},{row.get('passed', float('nan')):.2f},"
            f"{row.get('success', float('nan')):.2f},{row.get('head', float('nan')):.3f}"
        )
    esucc = json.loads(a.esucc.read_text()) if a.esucc else []

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [(it + 1) * per_it / 1e6 for it in its]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax1.plot(x, [series[i].get("passed", float("nan")) for i in its], lw=0.8, label="training: pelvis passed 0.5 m")
    ax1.plot(x, [series[i].get("success", float("nan")) for i in its], lw=0.8, label="training: HoST success")
    for posture, marker in (("supine", "o"), ("prone", "s")):
        pts = [((e["iteration"] + 1) * per_it / 1e6, e[posture]) for e in esucc if posture in e]
        if pts:
            ax1.plot(*zip(*pts), marker, color="k", ms=5, label=f"E_succ {posture} (HoST protocol)")
    ax1.set_ylabel("% of episodes")
    ax1.legend(fontsize=7, loc="upper left")
    ax2.plot(x, [series[i].get("head", float("nan")) for i in its], lw=0.8)
    ax2.set_ylabel("head above feet, m (training mean)")
    ax2.set_xlabel(f"env steps (M), {per_it:,} per iteration")
    fig.suptitle(a.run_dir.name, fontsize=9)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
