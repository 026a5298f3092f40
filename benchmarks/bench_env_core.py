"""Cost of the env step before and after a change of the env code, in one run (issue 35: the env core must not make
training slower).

Two source trees (git revisions checked out as temporary worktrees) are measured alternately: for each round and
each case, one child process per tree imports ``upright`` from its tree, builds the case's env through
``upright.tasks.registry.make_env`` and times ``--steps`` env steps with the same random actions (after 20 warm-up
steps). The two trees share whatever else the machine does, round by round; the report gives each tree's median
env-steps/s and the ratio after / before.

    python benchmarks/bench_env_core.py --before bf4a5ae --after HEAD --rounds 5

Cases: the get-up recipe's G1 env (1,024 envs, 2 threads), HoST's (512 envs), the lift task's cartesian recipe
(256 envs). Needs ``MENAGERIE_ROOT`` and a git checkout. Report the CPU's state with the figures (idle or not).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

CASES: dict[str, list[str]] = {
    "getup 1024": ["task=standup", "recipe=getup", "env.num_envs=1024", "sim.num_threads=2"],
    "host 512": ["task=standup", "recipe=host", "env.num_envs=512", "sim.num_threads=2"],
    "lift cartesian 256": ["task=lift", "recipe=cartesian", "env.num_envs=256", "sim.num_threads=2"],
}

CHILD = r"""
import json, sys, time, torch
tree, steps, overrides = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
import upright
assert upright.__file__.startswith(tree), (upright.__file__, tree)
from hydra import compose, initialize
from upright.conf import register_configs, with_task_groups
from upright.tasks.registry import make_env
register_configs()
with initialize(version_base=None, config_path=None):
    cfg = compose("config", overrides=with_task_groups(overrides))
task = overrides[0].split("=", 1)[1]
env = make_env(task, cfg.env, cfg.sim, "cpu", 1)
g = torch.Generator().manual_seed(0)
actions = [torch.rand(env.num_envs, env.num_actions, generator=g) * 2 - 1 for _ in range(steps + 20)]
for a in actions[:20]:
    env.step(a)
t0 = time.perf_counter()
for a in actions[20:]:
    env.step(a)
dt = time.perf_counter() - t0
print(json.dumps({"env_steps_per_s": env.num_envs * steps / dt}))
"""


def run_child(tree: pathlib.Path, steps: int, overrides: list[str]) -> float:
    """env-steps/s of one child process on ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(steps), *overrides],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        timeout=1200,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child on {tree} failed: {proc.stderr.strip().splitlines()[-1]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["env_steps_per_s"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="git revision of the baseline")
    ap.add_argument("--after", default="HEAD", help="git revision measured against it (default HEAD)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100, help="timed env steps per child")
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for label, rev in (("before", args.before), ("after", args.after)):
            path = pathlib.Path(tmp) / label
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev], check=True, capture_output=True
            )
            trees[label] = path
        try:
            rates: dict[tuple[str, str], list[float]] = {}
            for r in range(args.rounds):
                for case in args.cases:
                    order = ("before", "after") if r % 2 == 0 else ("after", "before")
                    for label in order:
                        rate = run_child(trees[label], args.steps, CASES[case])
                        rates.setdefault((case, label), []).append(rate)
                        print(f"round {r + 1} {case:>20} {label:>6}: {rate:,.0f} env-steps/s", flush=True)
        finally:
            for path in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)
    print(f"\n| case | {args.before} (median env-steps/s) | {args.after} | after / before |\n|---|---:|---:|---:|")
    for case in args.cases:
        b, a = statistics.median(rates[(case, "before")]), statistics.median(rates[(case, "after")])
        print(f"| {case} | {b:,.0f} | {a:,.0f} | {a / b:.3f} |")


if __name__ == "__main__":
    main()
