"""What the G1's self-collision pair list costs: the legacy 41 pairs against the sampled list, in one run.

Both contact sets are built in the same process (``g1.self_collision_pairs`` patched while the scene is
compiled) and measured in alternating rounds (A B B A A B ...), so that load from other processes falls on
both alike. Per round and contact set:

- ``mj_step/s (lying)``: single-thread ``mujoco.mj_step`` rate from the settled supine state of
  ``bench_standup_env.MjStepRate`` (same state for both sets: the G1 dropped supine and settled 1 s);
- ``env-steps/s``: ``StandupEnv.step`` with random actions in [-1, 1] at N envs and T backend threads
  (native backend, domain randomisation off, episodes spread over their length as in training);
- ``mj_step/s (env states)``: single-thread ``mj_step`` over the env's own current states (up to 256 rows,
  4 steps each), with the mean number of contacts and of self-contacts in those states.

Every rate is given twice: per second of wall clock, and per second of CPU time (``time.thread_time`` for the
single-thread ``mj_step`` figures, ``time.process_time`` of the whole process, i.e. all backend threads, for the
env). On a machine shared with other processes the CPU-time figures are the steadier measure of the work an
env step costs; the wall-clock ones are what a run got.

``--mjx-envs N`` adds, for each set in a fresh subprocess with JAX's compilation cache off, the cold compile
time of the MJX (CPU JAX) programs (``MjxSim`` construction incl. the reset program, then the first step) and
the steady env-steps/s at N.

    export MENAGERIE_ROOT=<folder in Menagerie layout>
    python benchmarks/bench_self_collisions.py --out docs/bench_self_collisions.md [--mjx-envs 64]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from unittest import mock

import mujoco
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_standup_env as bse

from upright.robots import g1

SETS = {"legacy (41 pairs)": g1.legacy_self_collision_pairs, "sampled": g1.self_collision_pairs}


def _patched(pairs_fn):
    return mock.patch.object(g1, "self_collision_pairs", pairs_fn)


def self_contacts(env, max_rows: int = 256) -> tuple[float, float]:
    """(mean robot-robot contacts per state, share of states with any) over the env's current states."""
    batch = env.sim._batch
    m = env.model
    d = mujoco.MjData(m)
    rows = min(env.num_envs, max_rows)
    qpos = np.array(batch.bind("qpos"))[:rows]
    counts = []
    for i in range(rows):
        d.qpos[:] = qpos[i]
        mujoco.mj_fwdPosition(m, d)
        g = d.contact.geom[: d.ncon]
        counts.append(int(np.sum((m.geom_bodyid[g[:, 0]] != 0) & (m.geom_bodyid[g[:, 1]] != 0))))
    counts = np.array(counts)
    return float(counts.mean()), float((counts > 0).mean())


def mj_rates(mj: bse.MjStepRate, seconds: float) -> tuple[float, float]:
    """(mj_step/s of wall clock, mj_step/s of this thread's CPU time) from the settled-lying state."""
    m, d = mj.model, mj.data
    steps, wall, cpu = 0, 0.0, 0.0
    while wall < seconds:
        mujoco.mj_setState(m, d, mj._state, mj._sig)
        mujoco.mj_forward(m, d)
        t0, c0 = time.perf_counter(), time.thread_time()
        mujoco.mj_step(m, d, nstep=mj.chunk)
        wall += time.perf_counter() - t0
        cpu += time.thread_time() - c0
        steps += mj.chunk
    return steps / wall, steps / cpu


def env_state_rates(env, seconds: float, max_rows: int = 256) -> tuple[float, float, float]:
    """Single-thread mj_step over the env's current states, 4 steps from each of up to ``max_rows`` rows:
    (steps/s wall, steps/s thread CPU, mean contacts per state)."""
    batch = env.sim._batch
    rows = min(env.num_envs, max_rows)
    qpos, qvel, ctrl, warm = (np.array(batch.bind(k))[:rows] for k in ("qpos", "qvel", "ctrl", "qacc_warmstart"))
    m, d = env.model, mujoco.MjData(env.model)
    steps, wall, cpu, ncon = 0, 0.0, 0.0, []
    while wall < seconds:
        for i in range(rows):
            d.qpos[:], d.qvel[:], d.ctrl[:], d.qacc_warmstart[:] = qpos[i], qvel[i], ctrl[i], warm[i]
            mujoco.mj_forward(m, d)
            ncon.append(d.ncon)
            t0, c0 = time.perf_counter(), time.thread_time()
            mujoco.mj_step(m, d, nstep=env.cfg.decimation)
            wall += time.perf_counter() - t0
            cpu += time.thread_time() - c0
            steps += env.cfg.decimation
    return steps / wall, steps / cpu, float(np.mean(ncon))


