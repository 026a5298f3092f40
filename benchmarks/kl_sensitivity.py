"""How far one Adam step moves the standup policy: KL and action-mean change per learning rate.

Diagnoses why rsl_rl's adaptive-KL schedule (desired KL 0.01, lr clamped to [1e-5, 1e-2]) sits at its 1e-5 floor
in this project's ground runs. From a checkpoint, it collects one rollout of HoST's 50 env steps per env (domain
randomisation off, L2C2 off), takes the first of the 4 minibatches, and for each learning rate applies **one** Adam
step of the clipped PPO surrogate + entropy loss (the checkpoint's optimizer state, and a fresh Adam), then reports
on the same minibatch:

- ``KL``: mean KL(pi_old || pi_new) over the minibatch, summed over the action dimensions (rsl_rl's measure);
- ``rms dmu``: root-mean-square change of the action mean (tanh output, action units);
- ``max dstd``: the largest change of the state-independent std.

Also printed: what 20 such steps (5 epochs x 4 minibatches) can move the std at the 1e-5 floor.

Usage: ``python benchmarks/kl_sensitivity.py --checkpoint logs/standup/<run>/model_N.pt [--num-envs 128]``.
Needs ``MENAGERIE_ROOT``. Writes a Markdown table to stdout (and to ``--out`` if given).
"""

from __future__ import annotations

import argparse
import copy
import pathlib

import torch
from hydra import compose, initialize

from upright.conf import register_configs
from upright.tasks.registry import make_env, policy_metadata
from upright.training.rsl_rl_cfg import rsl_rl_config
from upright.training.runner import UprightRunner
from upright.training.std_learning_rate import std_parameter

LEARNING_RATES = (1e-5, 1e-4, 1e-3)


def one_step(alg, batch, lr: float, fresh: bool, actor_state: dict, opt_state: dict) -> tuple[float, float, float]:
    """(KL, rms dmu, max dstd) after one Adam step at ``lr`` from the saved actor/optimizer state."""
    actor = alg.actor
    actor.load_state_dict(actor_state)
    alg.optimizer.load_state_dict(opt_state)
    opt = torch.optim.Adam(actor.parameters(), lr=lr) if fresh else alg.optimizer
    for group in opt.param_groups:
        group["lr"] = lr
    std0 = std_parameter(actor).detach().clone()
    actor(batch.observations, stochastic_output=True)
    ratio = torch.exp(actor.get_output_log_prob(batch.actions) - batch.old_actions_log_prob.squeeze(-1))
    adv = batch.advantages.squeeze(-1)
    surrogate = torch.max(-adv * ratio, -adv * ratio.clamp(1 - alg.clip_param, 1 + alg.clip_param)).mean()
    loss = surrogate - alg.entropy_coef * actor.output_entropy.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        actor(batch.observations, stochastic_output=True)
        new = actor.output_distribution_params
        kl = actor.get_kl_divergence(batch.old_distribution_params, new).mean().item()
        dmu = (new[0] - batch.old_distribution_params[0]).square().mean().sqrt().item()
        dstd = (std_parameter(actor).detach() - std0).abs().max().item()
    return kl, dmu, dstd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, type=pathlib.Path)
    parser.add_argument("--num-envs", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose(
            "config",
            overrides=[
                "task=standup",
                "recipe=host",
                f"env.num_envs={args.num_envs}",
                f"sim.num_threads={args.threads}",
                "train.l2c2_policy_coef=0",
                "train.l2c2_value_coef=0",
                "env.domain_rand.enabled=false",
            ],
        )
    env = make_env("standup", cfg.env, cfg.sim, device="cpu", seed=0)
    train_cfg = rsl_rl_config(cfg.train)
    runner = UprightRunner(env, train_cfg, log_dir=None, device="cpu", onnx_metadata=policy_metadata("standup", env))
    runner.load(str(args.checkpoint))
    alg = runner.alg
    obs = env.get_observations()
    with torch.inference_mode():
        for _ in range(train_cfg["num_steps_per_env"]):
            obs, rew, dones, extras = env.step(alg.act(obs))
            alg.process_env_step(obs, rew, dones, extras)
        alg.compute_returns(obs)
    batch = next(iter(alg.storage.mini_batch_generator(alg.num_mini_batches, 1)))
    actor_state, opt_state = copy.deepcopy(alg.actor.state_dict()), copy.deepcopy(alg.optimizer.state_dict())
    std = std_parameter(alg.actor).detach()
    lines = [
        f"checkpoint `{args.checkpoint}`, {args.num_envs} envs x {train_cfg['num_steps_per_env']} steps, "
        f"minibatch {batch.observations.batch_size[0]}; std mean {std.mean():.3f}",
        "",
        "| Adam state | lr | KL after 1 step | rms dmu | max dstd |",
        "|---|---|---|---|---|",
    ]
    for fresh in (False, True):
        for lr in LEARNING_RATES:
            kl, dmu, dstd = one_step(alg, batch, lr, fresh, actor_state, opt_state)
            lines.append(f"| {'fresh' if fresh else 'checkpoint'} | {lr:g} | {kl:.4g} | {dmu:.4f} | {dstd:.2e} |")
    steps = alg.num_learning_epochs * alg.num_mini_batches
    lines += [
        "",
        f"At the 1e-5 floor one update ({steps} Adam steps) moves the std by at most about {steps * 1e-5:.1e}.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
