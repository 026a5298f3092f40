"""How long does a standup policy keep a standing G1 up? (issue 12 leading indicator for balance)

Builds the standup env with every episode (but the 1 % the rise-path fraction cannot reach) starting on the rise
path at u >= ``--u`` (standing), placed quiet (``--settle`` s of settling, default 0: no velocity), domain
randomisation on, no observation noise, absolute actions with β 0.5, and runs each given policy deterministically
for ``--secs`` s. An episode fails when the head drops 0.25 m below its start (``env.rise_path.fall_drop``).

Usage::

    python benchmarks/standup_balance_survival.py zero logs/standup/<run>/model_100.pt [...]

Prints per policy: rise-path envs, how many fell, how many lasted and ended with the head above 0.9 m, and the
mean survival time (s). ``zero`` is the zero action (hold the default pose).
"""

from __future__ import annotations

import argparse

import torch
from hydra import compose, initialize

from upright.conf import register_configs
from upright.tasks.registry import make_env
from upright.viewer.policy import load_policy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("policies", nargs="+", help="checkpoints, run directories, .onnx files or 'zero'")
    ap.add_argument("--u", type=float, default=0.9, help="lowest rise-path coordinate (0.9: standing)")
    ap.add_argument("--envs", type=int, default=128)
    ap.add_argument("--secs", type=float, default=4.0)
    ap.add_argument("--settle", type=float, default=0.0, help="longest settling of the starts, s")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    register_configs()
    overrides = [
        "task=standup",
        "recipe=fast",
        "env.action_mode=absolute",
        "env.rise_path.fraction=0.99",
        f"env.rise_path.u_min={a.u}",
        "env.rise_path.settle_min=0",
        f"env.rise_path.settle_max={a.settle}",
        f"env.rise_path.episode_length_s={a.secs}",
        "env.rise_path.fall_drop=0.25",
        "env.state_archive.fraction=0",
        "env.assisted_start.fraction=0",
        "env.curriculum.beta_init=0.5",
        "env.curriculum.beta_min=0.5",
    ]
    with initialize(version_base=None, config_path=None):
        cfg = compose("config", overrides=overrides)
    cfg.env.num_envs, cfg.env.obs_noise, cfg.env.curriculum.enabled = a.envs, False, False
    cfg.train.init_at_random_ep_len, cfg.sim.num_threads = False, 1
    for source in a.policies:
        env = make_env("standup", cfg.env, cfg.sim, device="cpu", seed=a.seed)
        env.beta[:] = 0.5
        policy = (
            (lambda obs: torch.zeros(a.envs, 23))
            if source == "zero"
            else load_policy(source, env, "standup", cfg.train, seed=a.seed)
        )
        env.reset_all()
        obs = env.get_observations()["actor"]
        on = env.on_path.clone()
        alive = torch.ones(a.envs, dtype=torch.bool)
        stood = torch.zeros(a.envs, dtype=torch.bool)
        life = torch.zeros(a.envs)
        for _ in range(round(a.secs / env.step_dt)):
            with torch.no_grad():
                actions = policy(obs)
            obs_td, _, dones, extras = env.step(actions)
            obs = obs_td["actor"]
            alive &= ~(dones.bool() & ~extras["time_outs"])
            life += alive.float()
            stood |= dones.bool() & extras["time_outs"] & alive & (env.last_state.head_height > 0.9)
        print(
            f"{source}: rise-path envs {int(on.sum())}  fell {int((~alive & on).sum())}  "
            f"stood {int((stood & on).sum())}"
            f"  mean survival {float((life[on] * env.step_dt).mean()):.2f} s (of {a.secs})",
            flush=True,
        )


if __name__ == "__main__":
    main()