def mjx_child(which: str, n: int, seconds: float) -> None:
    """Subprocess body: cold MJX compile and steady stepping for one contact set; prints one JSON line."""
    os.environ["UPRIGHT_JAX_CACHE"] = ""
    from upright.sim.mjx import MjxSim
    from upright.tasks.standup.scene import standup_scene

    with _patched(SETS[which]):
        model = standup_scene()
    t0 = time.perf_counter()
    sim = MjxSim(model, n)
    t1 = time.perf_counter()
    ctrl = torch.zeros(n, model.nu)
    sim.step(ctrl, 4)
    float(sim.state.qpos.sum())
    t2 = time.perf_counter()
    k, t3 = 0, time.perf_counter()
    while time.perf_counter() - t3 < seconds or k < 3:
        sim.step(ctrl, 4)
        float(sim.state.qpos.sum())
        k += 1
    rate = k * n / (time.perf_counter() - t3)
    print(json.dumps({"npair": model.npair, "construct_s": t1 - t0, "first_step_s": t2 - t1, "env_steps_per_s": rate}))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4, help="rounds per contact set (alternating order)")
    p.add_argument("--seconds", type=float, default=3.0, help="timed env stepping per round and set")
    p.add_argument("--mj-seconds", type=float, default=1.0, help="timed mj_step per probe")
    p.add_argument("--mjx-envs", type=int, default=0, help="also time MJX (CPU JAX) at this N (0: skip)")
    p.add_argument("--mjx-timeout", type=float, default=900.0, help="seconds before an MJX child is retried")
    p.add_argument("--mjx-child", nargs=3, metavar=("SET", "N", "SECONDS"), help=argparse.SUPPRESS)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.mjx_child:
        mjx_child(args.mjx_child[0], int(args.mjx_child[1]), float(args.mjx_child[2]))
        return
    torch.set_num_threads(1)

    load0 = os.getloadavg()
    t_start = time.perf_counter()
    setup = {}
    for name, fn in SETS.items():
        with _patched(fn):
            from upright.tasks.standup.scene import standup_scene

            mj = bse.MjStepRate(standup_scene())
            env = bse.make_standup_env(args.num_envs, args.threads)
        step = bse.env_stepper(env, bse.random_actions(env, torch.Generator().manual_seed(0)))
        bse.warm_up(step, 1.0)
        setup[name] = {"mj": mj, "env": env, "step": step, "rows": []}
        print(f"{name}: npair {mj.model.npair}, settled-lying contacts {mj.ncon}", flush=True)

    names = list(SETS)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            s = setup[name]
            lying, lying_cpu = mj_rates(s["mj"], args.mj_seconds)
            meter = bse.CpuMeter().start()
            k, t0, c0 = 0, time.perf_counter(), time.process_time()
            while time.perf_counter() - t0 < args.seconds or k < 3:
                s["step"]()
                k += 1
            rate = k * args.num_envs / (time.perf_counter() - t0)
            rate_cpu = k * args.num_envs / (time.process_time() - c0)
            others = meter.stop()
            states, states_cpu, ncon = env_state_rates(s["env"], args.mj_seconds)
            sc_mean, sc_share = self_contacts(s["env"])
            row = {
                "lying": lying,
                "lying_cpu": lying_cpu,
                "env": rate,
                "env_cpu": rate_cpu,
                "env_states": states,
                "env_states_cpu": states_cpu,
                "ncon": ncon,
                "self_con": sc_mean,
                "self_share": sc_share,
                "others": others,
            }
            s["rows"].append(row)
            print(f"round {r} {name}: " + ", ".join(f"{k} {v:,.3g}" for k, v in row.items()), flush=True)

    mjx = {}
    if args.mjx_envs:
        for name in names:
            for attempt in range(1, 3):  # a child that hangs (seen once, all threads idle on a futex) is retried once
                try:
                    out = subprocess.run(
                        [sys.executable, __file__, "--mjx-child", name, str(args.mjx_envs), "10"],
                        capture_output=True,
                        text=True,
                        check=True,
                        timeout=args.mjx_timeout,
                    )
                    mjx[name] = json.loads(out.stdout.strip().splitlines()[-1]) | {"attempt": attempt}
                    break
                except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as err:
                    mjx[name] = {"error": f"{type(err).__name__} on attempt {attempt}"}
            print(f"mjx {name}: {mjx[name]}", flush=True)

    med = {n: {k: statistics.median(r[k] for r in setup[n]["rows"]) for k in setup[n]["rows"][0]} for n in names}
    old, new = names
    lines = [
        "# Self-collision pair list: throughput cost (`benchmarks/bench_self_collisions.py`)",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}; python {platform.python_version()}, "
        f"mujoco {mujoco.__version__}, torch {torch.__version__}; nproc {os.cpu_count()}",
        f"- load average at start {', '.join(f'{x:.2f}' for x in load0)}, at end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; others' CPU = share of all CPUs other processes used "
        "while the env stepped (median over rounds)",
        f"- command: `{' '.join([os.path.basename(sys.argv[0])] + sys.argv[1:])}`; {args.rounds} alternating rounds "
        f"per set, {args.seconds:g} s of env stepping and {args.mj_seconds:g} s per mj_step probe each; medians below",
        f"- env: StandupEnv, N = {args.num_envs}, {args.threads} backend threads, random actions in [-1, 1], "
        "domain randomisation off",
        "",
        "Rates per second of CPU time (the work per step; see the module docstring):",
        "",
        "| contact set | pairs | mj_step / CPU-s, settled lying | mj_step / CPU-s, env states | env-steps / CPU-s "
        "| contacts per env state | self-contacts per env state | env states with a self-contact |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in names:
        m = med[n]
        lines.append(
            f"| {n} | {setup[n]['mj'].model.npair} | {m['lying_cpu']:,.0f} | {m['env_states_cpu']:,.0f} "
            f"| {m['env_cpu']:,.0f} | {m['ncon']:.1f} | {m['self_con']:.2f} | {100 * m['self_share']:.0f} % |"
        )
    ratio = {k: med[new][k] / med[old][k] for k in med[new]}
    lines.append(
        f"| **sampled / legacy** | | **{ratio['lying_cpu']:.2f}** | **{ratio['env_states_cpu']:.2f}** "
        f"| **{ratio['env_cpu']:.2f}** | | | |"
    )
    lines += [
        "",
        "Rates per second of wall clock (what the run got, with other processes on the CPU):",
        "",
        "| contact set | mj_step/s, settled lying (1 thread) | mj_step/s, env states (1 thread) | env-steps/s "
        "| others' CPU |",
        "|---|---:|---:|---:|---:|",
    ]
    for n in names:
        m = med[n]
        lines.append(
            f"| {n} | {m['lying']:,.0f} | {m['env_states']:,.0f} | {m['env']:,.0f} | {100 * m['others']:.0f} % |"
        )
    lines.append(
        f"| **sampled / legacy** | **{ratio['lying']:.2f}** | **{ratio['env_states']:.2f}** | "
        f"**{ratio['env']:.2f}** | |"
    )

    def per_round(k):
        return ", ".join(f"{setup[new]['rows'][i][k] / setup[old]['rows'][i][k]:.2f}" for i in range(args.rounds))

    lines += [
        "",
        f"Per round, sampled / legacy: env-steps per CPU-s {per_round('env_cpu')}; env-steps/s {per_round('env')}.",
    ]
    if mjx:
        lines += [
            "",
            f"MJX (CPU JAX, `impl=jax`, N = {args.mjx_envs}, compilation cache off, each set in a fresh process, "
            "one after the other):",
            "",
            "| contact set | pairs | compile: MjxSim() incl. reset program (s) | compile: first step (s) "
            "| env-steps/s |",
            "|---|---:|---:|---:|---:|",
        ]
        for n in names:
            x = mjx[n]
            if "error" in x:
                lines.append(f"| {n} | | did not finish: {x['error']} | | |")
            else:
                lines.append(
                    f"| {n} | {x['npair']} | {x['construct_s']:.0f} | {x['first_step_s']:.0f} | "
                    f"{x['env_steps_per_s']:,.0f} |"
                )
    lines += ["", f"Wall time {time.perf_counter() - t_start:.0f} s."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    for s in setup.values():
        s["env"].close()


if __name__ == "__main__":
    main()
