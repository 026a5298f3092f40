"""Evaluate a standup policy with HoST's metrics and print them beside the paper's Table III.

    python -m upright.training.evaluate --policy logs/standup/<run> --terrain platform --out docs/eval [env.*=...]
    python -m upright.training.evaluate --task lift --policy logs/lift/<run>   (upright.training.lift_evaluate)

Protocol (HoST ``scripts/eval``; spec §7): episodes of 5 s from the reset distribution of training on
the ``--terrain`` (its sub-terrains, start pose and terminations), β fixed (the policy file's
``action_scale`` unless ``--beta``; else the terrain's β floor), no observation noise, no pull force,
domain randomisation on as in HoST's evaluation (``env.domain_rand``, spec §6; ``--no-domain-rand``
evaluates on the nominal model with no action delay and the exact default start pose).
Each wave resets all ``--num-envs`` envs together and runs one full episode; a terminated env counts
as a failure. Success uses the terrain's criterion (:data:`upright.tasks.standup.metrics.SUCCESS_CRITERIA`:
ground pelvis z > 0.7 then never < 0.5 m; platform 0.7 / 0.3; wall 0.6 / 0.1; slope pelvis above the
feet 0.6 / 0.1), and that height also marks the first standing step; it is tested on the actuated
steps only (not while the robot drops and settles at the start). E_succ is over all episodes;
E_feet and E_engy are over the successful ones (both are defined relative to the first standing
step); E_smth is over all episodes.
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
from upright.conf.validate import validate_overrides
from upright.tasks.registry import make_env
from upright.tasks.standup import metrics
from upright.tasks.standup.getup.config import use_protocol_episodes
from upright.tasks.standup.terrains import POSTURE_NAMES, TERRAIN_NAMES

METRICS = ("E_succ", "E_feet", "E_smth", "E_engy")
UNITS = {"E_succ": "%", "E_feet": "cm²/step", "E_smth": "deg-scaled", "E_engy": "kJ"}
PEAK = "peak_height"
"""Per-episode diagnostic beside HoST's metrics: the highest success height (the terrain criterion's measure:
pelvis z, or pelvis above the feet on slope; m) over the actuated steps before any termination. It shows how
far a policy that does not stand yet gets (lying on ground: ~0.1 m; sitting: ~0.4-0.5 m; standing: ~0.75 m)."""
FINAL_HEAD = "final_head_height"
"""Per-episode diagnostic: the head's height above the mean foot height (HoST's head-height measure, m) at the
episode's last step; NaN for a terminated episode. Where the policy ends up: lying ~0-0.1 m, sitting upright with
the legs stretched ~0.6 m, standing ~1.2 m. The peak height can come from a transient (e.g. rolling over); this
cannot."""
FELL = "fell_after_standing"
"""Per-episode diagnostic, % (0 or 100 per episode): the success height was passed, and later the height went below
the fall height (or the episode terminated). With E_succ and the never-stood rest (100 − E_succ − this) it splits the
failures into "fell again" and "never got up"."""
COLUMNS = (*METRICS, PEAK, FINAL_HEAD, FELL)
"""Per-episode results of :func:`run_episodes`, in the order of the ``eval.csv`` columns."""


def run_episodes(
    env, policy, episodes: int, criterion: metrics.SuccessCriterion | None = None
) -> dict[str, torch.Tensor]:
    """Run ``episodes`` full episodes (in waves of ``env.num_envs``); return per-episode metrics (E,).

    ``criterion`` defaults to the env's terrain's (:attr:`StandupEnv.terrain`'s ``success``).
    """
    n, steps = env.num_envs, env.max_episode_length
    crit = criterion or env.terrain.success
    results: dict[str, list[torch.Tensor]] = {k: [] for k in COLUMNS}
    done_episodes = 0
    while done_episodes < episodes:
        env.reset_all()
        obs = env.get_observations()["actor"]
        hist = {k: [] for k in ("h", "feet", "q", "dq", "tau", "actuated")}
        alive = torch.ones(n, dtype=torch.bool)
        for _ in range(steps):
            with torch.no_grad():
                actions = policy(obs)
            actuated = env.episode_length_buf >= env.cfg.unactuated_steps
            obs_td, _, dones, extras = env.step(actions)
            obs = obs_td["actor"]
            terminated = dones.bool() & ~extras["time_outs"]
            s = env.last_state  # the state the step ended in, before any reset
            alive &= ~terminated
            # heights count from the policy's first actuated step: a robot dropped onto a platform can pass the
            # standing height while it falls; a terminated env never counts again
            h = crit.height(s.base_pos, s.feet_pos)
            hist["h"].append(torch.where(alive & actuated, h, torch.full_like(h, -math.inf)))
            hist["feet"].append(s.ankle_pos)
            hist["q"].append(s.q)
            hist["dq"].append(s.dq)
            hist["tau"].append(s.tau)
            hist["actuated"].append(actuated)
        h = torch.stack(hist["h"], 1)
        peak = h.max(dim=1).values  # -inf: terminated before its first actuated step (no height to report)
        results[PEAK].append(torch.where(torch.isinf(peak), torch.full_like(peak, math.nan), peak))
        final_head = env.last_state.head_height
        results[FINAL_HEAD].append(torch.where(alive, final_head, torch.full_like(final_head, math.nan)))
        ok = metrics.success(h, crit.stand_height, crit.fall_height) & alive
        stood = peak > crit.stand_height  # passed the standing height at some step
        results[FELL].append((stood & ~ok).float() * 100.0)
        results["E_succ"].append(ok.float() * 100.0)
        feet = metrics.feet_movement(torch.stack(hist["feet"], 1), h, crit.stand_height)
        energy = metrics.energy(
            torch.stack(hist["dq"], 1), torch.stack(hist["tau"], 1), h, dt=env.step_dt, success_height=crit.stand_height
        )
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


def write_report(out_dir: str | pathlib.Path, stem: str, markdown: str, header: list[str], rows: list[list]) -> None:
    """Write ``<stem>.md`` (the printed table) and ``<stem>.csv`` (``header`` then ``rows``) under ``out_dir``."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(markdown)
    with open(out / f"{stem}.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    print(f"wrote {out / (stem + '.md')} and {out / (stem + '.csv')}")


def _checkpoint_beta(policy_source: str) -> float | None:
    """Mean β of the training envs saved in a ``model_<it>.pt`` (its curriculum state), else None."""
    path = pathlib.Path(policy_source)
    if path.is_dir():
        from upright.training.runner import latest_checkpoint

        try:
            path = latest_checkpoint(path)
        except FileNotFoundError:
            return None
    if path.suffix != ".pt" or not path.is_file():
        return None
    infos = torch.load(path, weights_only=False, map_location="cpu").get("infos") or {}
    beta = infos.get("env_state", {}).get("curriculum", {}).get("beta")
    return None if beta is None else float(beta.mean())


def make_eval_env(
    policy_source: str,
    *,
    task: str = "standup",
    terrain: str = "ground",
    posture: str = "supine",
    overrides: list[str] | tuple[str, ...] = (),
    num_envs: int = 100,
    episode_length_s: float = 5.0,
    beta: float | None = None,
    domain_rand: bool = True,
    seed: int = 0,
    error=None,
):
    """Build the evaluation env and load the policy (HoST protocol, spec §7).

        Evaluation settings: no observation noise (``env.disturbance.obs_noise_scale`` can force it), no pull
        force, β fixed at ``beta`` (default: the policy file's ``action_scale``, or the mean β of the training envs
    saved in a checkpoint, else the terrain's β floor),
        domain randomisation as ``domain_rand`` says, episodes of ``episode_length_s``, ``env.action_mode`` the
        policy's (its ONNX metadata or run config, :func:`~upright.training.policy_loading.policy_action_mode`).

        Returns:
            (env, policy, β used, composed config).

        Raises:
            SystemExit: bad overrides (through ``error``, e.g. ``argparse.ArgumentParser.error``).
            ValueError: bad overrides (or an ``env.action_mode=`` override the policy contradicts) when ``error`` is
                None.
            PolicyLoadError: the policy cannot be loaded or does not fit the task; a policy of another task is refused
                before the env is built (:func:`~upright.training.policy_loading.check_policy_task`).
    """
    from upright.training.policy_loading import (
        check_policy_task,
        load_policy,
        policy_action_mode,
        policy_env_settings,
        policy_mdp,
    )

    check_policy_task(policy_source, task, fix="--task {task}")
    all_overrides = [f"task={task}", f"terrain={terrain}", f"posture={posture}", *overrides]
    named = {o.split("=", 1)[0].lstrip("+") for o in overrides}
    mdp = policy_mdp(policy_source) if task == "standup" else None
    if mdp is not None and not named & {"recipe", "env.mdp"}:
        all_overrides.append(f"recipe={mdp}")  # the MDP it was trained in: its gains, observations and action scale
    for key, value in policy_env_settings(policy_source).items():  # its gains and actor history
        if f"env.{key}" not in named:
            all_overrides.append(f"env.{key}={value}")
    problem = validate_overrides(all_overrides)
    if problem:
        if error is None:
            raise ValueError(problem)
        error(problem)
    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose("config", overrides=all_overrides)
    action_mode = policy_action_mode(policy_source)
    if action_mode is not None:  # actions mean what they meant in training
        asked = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].lstrip("+") == "env.action_mode"]
        if asked and asked[-1] != action_mode:
            problem = (
                f"env.action_mode={asked[-1]} contradicts the policy, trained with "
                f"env.action_mode={action_mode}; drop the override"
            )
            if error is None:
                raise ValueError(problem)
            error(problem)
        cfg.env.action_mode = action_mode
    cfg.env.num_envs = num_envs
    cfg.env.episode_length_s = episode_length_s
    cfg.env.obs_noise = False
    cfg.env.curriculum.enabled = False  # no pull force; β fixed below
    if "getup" in cfg.env:  # recipe=getup: every episode from the terrain's posture to its time-out (HoST protocol)
        use_protocol_episodes(cfg.env.getup)
    if not domain_rand:
        cfg.env.domain_rand.enabled = False
    cfg.train.init_at_random_ep_len = False
    env = make_env(cfg.task_name, cfg.env, cfg.sim, device="cpu", seed=seed)
    policy = load_policy(policy_source, env, cfg.task_name, cfg.train, seed=seed)
    if beta is None:
        beta = getattr(policy, "metadata", {}).get("action_scale") or _checkpoint_beta(policy_source)
    if beta is None:
        beta = cfg.env.curriculum.beta_min
    env.beta[:] = float(beta)
    return env, policy, float(beta), cfg


