"""Throughput of the standup env against the physics limit of the machine it runs on.

Every figure is divided by a *physical limit* measured in the same process, interleaved with it, so
that noise from other processes on the machine is shared by both:

    limit [env-steps/s] = single-thread mj_step rate [physics steps/s] x threads / decimation (4)

The single-thread ``mujoco.mj_step`` rate is taken on one ``MjData`` of the same compiled model
(``standup_scene()``), from a realistic state: the G1 supine on the floor after settling for 1 s with
PD targets = its current joint angles. Each measurement restores that state, so every mj_step
measurement does exactly the same work.

Sections (see ``benchmarks/README.md``):

1. stepping grid: for each N x threads, env-steps/s of the full ``StandupEnv.step`` (random actions in
   [-1, 1]) and of the bare backend (``NativeSim.step(ctrl, nsubsteps=4)``, ctrl = q + the same actions).
2. training: ``make_env`` + ``UprightRunner`` built as ``upright.training.train_loop.train`` does, a few
   PPO iterations of HoST's 50 steps per env; collection, update and overall env-steps/s.

Run ``python benchmarks/bench_standup_env.py --help``. Needs ``MENAGERIE_ROOT``. The mj_step probes, the
measurement rows and the steppers live in ``standup_stepping.py`` (a sibling module, imported by name).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime
import importlib.metadata
import io
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mujoco
import numpy as np
import torch
from machine import CpuMeter, record_iteration_times
from omegaconf import OmegaConf
from standup_stepping import (
    Measurement,
    MjStepRate,
    Probes,
    backend_stepper,
    env_stepper,
    interleaved,
    random_actions,
    warm_up,
)

from upright.conf.train_cfg import TrainCfg
from upright.sim.options import PhysicsOptions
from upright.tasks.registry import make_env, policy_metadata
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.scene import standup_scene
from upright.training.rsl_rl_cfg import rsl_rl_config
from upright.training.runner import UprightRunner
from upright.training.train_loop import seed_everything

GOAL_N, GOAL_THREADS, GOAL_RATIO = 1024, 2, 0.8
"""The issue's goal: at N=1024 with 2 threads the env reaches >= 0.8 of the physical limit."""


RECIPE = "host"
"""``--recipe``: the ``env.*`` / ``train.*`` values of ``train.py recipe=<name>`` (:data:`upright.conf.RECIPES`) applied
to the benchmarked env and the training section's PPO settings (``host``: HoST's defaults)."""

DOMAIN_RAND = False
"""Domain randomisation in the benchmarked env (``--domain-rand``). Off by default, so figures compare with
docs/bench_standup_env.md, measured before randomisation existed; on, the action delay steps substep by substep."""


SETTINGS: dict = {}
"""``--set KEY=VALUE``: ``env.*`` / ``train.*`` values applied on top of the recipe's (e.g. an A/B of one setting's cost
per iteration: ``--set env.getup.actor_history=1``)."""


def _recipe_values(prefix: str) -> dict:
    from upright.conf import RECIPES

    values = RECIPES[RECIPE] | SETTINGS
    return {k.removeprefix(prefix): v for k, v in values.items() if k.startswith(prefix)}


