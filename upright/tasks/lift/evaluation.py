"""The lift evaluation protocol without the configs and the policy loading: episodes run in waves, their summary and
the report. The evaluation env is composed from the configs by
:func:`upright.training.lift_evaluate.make_lift_eval_env` (:mod:`upright.training.lift_evaluate` is the CLI that loads
a policy and runs it); the VLA evaluation (:mod:`upright.vla.evaluate_lift`) and demonstration recording
(:mod:`upright.training.record_demos`) use the same protocol."""

from __future__ import annotations

import csv
import pathlib
from collections.abc import Callable

import torch

METRICS = ("success", "success_at_end", "time_to_success_s", "final_distance_m")


def run_episodes(
    env, act: Callable[[], torch.Tensor], episodes: int, on_reset: Callable | None = None
) -> dict[str, torch.Tensor]:
    """Run ``episodes`` full episodes of ``env`` (in waves of ``env.num_envs``); return per-episode values (E,).

    Args:
        env: a :class:`~upright.tasks.lift.env.LiftEnv`.
        act: returns the (N, 8) actions for the env's current observation/state.
        episodes: number of episodes E.
        on_reset: called with the ids of envs that reset (the expert restarts its phases there).

    Returns:
        ``success`` (bool as float), ``success_at_end``, ``time_to_success_s`` (NaN where no success),
        ``final_distance_m`` (cube to target at the episode's last step).
    """
    n = env.num_envs
    out: dict[str, list[torch.Tensor]] = {k: [] for k in METRICS}
    done_episodes = 0
    while done_episodes < episodes:
        env.reset_all()
        if on_reset is not None:
            on_reset(torch.arange(n))
        finished = torch.zeros(n, dtype=torch.bool)
        values = {k: torch.full((n,), float("nan")) for k in METRICS}
        for _ in range(env.max_episode_length):
            _, _, dones, _ = env.step(act())
            new = dones.bool().cpu() & ~finished
            if new.any():
                ids = new.nonzero().flatten()
                values["success"][ids] = env.success_once_at_done[ids].float().cpu()
                values["success_at_end"][ids] = env.last_success[ids].float().cpu()
                step = env.success_step_at_done[ids].float().cpu()
                nan = torch.tensor(float("nan"))
                values["time_to_success_s"][ids] = torch.where(step >= 0, step * env.step_dt, nan)
                values["final_distance_m"][ids] = env.last_state.cube_to_target.norm(dim=-1)[ids].cpu()
                finished |= new
                if on_reset is not None:
                    on_reset(ids)
            if finished.all():
                break
        take = min(n, episodes - done_episodes)
        for k in METRICS:
            out[k].append(values[k][:take])
        done_episodes += take
    return {k: torch.cat(v) for k, v in out.items()}


def summarize(per_episode: dict[str, torch.Tensor]) -> dict[str, float]:
    """Means over episodes (time to success over the successful ones)."""
    t = per_episode["time_to_success_s"]
    return {
        "success": float(per_episode["success"].mean()),
        "success_at_end": float(per_episode["success_at_end"].mean()),
        "time_to_success_s": float(t[~torch.isnan(t)].mean()) if (~torch.isnan(t)).any() else float("nan"),
        "final_distance_m": float(per_episode["final_distance_m"].mean()),
    }


def write_report(
    policy: str,
    episodes: int,
    s: dict[str, float],
    cfg,
    seed: int,
    seconds: float,
    out: str | None = None,
    note: str = "",
) -> str:
    """Print the lift evaluation table of ``s`` (:func:`summarize`) with the protocol line (``note`` appended to it)
    and, with ``out``, write ``out/eval.md`` and ``out/eval.csv``; returns the markdown."""
    dr = "on" if cfg.env.domain_rand.enabled else "off (--no-domain-rand)"
    md = (
        f"| policy | episodes | success | success at end | mean time to success | mean final distance |\n"
        f"|---|---|---|---|---|---|\n"
        f"| `{policy}` | {episodes} | {100 * s['success']:.1f} % | {100 * s['success_at_end']:.1f} % | "
        f"{s['time_to_success_s']:.2f} s | {100 * s['final_distance_m']:.1f} cm |\n\n"
        f"Lift protocol: 150-step (3 s) episodes on the full reset ranges (curriculum off), domain randomisation {dr}, "
        f"success = cube centre within {cfg.env.success_threshold * 100:.1f} cm of the target at some env step; seed "
        f"{seed}; {episodes} episodes in {seconds:.0f} s.{note}"
    )
    print(md)
    if out:
        folder = pathlib.Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "eval.md").write_text(md + "\n")
        with open(folder / "eval.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["policy", "episodes", *METRICS])
            w.writerow([policy, episodes, *(f"{s[k]:.4f}" for k in METRICS)])
    return md
