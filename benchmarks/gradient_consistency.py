"""Gradient consistency of one PPO rollout: is the policy gradient of a batch shape signal or noise?

    python benchmarks/gradient_consistency.py --shapes 512x50 1024x24 2048x12 --seeds 1 2 [--splits 8]
        [--recipe getup|host] [--checkpoint logs/standup/<run>/model_<it>.pt] [--mask-settle] [--time-update]
        [--out docs/experiments/gradient_consistency.csv] [env.*=... train.*=...]

For each batch shape N envs x T steps per env and each seed: build the env and the PPO runner exactly as
``train.py`` does (``task=standup recipe=<recipe>``, ``env.num_envs=N``, ``train.num_steps_per_env=T``; from the
checkpoint's weights when given, else the initial ones), collect one rollout with random initial episode lengths (as
training's first iteration), compute GAE and the combined advantages as the PPO update does, then split the ENVS in
two random halves and compute, per half, the gradient of the PPO surrogate at the rollout's own policy (ratio 1,
so the clip is inactive): g = -grad mean(A * log pi(a|s)) over the actor's parameters. The cosine between the two
halves' gradients, over ``--splits`` random splits, says how much of the gradient is shared by independent
trajectories (1: all signal; ~0: noise). ``--mask-settle`` leaves out the samples of the settle/unactuated phase,
whose actions are ignored by the env.

Timing: the collection's env-steps/s and, with ``--time-update``, the wall time of one full PPO update
(``num_learning_epochs x num_mini_batches``) are printed; they are only a cost figure when the machine is idle
(the output says what else ran is up to the caller).

Output: one row per (shape, seed): mean, min and max cosine over the splits, settle fraction, collection rate,
update time; ``--out`` writes them as CSV.
"""

from __future__ import annotations

import argparse
import csv
import gc
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # benchmarks/machine.py


def build(recipe: str, n: int, t: int, seed: int, overrides: list[str]):
    """Env and runner of ``task=standup recipe=<recipe>`` with N envs and T steps per env (as train.py)."""
    from hydra import compose, initialize

    from upright.conf import register_configs
    from upright.tasks.registry import make_env, policy_metadata
    from upright.training.rsl_rl_cfg import rsl_rl_config
    from upright.training.runner import UprightRunner
    from upright.training.train_loop import seed_everything

    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose(
            "config",
            overrides=[
                "task=standup",
                f"recipe={recipe}",
                f"env.num_envs={n}",
                f"train.num_steps_per_env={t}",
                f"seed={seed}",
                *overrides,
            ],
        )
    seed_everything(seed)
    env = make_env("standup", cfg.env, cfg.sim, device="cpu", seed=seed)
    meta = policy_metadata("standup", env)
    runner = UprightRunner(
        env,
        rsl_rl_config(cfg.train),
        log_dir=None,
        device="cpu",
        onnx_metadata=meta,
        update_threads=cfg.train.update_threads,
    )
    return env, runner, cfg


def rollout(env, runner, t: int) -> torch.Tensor:
    """Collect T env steps into the runner's storage and compute returns; return (T, N) bool: the env acted."""
    env.episode_length_buf = torch.randint_like(env.episode_length_buf, high=int(env.max_episode_length))
    obs = env.get_observations()
    alg = runner.alg
    alg.train_mode()
    acted = []
    with torch.inference_mode():
        for _ in range(t):
            acted.append(env.episode_length_buf >= env.cfg.unactuated_steps)
            actions = alg.act(obs)
            obs, rewards, dones, extras = env.step(actions)
            alg.process_env_step(obs, rewards, dones, extras)
        alg.compute_returns(obs)
    return torch.stack(acted)


