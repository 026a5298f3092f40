"""Plot a run's TensorBoard scalars: the task-group reward and the mean head height over iterations.

python -m upright.training.plot_scalars logs/standup/<run> --out docs/standup_training.png
"""

from __future__ import annotations

import argparse
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

DEFAULT_TAGS = (
    ("Episode_Reward/group/task", "task-group reward per env step (0..1)"),
    ("Metrics/head_height", "mean head height above feet, m"),
    ("Metrics/base_height", "mean pelvis height, m"),
    ("Episode_Reward/group/style", "style-group reward per env step"),
)
"""(TensorBoard tag, axis label) pairs plotted by default."""


def load_scalars(run_dir: str | pathlib.Path) -> dict[str, tuple[list[int], list[float]]]:
    """Read every scalar of a run directory: tag -> (steps, values)."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {
        tag: ([e.step for e in acc.Scalars(tag)], [e.value for e in acc.Scalars(tag)]) for tag in acc.Tags()["scalars"]
    }


def resolve_tag(scalars: dict, tag: str) -> str:
    """Accept a tag with or without rsl_rl's ``Episode/`` prefix.

    Raises:
        KeyError: the tag is absent (the message lists the available ones).
    """
    for candidate in (tag, tag.removeprefix("Episode/"), f"Episode/{tag}"):
        if candidate in scalars:
            return candidate
    raise KeyError(f"Scalar '{tag}' not in the run; available: {sorted(scalars)}")


def plot(run_dir: str | pathlib.Path, out: str | pathlib.Path, tags=DEFAULT_TAGS, title: str | None = None) -> None:
    """Write a PNG with one panel per tag against the PPO iteration."""
    scalars = load_scalars(run_dir)
    fig, axes = plt.subplots(len(tags), 1, figsize=(7, 2.4 * len(tags)), sharex=True)
    for ax, (tag, label) in zip(axes, tags):
        steps, values = scalars[resolve_tag(scalars, tag)]
        ax.plot(steps, values, lw=1.2)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("PPO iteration")
    fig.suptitle(title or f"upright standup: {pathlib.Path(run_dir).name}", fontsize=10)
    fig.tight_layout()
    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--out", default="docs/standup_training.png")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    plot(args.run_dir, args.out, title=args.title)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