def main(argv: list[str] | None = None) -> None:
    import sys

    args_in = list(sys.argv[1:] if argv is None else argv)
    task = next((a.split("=", 1)[1] for a in args_in if a.startswith("--task=")), None)
    task = task or next((b for a, b in zip(args_in, args_in[1:]) if a == "--task"), "standup")
    if task != "standup":  # another task's evaluator, named by its spec
        from upright.tasks.spec import resolve, task_spec

        try:
            evaluator = task_spec(task).evaluator
            if evaluator is None:
                raise ValueError(f"task={task} has no evaluation protocol (its spec names no evaluator)")
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            raise SystemExit(2) from None
        return resolve(evaluator)(args_in)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="run dir, model_<it>.pt, policy.onnx, zero or random")
    parser.add_argument("--task", default="standup")
    parser.add_argument(
        "--terrain",
        default="ground",
        choices=list(TERRAIN_NAMES),
        help="terrain to build and evaluate on, with its success criterion and Table III row",
    )
    parser.add_argument("--posture", default="supine", choices=list(POSTURE_NAMES))
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--num-envs", type=int, default=100)
    parser.add_argument("--episode-length-s", type=float, default=5.0)
    parser.add_argument("--beta", type=float, default=None, help="fixed action scale (default: the policy's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-domain-rand",
        action="store_true",
        help="evaluate without domain randomisation (HoST's evaluation keeps it on)",
    )
    parser.add_argument("--out", default=None, help="folder for eval.csv and eval.md")
    parser.add_argument("overrides", nargs="*", help="task config overrides, e.g. sim.num_threads=2")
    args = parser.parse_args(argv)

    from upright.policy_io.source import PolicyLoadError

    try:
        env, policy, beta, cfg = make_eval_env(
            args.policy,
            task=args.task,
            terrain=args.terrain,
            posture=args.posture,
            overrides=args.overrides,
            num_envs=args.num_envs,
            episode_length_s=args.episode_length_s,
            beta=args.beta,
            domain_rand=not args.no_domain_rand,
            seed=args.seed,
            error=parser.error,
        )
    except PolicyLoadError as err:  # one line, as play.py reports it
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    torch.set_num_threads(1)
    start = time.monotonic()
    per_episode = run_episodes(env, policy, args.episodes)
    ours = summarize(per_episode)
    seconds = time.monotonic() - start
    crit = env.terrain.success
    height = "pelvis height above the feet" if crit.relative_to_feet else "pelvis z"
    note = (
        f"Policy `{args.policy}`, terrain {args.terrain}, posture {args.posture}, β = {beta}, "
        f"{args.episode_length_s} s episodes, no observation noise, no pull force, domain randomisation "
        f"{'on (HoST spec §6)' if cfg.env.domain_rand.enabled else 'off (--no-domain-rand)'}; success: {height} > "
        f"{crit.stand_height} m, then never < {crit.fall_height} m; {args.episodes} episodes in "
        f"{seconds:.0f} s."
    )
    note += (
        f" Mean peak height ({height}): {ours[PEAK]:.3f} m. Mean final head height above the feet: "
        f"{ours[FINAL_HEAD]:.3f} m. Fell again after standing: {ours[FELL]:.1f} % of episodes; never stood: "
        f"{max(0.0, 100.0 - ours['E_succ'] - ours[FELL]):.1f} %."  # max: no "-0.0" from rounding
    )
    md = table_markdown(args.terrain, ours, args.episodes, note)
    print(md)
    if args.out:
        row = [args.terrain, args.episodes, *(f"{ours[m]:.4f}" for m in COLUMNS)]
        write_report(args.out, "eval", md, ["terrain", "episodes", *COLUMNS], [row])
    env.close()


if __name__ == "__main__":
    main()
