"""Evaluate a standup policy with HoST's metrics and print them beside the paper's Table III.

    python -m upright.training.evaluate --policy logs/standup/<run> --episodes 500 --out docs/eval [env.* overrides]

Protocol (HoST ``scripts/eval``; spec §7): episodes of 5 s from the reset distribution of training,
β fixed (the policy file's ``action_scale`` unless ``--beta``), no observation noise, no pull force.
Each wave resets all ``--num-envs`` envs together and runs one full episode; a terminated env counts
as a failure. E_succ is over all episodes; E_feet and E_engy are over the successful ones (both are
defined relative to the first standing step); E_smth is over all episodes.
"""

from __future__ import annotations

import argparse
import csv
import math
import pathlib
import time

import torch
from hydra import compose, initialize

from upright.conf import register_configs
from upright.tasks.registry import make_env
from upright.tasks.standup import metrics

METRICS = ("E_succ", "E_feet", "E_smth", "E_engy")
UNITS = {"E_succ": "%", "E_feet": "cm²/step", "E_smth": "deg-scaled", "E_engy": "kJ"}


def run_episodes(env, policy, episodes: int) -> dict[str, torch.Tensor]:
    """Run ``episodes`` full episodes (in waves of ``env.num_envs``); return per-episode metrics (E,)."""
    n, steps = env.num_envs, env.max_episode_length
    results: dict[str, list[torch.Tensor]] = {k: [] for k in METRICS}
    done_episodes = 0
    while done_episodes < episodes:
        env.reset_all()
        obs = env.get_observations()["actor"]
        hist = {k: [] for k in ("h", "feet", "q", "dq", "tau", "actuated")}
        alive = torch.ones(n, dtype=torch.bool)
        for t in range(steps):
            with torch.no_grad():
                actions = policy(obs)
            actuated = env.episode_length_buf >= env.cfg.unactuated_steps
            obs_td, _, dones, extras = env.step(actions)
            obs = obs_td["actor"]
            terminated = dones.bool() & ~extras["time_outs"]
            s = env.last_state  # the state the step ended in, before any reset
            alive &= ~terminated
            hist["h"].append(torch.where(alive, s.base_height, torch.zeros_like(s.base_height)))
            hist["feet"].append(s.ankle_pos)
            hist["q"].append(s.q)
            hist["dq"].append(s.dq)
            hist["tau"].append(s.tau)
            hist["actuated"].append(actuated)
        h = torch.stack(hist["h"], 1)
        ok = metrics.success(h) & alive
        results["E_succ"].append(ok.float() * 100.0)
        feet = metrics.feet_movement(torch.stack(hist["feet"], 1), h)
        energy = metrics.energy(torch.stack(hist["dq"], 1), torch.stack(hist["tau"], 1), h, dt=env.step_dt)
        results["E_feet"].append(torch.where(ok, feet, torch.full_like(feet, math.nan)))
        results["E_engy"].append(torch.where(ok, energy, torch.full_like(energy, math.nan)))
        results["E_smth"].append(metrics.smoothness(torch.stack(hist["q"], 1), torch.stack(hist["actuated"], 1)))
        done_episodes += n
    return {k: torch.cat(v)[:episodes] for k, v in results.items()}


def summarize(per_episode: dict[str, torch.Tensor]) -> dict[str, float]:
    """Means over episodes (NaN entries, e.g. E_feet of failures, are skipped)."""
    out = {}
    for k, v in per_episode.items():
        finite = v[~torch.isnan(v)]
        out[k] = float(finite.mean()) if finite.numel() else math.nan
    return out


def table_markdown(terrain: str, ours: dict[str, float], episodes: int, extra: str = "") -> str:
    """A Markdown table of our metrics beside HoST's Table III row for ``terrain``."""
    paper = metrics.PAPER_TABLE_III[terrain]
    lines = [
        f"| terrain | source | episodes | {' | '.join(f'{m} ({UNITS[m]})' for m in METRICS)} |",
        "|---|---|---:|" + "---:|" * len(METRICS),
        f"| {terrain} | upright | {episodes} | " + " | ".join(f"{ours[m]:.2f}" for m in METRICS) + " |",
        f"| {terrain} | HoST Table III | 1250 | " + " | ".join(f"{paper[m]:.2f}" for m in METRICS) + " |",
    ]
    return "\n".join(lines) + ("\n\n" + extra if extra else "") + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="run dir, model_<it>.pt, policy.onnx, zero or random")
    parser.add_argument("--task", default="standup")
    parser.add_argument("--terrain", default="ground", choices=sorted(metrics.PAPER_TABLE_III))
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--num-envs", type=int, default=100)
    parser.add_argument("--episode-length-s", type=float, default=5.0)
    parser.add_argument("--beta", type=float, default=None, help="fixed action scale (default: the policy's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="folder for eval.csv and eval.md")
    parser.add_argument("overrides", nargs="*", help="task config overrides, e.g. sim.num_threads=2")
    args = parser.parse_args(argv)

    from upright.viewer.policy import load_policy

    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose("config", overrides=[f"task={args.task}", *args.overrides])
    cfg.env.num_envs = args.num_envs
    cfg.env.episode_length_s = args.episode_length_s
    cfg.env.obs_noise = False
    cfg.env.curriculum.enabled = False  # no pull force; β fixed below
    cfg.train.init_at_random_ep_len = False
    env = make_env(cfg.task_name, cfg.env, cfg.sim, device="cpu", seed=args.seed)
    policy = load_policy(args.policy, env, cfg.task_name, cfg.train, seed=args.seed)
    beta = args.beta if args.beta is not None else getattr(policy, "metadata", {}).get("action_scale", cfg.env.curriculum.beta_min)
    env.beta[:] = float(beta)
    torch.set_num_threads(1)
    start = time.monotonic()
    per_episode = run_episodes(env, policy, args.episodes)
    ours = summarize(per_episode)
    seconds = time.monotonic() - start
    note = (f"Policy `{args.policy}`, β = {beta}, {args.episode_length_s} s episodes, no observation noise, "
            f"no pull force; {args.episodes} episodes in {seconds:.0f} s.")  # fmt: skip
    md = table_markdown(args.terrain, ours, args.episodes, note)
    print(md)
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "eval.md").write_text(md)
        with open(out / "eval.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["terrain", "episodes", *METRICS])
            writer.writerow([args.terrain, args.episodes, *(f"{ours[m]:.4f}" for m in METRICS)])
        print(f"wrote {out / 'eval.md'} and {out / 'eval.csv'}")
    env.close()


if __name__ == "__main__":
    main()