def half_gradient(runner, env_ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Flat gradient of -mean(A log pi(a|s)) over the actor's parameters, on the rollout samples of ``env_ids``."""
    st, actor = runner.alg.storage, runner.alg.actor
    obs = st.observations[:, env_ids].flatten(0, 1)
    actions = st.actions[:, env_ids].flatten(0, 1)
    adv = st.advantages[:, env_ids].flatten(0, 1).squeeze(-1)
    keep = mask[:, env_ids].flatten() if mask is not None else torch.ones_like(adv, dtype=torch.bool)
    params = [p for p in actor.parameters() if p.requires_grad]
    actor.zero_grad()
    actor(obs.clone(), stochastic_output=True)
    logp = actor.get_output_log_prob(actions.clone())
    loss = -(adv.clone() * logp)[keep].mean()
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params)])


def consistency(runner, n: int, splits: int, mask: torch.Tensor | None, seed: int) -> list[float]:
    """Cosines between the two halves' gradients over ``splits`` random splits of the N envs."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    out = []
    for _ in range(splits):
        perm = torch.randperm(n, generator=gen)
        a, b = half_gradient(runner, perm[: n // 2], mask), half_gradient(runner, perm[n // 2 :], mask)
        out.append(float(torch.nn.functional.cosine_similarity(a, b, dim=0)))
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["512x50", "1024x24", "2048x12"], help="NxT batch shapes")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    p.add_argument("--splits", type=int, default=8)
    p.add_argument("--recipe", default="getup")
    p.add_argument("--checkpoint", default=None, help="model_<it>.pt whose weights the policy starts from")
    p.add_argument("--mask-settle", action="store_true", help="leave out the samples whose action the env ignores")
    p.add_argument("--time-update", action="store_true", help="also time one full PPO update")
    p.add_argument("--out", default=None, help="CSV file of the rows")
    args, overrides = p.parse_known_args(argv)
    torch.set_num_threads(1)
    rows = []
    for shape in args.shapes:
        n, t = (int(x) for x in shape.lower().split("x"))
        for seed in args.seeds:
            env, runner, cfg = build(args.recipe, n, t, seed, overrides)
            if args.checkpoint:
                runner.load(args.checkpoint, map_location="cpu")
            start = time.perf_counter()
            acted = rollout(env, runner, t)
            rate = n * t / (time.perf_counter() - start)
            cos = consistency(runner, n, args.splits, acted if args.mask_settle else None, seed)
            update_s = float("nan")
            if args.time_update:
                torch.set_num_threads(max(1, int(cfg.train.update_threads) or torch.get_num_threads()))
                start = time.perf_counter()
                runner.alg.update()
                update_s = time.perf_counter() - start
                torch.set_num_threads(1)
            row = {
                "recipe": args.recipe,
                "envs": n,
                "steps": t,
                "samples": n * t,
                "seed": seed,
                "cos_mean": sum(cos) / len(cos),
                "cos_min": min(cos),
                "cos_max": max(cos),
                "settle_fraction": float(1 - acted.float().mean()),
                "collect_env_steps_per_s": rate,
                "update_s": update_s,
                "masked": bool(args.mask_settle),
                "checkpoint": args.checkpoint or "init",
            }
            rows.append(row)
            if args.out:  # row by row: a run stopped part way keeps what it measured
                path = pathlib.Path(args.out)
                path.parent.mkdir(parents=True, exist_ok=True)
                new = not path.exists() or len(rows) == 1
                with path.open("w" if new else "a", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=list(row))
                    if new:
                        w.writeheader()
                    w.writerow(row)
            print(
                f"{args.recipe} {n:5d} x {t:3d} seed {seed}: cos {row['cos_mean']:+.3f} "
                f"[{row['cos_min']:+.3f}, {row['cos_max']:+.3f}]  settle {row['settle_fraction']:.1%}  "
                f"collect {rate:,.0f} env-steps/s  update {update_s:.1f} s",
                flush=True,
            )
            env.close()
            del env, runner
            gc.collect()  # a 4,096-env native backend holds ~7 GB of MjData: free it before the next shape


if __name__ == "__main__":
    main()
