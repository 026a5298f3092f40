"""PPO update time of the multi-critic setup: HoST's settings against cheaper variants, in one run.

The update, not the physics, is most of a training iteration on a 2-core CPU (TensorBoard ``Perf/learning_time``
~14 s against ``Perf/collection_time`` ~4 s per iteration of 512 envs x 50 env steps). HoST's four critics
(456 -> [512, 256] -> 1 each) are about 3/4 of the update's FLOPs; ``train.critic_shared_trunk=true`` replaces them
with one trunk and four linear heads.

Method: the training entry point's own rsl-rl dict (``rsl_rl_config(TrainCfg(...))``, HoST sizes, L2C2 on) builds
``MultiCriticPPO`` for each variant; one rollout of random observations (456 = 6 x 76, as the standup env) of
``--num-envs`` x ``--steps`` transitions fills each storage once; then ``update()`` (5 epochs x 4 minibatches) is
timed ``--reps`` times per variant, the variants alternating (ABBA order) so that load drift on a shared machine
hits both alike. The rollout is restored before each timed update, so every update does identical work. Reported:
median seconds per update for each variant and its ratio to HoST's (medians of the same run).

Variants (``--variants``, names from :data:`VARIANTS`; each is a set of ``train.*`` overrides): ``host`` (HoST: four
separate critics, 5 epochs x 4 mini-batches, L2C2, fp32), ``shared`` (+ one critic trunk), ``shared_bf16``
(+ bfloat16 autocast), ``shared_bf16_e2`` (+ 2 epochs), ``shared_bf16_small`` (+ actor [256, 128, 128], critic
trunk [256, 256]), ``upright`` (:class:`upright.conf.train_cfg.TrainCfg`'s defaults: HoST's recipe, ``recipe=host``).

Usage: ``python benchmarks/bench_ppo_update.py [--num-envs 512] [--steps 50] [--reps 4] [--threads 0]
[--variants host shared ...] [--out F]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import time

import torch
from omegaconf import OmegaConf
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from upright.conf.train_cfg import TrainCfg
from upright.training.multi_critic_ppo import MultiCriticPPO
from upright.training.rsl_rl_cfg import rsl_rl_config

OBS_DIM = 456
"""Standup observation: 6 frames of 76 (HoST)."""
NUM_ACTIONS = 23


class RandomEnv(VecEnv):
    """Random observations, rewards and 2 % episode ends; only the update's cost is of interest."""

    def __init__(self, num_envs: int):
        self.num_envs, self.num_actions, self.device, self.cfg = num_envs, NUM_ACTIONS, "cpu", {}
        self.max_episode_length = 500
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)

    def get_observations(self) -> TensorDict:
        x = torch.randn(self.num_envs, OBS_DIM)
        return TensorDict({"actor": x, "critic": x.clone()}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor):
        done = torch.rand(self.num_envs) < 0.02
        extras = {"time_outs": done, "reward_groups": torch.randn(self.num_envs, 4)}
        return self.get_observations(), torch.zeros(self.num_envs), done.long(), extras


SMALL = {"actor_hidden_dims": [256, 128, 128], "critic_hidden_dims": [256, 256]}
VARIANTS: dict[str, dict] = {
    "host": {},
    "shared": {"critic_shared_trunk": True},
    "shared_bf16": {"critic_shared_trunk": True, "use_mixed_precision": True},
    "shared_bf16_e2": {"critic_shared_trunk": True, "use_mixed_precision": True, "num_learning_epochs": 2},
    "shared_bf16_small": {"critic_shared_trunk": True, "use_mixed_precision": True, **SMALL},
}
"""``train.*`` overrides of each variant (on top of :class:`~upright.conf.train_cfg.TrainCfg`, HoST's values)."""


def build(overrides: dict, env: RandomEnv, steps: int) -> MultiCriticPPO:
    """A MultiCriticPPO with ``overrides`` on HoST's settings and a filled rollout storage."""
    torch.manual_seed(0)
    cfg = rsl_rl_config(OmegaConf.structured(TrainCfg(num_steps_per_env=steps, **overrides)))
    with contextlib.redirect_stdout(io.StringIO()):
        alg = MultiCriticPPO.construct_algorithm(env.get_observations(), env, cfg, "cpu")
    obs = env.get_observations()
    with torch.inference_mode():
        for _ in range(steps):
            obs, _, dones, extras = env.step(alg.act(obs))
            alg.process_env_step(obs, torch.zeros(env.num_envs), dones, extras)
        alg.compute_returns(obs)
    return alg


def timed_update(alg: MultiCriticPPO, steps: int) -> float:
    """Seconds for one ``update()`` on the stored rollout (the storage is re-armed, the weights keep moving)."""
    alg.storage.step, alg.storage.has_last_observations = steps, True  # update() clears both
    t0 = time.perf_counter()
    alg.update()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, default=512)
    parser.add_argument("--steps", type=int, default=50, help="env steps per env per rollout (HoST 50)")
    parser.add_argument("--reps", type=int, default=4, help="timed updates per variant")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = all CPUs, as train.py's update)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", help="also write the Markdown report here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    env = RandomEnv(args.num_envs)
    algs = {name: build(VARIANTS[name], env, args.steps) for name in args.variants}
    params = {k: sum(p.numel() for p in a.critic.parameters()) for k, a in algs.items()}
    for alg in algs.values():  # untimed warm-up
        timed_update(alg, args.steps)
    times: dict[str, list[float]] = {k: [] for k in algs}
    for rep in range(args.reps):
        order = list(algs) if rep % 2 == 0 else list(reversed(algs))
        for name in order:
            times[name].append(timed_update(algs[name], args.steps))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med.get("host")
    lines = [
        f"PPO update, {args.num_envs} envs x {args.steps} steps, torch threads {torch.get_num_threads()}, "
        f"{args.reps} timed updates per variant (alternating order)",
        "",
        "| variant | overrides | critic parameters | median update (s) | ratio to host | all updates (s) |",
        "|---|---|---|---:|---:|---|",
        *[
            f"| {k} | {VARIANTS[k] or 'HoST'} | {params[k]:,} | {med[k]:.2f} | "
            f"{(med[k] / base) if base else float('nan'):.3f} | {', '.join(f'{t:.2f}' for t in times[k])} |"
            for k in algs
        ],
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
