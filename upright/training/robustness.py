"""Robustness battery: one standup policy under disruptions to its observations, actions and environment.

    python -m upright.training.robustness --policy upright/assets/policies/g1_standup_ground --episodes 200 --out DIR

Each row evaluates the same policy with HoST's evaluation protocol (:mod:`upright.training.evaluate`: 5 s
episodes, β fixed, no pull force, domain randomisation on unless ``--no-domain-rand``) plus one disruption
set through ``env.disturbance`` (:class:`upright.tasks.standup.randomization.DisturbanceCfg`), in the
manner of Robust-Gymnasium (observation, action and environment disruptions). Rows:

* nominal (no disruption);
* observation noise x2 (HoST's uniform noise, Table VIII, doubled);
* action delay 40 ms and 80 ms (8 and 16 physics substeps of 0.005 s);
* random pushes: horizontal velocity kicks of 0.5 and 1.0 m/s on the pelvis, every 2 s on average;
* torso payload 4, 8 and 12 kg (HoST Table V's payload tests);
* torque dropout 0.05, 0.1 and 0.2 (each policy joint limp for an env step with that probability);
* friction 0.2 on every contact.

Prints one Markdown table (E_succ and the other HoST metrics per row, plus the mean peak height and the mean
final head height, which show how far a policy that does not stand yet still gets) and writes ``robustness.md`` and
``robustness.csv`` under ``--out``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch

from upright.tasks.standup.terrains import POSTURE_NAMES, TERRAIN_NAMES
from upright.training.evaluate import (
    FINAL_HEAD,
    METRICS,
    PEAK,
    UNITS,
    make_eval_env,
    run_episodes,
    summarize,
    write_report,
)


@dataclass(frozen=True)
class Disruption:
    """One row of the battery."""

    name: str
    """Shown in the table."""
    kind: str
    """observation, action or environment (Robust-Gymnasium's disruption sites)."""
    overrides: tuple[str, ...]
    """Hydra overrides (``env.disturbance.*``) that apply it."""


BATTERY: tuple[Disruption, ...] = (
    Disruption("nominal", "-", ()),
    Disruption("observation noise x2", "observation", ("env.disturbance.obs_noise_scale=2.0",)),
    Disruption("action delay 40 ms", "action", ("env.disturbance.action_delay_substeps=8",)),
    Disruption("action delay 80 ms", "action", ("env.disturbance.action_delay_substeps=16",)),
    Disruption("pushes 0.5 m/s", "environment", ("env.disturbance.push_velocity=0.5",)),
    Disruption("pushes 1.0 m/s", "environment", ("env.disturbance.push_velocity=1.0",)),
    Disruption("payload 4 kg", "environment", ("env.disturbance.payload_kg=4.0",)),
    Disruption("payload 8 kg", "environment", ("env.disturbance.payload_kg=8.0",)),
    Disruption("payload 12 kg", "environment", ("env.disturbance.payload_kg=12.0",)),
    Disruption("torque dropout 0.05", "action", ("env.disturbance.torque_dropout=0.05",)),
    Disruption("torque dropout 0.1", "action", ("env.disturbance.torque_dropout=0.1",)),
    Disruption("torque dropout 0.2", "action", ("env.disturbance.torque_dropout=0.2",)),
    Disruption("friction 0.2", "environment", ("env.disturbance.friction=0.2",)),
)
"""The battery, in table order (the issue's list)."""


def battery_markdown(rows: list[tuple[Disruption, dict[str, float]]], episodes: int, note: str) -> str:
    """A Markdown table: one row per disruption with the HoST metrics (E_succ in %)."""
    lines = [
        f"| disruption | kind | episodes | {' | '.join(f'{m} ({UNITS[m]})' for m in METRICS)} | peak height (m) "
        "| final head height (m) |",
        "|---|---|---:|" + "---:|" * (len(METRICS) + 2),
    ]
    for d, res in rows:
        cells = [f"{res[m]:.2f}" for m in METRICS] + [f"{res[PEAK]:.3f}", f"{res[FINAL_HEAD]:.3f}"]
        lines.append(f"| {d.name} | {d.kind} | {episodes} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + note + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="run dir, model_<it>.pt or policy.onnx")
    parser.add_argument("--task", default="standup")
    parser.add_argument("--terrain", default="ground", choices=list(TERRAIN_NAMES))
    parser.add_argument("--posture", default="supine", choices=list(POSTURE_NAMES))
    parser.add_argument("--episodes", type=int, default=200, help="episodes per disruption")
    parser.add_argument("--num-envs", type=int, default=100)
    parser.add_argument("--episode-length-s", type=float, default=5.0)
    parser.add_argument("--beta", type=float, default=None, help="fixed action scale (default: the policy's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-domain-rand", action="store_true", help="disruptions on the nominal model")
    parser.add_argument("--only", nargs="*", default=None, help="run only these rows (names as in the table)")
    parser.add_argument("--out", default=None, help="folder for robustness.csv and robustness.md")
    parser.add_argument("overrides", nargs="*", help="extra task config overrides, e.g. sim.num_threads=2")
    args = parser.parse_args(argv)

    names = [d.name for d in BATTERY]
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            parser.error(f"--only: unknown rows {unknown}; valid: {names}")
    battery = [d for d in BATTERY if not args.only or d.name in args.only]
    torch.set_num_threads(1)
    rows: list[tuple[Disruption, dict[str, float]]] = []
    start = time.monotonic()
    beta_used = None
    for d in battery:
        env, policy, beta_used, _ = make_eval_env(
            args.policy,
            task=args.task,
            terrain=args.terrain,
            posture=args.posture,
            overrides=[*args.overrides, *d.overrides],
            num_envs=args.num_envs,
            episode_length_s=args.episode_length_s,
            beta=args.beta,
            domain_rand=not args.no_domain_rand,
            seed=args.seed,
            error=parser.error,
        )
        try:
            res = summarize(run_episodes(env, policy, args.episodes))
        finally:
            env.close()
        rows.append((d, res))
        print(
            f"{d.name:24s} E_succ {res['E_succ']:6.2f} %  peak height {res[PEAK]:.3f} m  "
            f"final head {res[FINAL_HEAD]:.3f} m",
            flush=True,
        )
    seconds = time.monotonic() - start
    note = (
        f"Policy `{args.policy}`, terrain {args.terrain}, posture {args.posture}, β = {beta_used}, "
        f"{args.episode_length_s} s episodes, no pull force, domain randomisation "
        f"{'off' if args.no_domain_rand else 'on (HoST spec §6)'}; {args.episodes} episodes per row, "
        f"{seconds:.0f} s in all. Disruptions: `env.disturbance` (upright.tasks.standup.randomization)."
    )
    md = battery_markdown(rows, args.episodes, note)
    print(md)
    if args.out:
        table = [
            [d.name, d.kind, args.episodes, *(f"{res[m]:.4f}" for m in (*METRICS, PEAK, FINAL_HEAD))] for d, res in rows
        ]
        header = ["disruption", "kind", "episodes", *METRICS, PEAK, FINAL_HEAD]
        write_report(args.out, "robustness", md, header, table)


if __name__ == "__main__":
    main()