def parse_settings(items: list[str]) -> dict:
    """``KEY=VALUE`` strings -> {key: value}, each value read as train.py reads it (Hydra's override grammar: ``6``,
    ``false``, ``5e-3``, ``[1.0]``).

    Raises:
        ValueError: an item that is not ``env.KEY=VALUE`` or ``train.KEY=VALUE``, naming the form.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    fix = "expected env.KEY=VALUE or train.KEY=VALUE, e.g. env.getup.actor_history=1"
    out, parser = {}, OverridesParser.create()
    for item in items:
        try:
            (override,) = parser.parse_overrides([item])
        except HydraException:
            raise ValueError(f"--set {item!r}: {fix}") from None
        if not override.key_or_group.startswith(("env.", "train.")):
            raise ValueError(f"--set {item!r}: {fix}")
        out[override.key_or_group] = override.value()
    return out


def bench_env_cfg(n: int):
    cfg = OmegaConf.structured(StandupEnvCfg())
    for key, value in _recipe_values("env.").items():
        OmegaConf.update(cfg, key, value, merge=False)
    cfg.num_envs = n  # the benchmark's N, not the recipe's env.num_envs (recipe=getup sets 8,192)
    cfg.domain_rand.enabled = DOMAIN_RAND
    return cfg


def bench_train_cfg(steps_per_env: int):
    cfg = OmegaConf.structured(TrainCfg())
    for key, value in _recipe_values("train.").items():
        OmegaConf.update(cfg, key, value, merge=False)
    cfg.num_steps_per_env = steps_per_env
    return cfg


def make_standup_env(n: int, threads: int, seed: int = 0) -> StandupEnv:
    env = make_env("standup", bench_env_cfg(n), SimCfg(num_threads=threads), device="cpu", seed=seed)
    # spread episodes over their length, as training does (init_at_random_ep_len, HoST)
    env.episode_length_buf = torch.randint_like(env.episode_length_buf, high=int(env.max_episode_length))
    return env


# ---------------------------------------------------------------------------------------- sections
def env_state_physics(env: StandupEnv, mj: MjStepRate, seconds: float, max_rows: int = 256) -> dict:
    """Single-thread mj_step rate on the env's *current* states (robots mid-episode under random actions,
    some just reset), 4 steps from each of up to ``max_rows`` rows, against the settled-lying probe.

    Tells how much of a backend's gap to the limit is the physics of these states being dearer than
    lying still (not overhead). Reads the native batch's float64 rows (``NativeSim._batch``).
    """
    batch = getattr(env.sim, "_batch", None)
    if batch is None:
        return {}
    rows = min(env.num_envs, max_rows)
    qpos, qvel, ctrl, warm = (np.array(batch.bind(k))[:rows] for k in ("qpos", "qvel", "ctrl", "qacc_warmstart"))
    m, d = mj.model, mujoco.MjData(mj.model)
    dec = env.cfg.decimation
    lying = [mj.measure(seconds / 2)]
    steps, elapsed, ncon = 0, 0.0, []
    while elapsed < seconds:
        for i in range(rows):
            d.qpos[:], d.qvel[:], d.ctrl[:], d.qacc_warmstart[:] = qpos[i], qvel[i], ctrl[i], warm[i]
            mujoco.mj_forward(m, d)
            ncon.append(d.ncon)
            t0 = time.perf_counter()
            mujoco.mj_step(m, d, nstep=dec)
            elapsed += time.perf_counter() - t0
            steps += dec
    lying.append(mj.measure(seconds / 2))
    rate = steps / elapsed
    return {
        "rate": rate,
        "lying": statistics.mean(lying),
        "ratio": rate / statistics.mean(lying),
        "ncon": float(np.mean(ncon)),
        "rows": rows,
        "n": env.num_envs,
    }


def stepping_grid(args, mj: MjStepRate) -> tuple[list[Measurement], dict]:
    results, physics = [], {}
    gen = torch.Generator().manual_seed(0)
    for n in args.num_envs:
        for t in args.threads:
            env = make_standup_env(n, t)
            actions = random_actions(env, gen)
            step = env_stepper(env, actions)
            warm_up(step, args.warmup)
            rate, probes, others = interleaved(step, n, mj, t, args.seconds, args.rounds, args.mj_seconds)
            results.append(Measurement("env", n, t, rate, probes, env.cfg.decimation, others))
            if n == max(args.num_envs) and t == max(args.threads):
                physics = env_state_physics(env, mj, 2 * args.mj_seconds)
            bare = backend_stepper(env, actions)
            warm_up(bare, 0.2, min_steps=2)
            rate, probes, others = interleaved(bare, n, mj, t, args.seconds, args.rounds, args.mj_seconds)
            results.append(Measurement("backend", n, t, rate, probes, env.cfg.decimation, others))
            env.close()
            print(results[-2].row(), flush=True)
            print(results[-1].row(), flush=True)
    return results, physics


def training(args, mj: MjStepRate) -> dict:
    """Build env + runner as ``train_loop.train`` does; time env-only stepping, then PPO iterations."""
    n, t, seed = args.train_envs, args.train_threads, 1
    seed_everything(seed)
    env = make_env("standup", bench_env_cfg(n), SimCfg(num_threads=t), device="cpu", seed=seed)
    env.episode_length_buf = torch.randint_like(env.episode_length_buf, high=int(env.max_episode_length))
    step = env_stepper(env, random_actions(env, torch.Generator().manual_seed(0)))
    warm_up(step, args.warmup)
    rate, probes, others = interleaved(step, n, mj, t, args.seconds, args.rounds, args.mj_seconds)
    env_only = Measurement("training env, stepping only", n, t, rate, probes, env.cfg.decimation, others)
    print(env_only.row(), flush=True)

    train_cfg = rsl_rl_config(bench_train_cfg(args.steps_per_env))
    train_probes = Probes(mj, t, args.mj_seconds)
    train_probes.take()
    total = args.train_warmup_iters + args.train_iters
    with tempfile.TemporaryDirectory(prefix="bench_standup_") as log_dir:
        meta = policy_metadata("standup", env) | {"run_path": log_dir}
        quiet = io.StringIO()  # model printouts and rsl_rl's logger chatter
        with contextlib.redirect_stdout(quiet):
            runner = UprightRunner(env, train_cfg, log_dir=log_dir, device="cpu", onnx_metadata=meta)
        times = record_iteration_times(runner, args.train_warmup_iters, total, stream=sys.__stdout__)
        logger = runner.logger
        done = logger.on_iteration_done

        def iteration_done(it: int) -> None:
            done(it)
            train_probes.take()  # between iterations: outside the collection and update times

        logger.on_iteration_done = iteration_done
        meter, t0 = CpuMeter().start(), time.perf_counter()
        with contextlib.redirect_stdout(quiet):
            runner.learn_until(total, init_at_random_ep_len=TrainCfg().init_at_random_ep_len)
        wall, others = time.perf_counter() - t0, meter.stop()
    own = env_state_physics(env, mj, 2 * args.mj_seconds)  # the physics of the states training visited
    env.close()
    measured = times[args.train_warmup_iters :]
    collect = sum(c for c, _ in measured)
    learn = sum(u for _, u in measured)
    steps = n * args.steps_per_env * len(measured)
    dec = env.cfg.decimation
    return {
        "env_only": env_only,
        "collection": Measurement("training: collection", n, t, steps / collect, train_probes, dec, others),
        "overall": Measurement(
            "training: collection + update", n, t, steps / (collect + learn), train_probes, dec, others
        ),
        "iters": len(measured),
        "collect_s_per_iter": collect / len(measured),
        "update_s_per_iter": learn / len(measured),
        "wall_s": wall,
        "total_iters": total,
        "own_physics": own,
    }


def profile_env_step(args) -> str:
    n, t = max(args.num_envs), max(args.threads)
    env = make_standup_env(n, t)
    step = env_stepper(env, random_actions(env, torch.Generator().manual_seed(0)))
    warm_up(step, args.warmup)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.profile_steps):
        step()
    prof.disable()
    env.close()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).sort_stats("tottime")
    out.write(f"cProfile of {args.profile_steps} StandupEnv.step calls, N={n}, threads={t} (sorted by tottime)\n")
    stats.print_stats(args.profile_top)
    return out.getvalue()


# ---------------------------------------------------------------------------------------- report
def machine_header(mj: MjStepRate) -> list[str]:
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    try:
        rsl = importlib.metadata.version("rsl-rl-lib")
    except importlib.metadata.PackageNotFoundError:
        rsl = "?"
    m = mj.model
    return [
        "# StandupEnv throughput",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- CPU: {cpu}; nproc (affinity) {affinity}, os.cpu_count {os.cpu_count()}; "
        f"load average at start {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"- python {platform.python_version()}, mujoco {mujoco.__version__}, torch {torch.__version__} "
        f"({torch.get_num_threads()} intra-op threads), rsl-rl-lib {rsl}",
        f"- model: standup_scene(), nq {m.nq}, nv {m.nv}, nu {m.nu}, dt {m.opt.timestep} s, decimation "
        f"{StandupEnvCfg().decimation}; mj_step state: supine, settled 1 s, {mj.ncon} contacts",
        f"- command: `{' '.join([os.path.basename(sys.argv[0])] + sys.argv[1:])}`",
        "- limit = single-thread mj_step/s x threads / decimation; ratio = env-steps/s / limit. mj_step/s is the "
        "mean of the probes interleaved with that row (± half their spread); 'T-thread probe' = aggregate rate of "
        "T batch threads stepping copies of the same state; others' CPU = share of all CPUs used by other "
        "processes during the row",
    ]


def report(args, mj: MjStepRate, grid: list[Measurement], physics: dict, train: dict | None, header: list[str]) -> str:
    lines = header + [""]
    if grid:
        lines += ["## Stepping (random actions in [-1, 1])", "", Measurement.HEAD] + [r.row() for r in grid] + [""]
        goal = [r for r in grid if r.label == "env" and r.n == GOAL_N and r.threads == GOAL_THREADS]
        if goal:
            g = goal[0]
            verdict = "PASS" if g.ratio >= GOAL_RATIO else "FAIL"
            lines.append(
                f"**Goal: env at N={GOAL_N}, {GOAL_THREADS} threads >= {GOAL_RATIO} x limit: "
                f"{g.ratio:.2f} -> {verdict}**"
            )
        else:
            lines.append(f"Goal line (N={GOAL_N}, {GOAL_THREADS} threads) not measured in this run.")
        lines.append("")
        if physics:
            lines += [
                f"Physics of the env's own states (N={physics['n']}, {physics['rows']} rows, random actions, mean "
                f"{physics['ncon']:.1f} contacts): {physics['rate']:,.0f} mj_step/s single-thread = "
                f"**{physics['ratio']:.2f}** x the settled-lying probe ({physics['lying']:,.0f}). A backend with zero "
                f"overhead and perfect threading would reach about this ratio.",
                "",
            ]
            if goal:
                own_limit = physics["rate"] * GOAL_THREADS / 4
                own_ratio = goal[0].rate / own_limit
                lines += [
                    f"Goal row against the mj_step rate of the env's own states (same workload): "
                    f"{goal[0].rate:,.0f} / ({physics['rate']:,.0f} x {GOAL_THREADS} / 4 = {own_limit:,.0f}) = "
                    f"**{own_ratio:.2f}** -> {'PASS' if own_ratio >= GOAL_RATIO else 'FAIL'} against that limit.",
                    "",
                ]
    if train:
        lines += (
            [
                f"## Training loop (make_env + UprightRunner as in train_loop.train; {args.steps_per_env} steps/env "
                f"per iteration; {train['iters']} timed iteration(s) after {args.train_warmup_iters} warm-up)",
                "",
                Measurement.HEAD,
            ]
            + [train[k].row() for k in ("env_only", "collection", "overall")]
            + [""]
        )
        env_rate = train["env_only"].rate
        lines += [
            "| training figure | value |",
            "|---|---:|",
            f"| collection s / iteration | {train['collect_s_per_iter']:.2f} |",
            f"| update s / iteration | {train['update_s_per_iter']:.2f} |",
            f"| collection / stepping only | {train['collection'].rate / env_rate:.2f} |",
            f"| overall (collection + update) / stepping only | {train['overall'].rate / env_rate:.2f} |",
            f"| wall s, all {train['total_iters']} iterations (with checkpoint + ONNX saves, probes) "
            f"| {train['wall_s']:.1f} |",
        ]
        own = train.get("own_physics") or {}
        if own:
            limit = own["rate"] * args.train_threads / 4
            lines += [
                f"| physics limit of the training states: single-thread mj_step/s on the env's own states after "
                f"training ({own['rows']} rows, mean {own['ncon']:.1f} contacts) x {args.train_threads} threads / 4 "
                f"| {limit:,.0f} env-steps/s |",
                f"| **overall / that physics limit** | **{train['overall'].rate / limit:.2f}** |",
            ]
        lines.append("")
    rows = grid + ([train[k] for k in ("env_only", "collection", "overall")] if train else [])
    busy = [r for r in rows if r.others > 0.1]
    if busy:
        lines.append(
            f"WARNING: other processes used > 10% of the CPUs during {len(busy)} of {len(rows)} rows (up to "
            f"{100 * max(r.others for r in busy):.0f}%). Multi-thread ratios to the 1-thread limit are then too low; "
            "'ratio to probe' divides by what T threads actually got. Rerun on an idle machine for the verdict."
        )
        lines.append("")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, nargs="+", default=[64, 256, 1024], help="N values of the stepping grid")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="backend thread counts of the grid")
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per figure (split into rounds)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per figure, each preceded by an mj_step probe")
    p.add_argument(
        "--mj-seconds", type=float, default=0.3, help="timed seconds of each mj_step probe (x2: 1-thread and T-thread)"
    )
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds of env stepping before timing")
    p.add_argument("--train-envs", type=int, default=1024, help="N of the training-loop section")
    p.add_argument("--train-threads", type=int, default=2, help="backend threads of the training-loop section")
    p.add_argument("--train-iters", type=int, default=2, help="timed PPO iterations (0 skips the section)")
    p.add_argument("--train-warmup-iters", type=int, default=1, help="untimed PPO iterations before them")
    p.add_argument(
        "--steps-per-env", type=int, default=TrainCfg().num_steps_per_env, help="num_steps_per_env (HoST 50)"
    )
    p.add_argument("--no-grid", action="store_true", help="skip the stepping grid")
    p.add_argument("--profile", action="store_true", help="also cProfile StandupEnv.step at max N and threads")
    p.add_argument("--profile-steps", type=int, default=30)
    p.add_argument("--profile-top", type=int, default=30)
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: grid N 64 and 1024, 1 s per figure; training N=256, 1 + 1 iterations",
    )
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch threads while stepping (default 1, as train.py uses while collecting; "
        "the training section's runner switches to all CPUs for the update itself)",
    )
    p.add_argument("--domain-rand", action="store_true", help="domain randomisation on in the env (HoST training)")
    p.add_argument("--recipe", default="host", help="train.py's recipe=<name> for the env and the PPO settings")
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="env.* / train.* values on top of the recipe's, e.g. --set env.getup.actor_history=1",
    )
    p.add_argument("--out", type=str, default=None, help="also write the Markdown report to this file")
    args = p.parse_args(argv)
    try:
        args.settings = parse_settings(args.set)
    except ValueError as e:
        p.error(str(e))
    if args.quick:
        defaults = p.parse_args([])
        if args.num_envs == defaults.num_envs:
            args.num_envs = [64, 1024]
        args.seconds, args.rounds, args.mj_seconds, args.warmup = 1.0, 2, 0.25, 0.5
        args.train_iters = min(args.train_iters, 1)
        if args.train_envs == defaults.train_envs:
            args.train_envs = 256
    if any(n <= 0 for n in args.num_envs) or any(t <= 0 for t in args.threads):
        p.error("--num-envs and --threads must be positive (threads=0 would mean 'all CPUs', ambiguous for the limit)")
    return args


def main(argv=None) -> None:
    global DOMAIN_RAND, RECIPE, SETTINGS
    args = parse_args(argv)
    DOMAIN_RAND = args.domain_rand
    RECIPE = args.recipe
    SETTINGS = args.settings
    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    if not os.environ.get("MENAGERIE_ROOT"):
        print("note: MENAGERIE_ROOT is not set; the G1 model loader may not find the model", file=sys.stderr)
    model = standup_scene(PhysicsOptions(timestep=SimCfg().timestep))
    mj = MjStepRate(model)
    header = machine_header(mj)  # load average at the start
    settings = "".join(f" {k}={v}" for k, v in SETTINGS.items())
    header.append(f"Recipe: `recipe={RECIPE}{settings}`" + (" (domain randomisation on)" if DOMAIN_RAND else ""))
    print("\n".join(header) + "\n\n" + Measurement.HEAD, flush=True)
    grid, physics = ([], {}) if args.no_grid else stepping_grid(args, mj)
    train = training(args, mj) if args.train_iters > 0 else None
    header[3] += f"; load average at end {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    text = report(args, mj, grid, physics, train, header)
    if args.profile:
        text += "\n## cProfile\n\n```\n" + profile_env_step(args) + "```\n"
    print("\n" + text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
