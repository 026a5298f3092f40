"""How long a ``recipe=getup`` policy keeps a standing G1 up: a leading indicator that moves before E_succ does.

    python benchmarks/getup_standing_probe.py logs/standup/<run>/model_<it>.pt [more checkpoints]
        [--episodes 100] [--seconds 6] [--no-domain-rand] [--seed 0]

Each checkpoint (or ``policy.onnx``) runs in the evaluation env of ``python -m upright.training.evaluate`` (its
:func:`~upright.training.evaluate.make_eval_env`: the policy's MDP and action scale, no observation noise, domain
randomisation on unless ``--no-domain-rand``), except that every episode starts standing in the default pose (the
get-up MDP's standing start) instead of lying. Reported per checkpoint: the fraction of robots whose pelvis stays
above 0.5 m for the whole episode, and the mean time until it first falls below 0.5 m (s; the episode length for
those that never fall). Same evaluation seed for every checkpoint, so the start states and randomisation match.
"""

from __future__ import annotations

import argparse
import sys

import torch


def standing_probe(policy: str, episodes: int, seconds: float, domain_rand: bool, seed: int) -> tuple[float, float]:
    """(fraction still up at the end, mean seconds until the pelvis first went below 0.5 m) over ``episodes``."""
    from upright.training.evaluate import make_eval_env

    env, act, _, _ = make_eval_env(
        policy,
        num_envs=episodes,
        episode_length_s=seconds,
        domain_rand=domain_rand,
        seed=seed,
        overrides=["sim.num_threads=1"],
    )
    try:
        if "getup" not in env.cfg or str(env.cfg.mdp) != "getup":
            raise ValueError(f"{policy} is not a recipe=getup policy (its env has no standing starts)")
        env.cfg.getup.stand_fraction, env.cfg.getup.fall_fraction = 1.0, 0.0
        env.reset_all()
        obs = env.get_observations()["actor"]
        up = torch.ones(episodes, dtype=torch.bool)
        fell_at = torch.full((episodes,), float(env.max_episode_length))
        for t in range(env.max_episode_length):
            obs = env.step(act(obs))[0]["actor"]
            newly = up & (env.last_state.base_pos[:, 2] < 0.5)
            fell_at[newly] = float(t + 1)
            up &= ~newly
        return float(up.float().mean()), float(fell_at.mean()) * env.step_dt
    finally:
        env.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("policies", nargs="+", help="checkpoints model_<it>.pt or policy.onnx files of recipe=getup runs")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--seconds", type=float, default=6.0, help="episode length, s (default 6, the MDP's)")
    p.add_argument("--no-domain-rand", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print("| policy | still up at the end | mean time up (s) |\n|---|---:|---:|")
    for policy in args.policies:
        try:
            frac, mean_up = standing_probe(policy, args.episodes, args.seconds, not args.no_domain_rand, args.seed)
        except ValueError as err:
            sys.exit(f"error: {err}")
        print(f"| {policy} | {frac:.2f} | {mean_up:.2f} |", flush=True)


if __name__ == "__main__":
    main()
