"""Cost of ``train.symmetry=true`` per PPO iteration of ``recipe=getup``: the update with and without the mirrored
samples, on one real rollout, in one run.

    python benchmarks/bench_symmetry_update.py [--num-envs 2048] [--steps 12] [--reps 3] [--threads 1]
        [--out docs/experiments/data/bench_symmetry_update.md]

Method: the env and the runner are built as ``train.py task=standup recipe=getup`` builds them (the probe's
``build`` of ``benchmarks/gradient_consistency.py``); one rollout of N x T env steps is collected and timed (the
collection cost, the same with or without symmetry: the mirrored samples are made in the update). Then the PPO
update (5 epochs x 4 mini-batches) is timed ``--reps`` times with rsl-rl's ``Symmetry`` augmentation off and on,
alternating (ABBA) so that load drift hits both alike; before each timed update the rollout storage, the weights and
the optimizer state are restored, so every update of a variant does identical work. Reported: median seconds per
update of each, their ratio, and the iteration ratio (collection + update). A cost figure only on an idle CPU: the
report prints the load average at the start and end, say what else ran.
"""

from __future__ import annotations

import argparse
import copy
import os
import pathlib
import statistics
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=2048)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the update (train.update_threads)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    from gradient_consistency import build, rollout
    from rsl_rl.extensions import Symmetry

    from upright.training.symmetry import SYMMETRY_FUNC

    load0 = os.getloadavg()
    torch.set_num_threads(1)
    env, runner, _ = build("getup", args.num_envs, args.steps, 1, [f"train.update_threads={args.threads}"])
    alg = runner.alg
    start = time.perf_counter()
    rollout(env, runner, args.steps)
    collect_s = time.perf_counter() - start
    storage = {k: v.clone() for k, v in vars(alg.storage).items() if isinstance(v, torch.Tensor)}
    saved = (copy.deepcopy(alg.actor.state_dict()), copy.deepcopy(alg.critic.state_dict()),
             copy.deepcopy(alg.optimizer.state_dict()), alg.learning_rate)  # fmt: skip
    mirror = Symmetry(env=env, data_augmentation_func=SYMMETRY_FUNC, use_data_augmentation=True)
    torch.set_num_threads(args.threads)

    def timed(symmetric: bool) -> float:
        for k, v in storage.items():
            getattr(alg.storage, k).copy_(v)
        alg.storage.step = args.steps
        alg.actor.load_state_dict(saved[0])
        alg.critic.load_state_dict(saved[1])
        alg.optimizer.load_state_dict(saved[2])
        alg.learning_rate = saved[3]
        alg.symmetry = mirror if symmetric else None
        t0 = time.perf_counter()
        alg.update()
        return time.perf_counter() - t0

    times: dict[bool, list[float]] = {False: [], True: []}
    for rep in range(args.reps):
        for symmetric in ((False, True) if rep % 2 == 0 else (True, False)):
            times[symmetric].append(timed(symmetric))
    base, sym = statistics.median(times[False]), statistics.median(times[True])
    lines = [
        "# Cost of train.symmetry=true per PPO iteration (recipe=getup)",
        "",
        f"- command: `python benchmarks/bench_symmetry_update.py {' '.join(sys.argv[1:])}`",
        f"- {args.num_envs} envs x {args.steps} steps, update threads {args.threads}; load average at start "
        f"{load0[0]:.2f}, at end {os.getloadavg()[0]:.2f}",
        "",
        "| | s per update (median) | all reps |",
        "|---|---:|---|",
        f"| without symmetry | {base:.2f} | {', '.join(f'{t:.2f}' for t in times[False])} |",
        f"| with symmetry | {sym:.2f} | {', '.join(f'{t:.2f}' for t in times[True])} |",
        "",
        f"- update ratio (with / without): **{sym / base:.2f}**",
        f"- collection of the rollout: {collect_s:.2f} s ({args.num_envs * args.steps / collect_s:,.0f} env-steps/s)",
        f"- iteration ratio (collection + update): **{(collect_s + sym) / (collect_s + base):.2f}**",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
