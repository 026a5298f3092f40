"""Evaluate a lift policy (or the scripted expert): success rate and mean time to success.

    python -m upright.training.lift_evaluate --policy logs/lift/<run> --episodes 500 --out DIR [env.*=... sim.*=...]
    python -m upright.training.lift_evaluate --policy expert --episodes 200

(``python -m upright.training.evaluate --task lift ...`` runs the same.) Protocol: episodes of 150 env steps (3 s)
on the full reset ranges (curriculum off: cube xy ±0.2 m, target xy ±0.2 m and 0.2-0.4 m up), domain randomisation
on as in training (``--no-domain-rand`` for the nominal model without observation noise or action delay). Each wave
resets all ``--num-envs`` envs together and runs one episode; an episode that terminates early (cube out of bounds)
counts as a failure unless it had already succeeded. Success: the cube centre came within 2.5 cm of the target at
some env step (ManiSkill ``PickCube`` ``goal_thresh``; ManiSkill's ``success_once``); also reported: success at the
episode's last step (``success_at_end``), mean time to success over the successful episodes, mean final distance.
Writes ``eval.md`` and ``eval.csv`` with ``--out``. The evaluation env is composed from the configs here
(:func:`make_lift_eval_env`, also used by the VLA evaluation and demonstration recording); the episodes, their summary
and the report are :mod:`upright.tasks.lift.evaluation`'s, the policies :mod:`upright.training.policy_loading`'s.
"""

from __future__ import annotations

import argparse
import time

import torch
from hydra import compose, initialize

from upright.conf import register_configs, with_task_groups
from upright.conf.validate import validate_overrides
from upright.tasks.lift.evaluation import run_episodes, summarize, write_report
from upright.tasks.registry import make_env

EE_SETTINGS = (
    "ee_action_scale",
    "ee_min_height",
    "ee_gravity_compensation",
    "ee_max_lead",
    "ee_max_lead_down",
    "ee_observe_lead",
)
"""``env.*`` settings that give an ``ee_delta`` action its meaning besides the mode (step scale, workspace floor,
gravity compensation, the command's largest lead over the hand, in all directions or downward only, the lead as
an observation)."""


def make_lift_eval_env(overrides: list[str], num_envs: int, domain_rand: bool, seed: int):
    """The evaluation env: config ``task=lift`` with ``overrides``, curriculum off, training's resets otherwise.

    Raises:
        ValueError: bad overrides (the one-line message of :func:`upright.conf.validate.validate_overrides`).
    """
    args = ["task=lift", *overrides]
    problem = validate_overrides(args)
    if problem:
        raise ValueError(problem)
    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose("config", overrides=with_task_groups(args))
    cfg.env.num_envs = num_envs
    cfg.env.curriculum.enabled = False
    cfg.env.domain_rand.enabled = bool(domain_rand) and bool(cfg.env.domain_rand.enabled)
    cfg.train.init_at_random_ep_len = False
    return make_env("lift", cfg.env, cfg.sim, device="cpu", seed=seed), cfg


def policy_action_overrides(policy: str) -> list[str]:
    """``env.*`` overrides that make a lift env's actions mean what they meant when ``policy`` was trained:
    ``env.action_mode=...`` (:func:`~upright.training.policy_loading.policy_action_mode`; ``delta`` or
    ``ee_delta``) and, for ``ee_delta``, the ``env.*`` settings of :data:`EE_SETTINGS` from the ONNX metadata or the
    run config (absent there: the defaults). Empty for ``zero``, ``random``, ``expert``, a file without a lift action
    mode, or an unreadable file (loading it reports why).

    Raises:
        PolicyLoadError: as :func:`~upright.training.policy_loading.policy_action_mode`.
    """
    from upright.policy_io.source import resolve_policy_path
    from upright.training.policy_loading import policy_action_mode

    if policy == "expert":
        return []
    mode = policy_action_mode(policy)
    if mode not in ("delta", "ee_delta"):
        return []
    out = [f"env.action_mode={mode}"]
    if mode != "ee_delta":
        return out
    from upright.conf import load_run_config
    from upright.conf.run_files import run_config_for

    path = resolve_policy_path(policy)
    values: dict = {}
    if path.suffix == ".onnx":
        import json

        import onnx

        meta = {e.key: json.loads(e.value) for e in onnx.load(str(path), load_external_data=False).metadata_props}
        values = {k: meta[k] for k in EE_SETTINGS if k in meta}
    else:
        env_cfg = load_run_config(run_config_for(path)).env
        values = {k: env_cfg.get(k) for k in EE_SETTINGS if k in env_cfg}
    for key, value in values.items():
        text = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
        out.append(f"env.{key}={text}")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", required=True, help="run dir, model_<it>.pt, policy.onnx, zero, random or expert")
    parser.add_argument("--task", default="lift", choices=["lift"])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--num-envs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-domain-rand", action="store_true", help="nominal model, no observation noise or delay")
    parser.add_argument("--out", default=None, help="folder for eval.csv and eval.md")
    parser.add_argument("overrides", nargs="*", help="task config overrides, e.g. sim.num_threads=2")
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.num_envs < 1:
        parser.error("--episodes and --num-envs must be >= 1")
    overrides = list(args.overrides)
    if args.policy not in ("expert", "zero", "random"):
        from upright.policy_io.source import PolicyLoadError
        from upright.training.policy_loading import check_policy_task

        try:
            check_policy_task(args.policy, "lift", fix="--task {task}")  # before any env is built
            if not any(o.startswith("env.action_mode=") for o in overrides):
                # actions mean what they meant in training (delta or ee_delta, the ee step and workspace floor)
                overrides = policy_action_overrides(args.policy) + overrides
        except PolicyLoadError as err:
            parser.exit(2, f"error: {err}\n")
    try:
        env, cfg = make_lift_eval_env(overrides, args.num_envs, not args.no_domain_rand, args.seed)
    except ValueError as err:
        parser.error(str(err))
    torch.set_num_threads(1)
    on_reset = None
    if args.policy == "expert":
        from upright.tasks.lift.expert import ScriptedExpert

        expert = ScriptedExpert(env)
        act, on_reset = expert.act, expert.reset
    else:
        from upright.policy_io.source import PolicyLoadError
        from upright.training.policy_loading import load_policy

        try:
            policy = load_policy(args.policy, env, "lift", cfg.train, seed=args.seed)
        except PolicyLoadError as err:
            parser.exit(2, f"error: {err}\n")

        def act() -> torch.Tensor:
            with torch.no_grad():
                return policy(env.get_observations()["actor"])

    start = time.monotonic()
    per_episode = run_episodes(env, act, args.episodes, on_reset)
    seconds = time.monotonic() - start
    write_report(args.policy, args.episodes, summarize(per_episode), cfg, args.seed, seconds, args.out)
    env.close()


if __name__ == "__main__":
    main()
