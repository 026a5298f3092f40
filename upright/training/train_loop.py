"""Build env + runner from a composed config and train (what ``train.py`` runs).

Residual RL on a frozen base (``policy.base=...``) wraps the env in the base's residual env and adds the pair's
metadata; that setup is the VLA floor's (:mod:`upright.vla.residual_setup`), so the caller hands it to :func:`train`
(``train.py`` does), and this loop imports nothing above training.
"""

from __future__ import annotations

import os
import pathlib
import random

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from upright.tasks.registry import make_env, policy_metadata
from upright.training.noise_cut import MetricTrigger
from upright.training.rsl_rl_cfg import rsl_rl_config
from upright.training.runner import UprightRunner, atomic_write_text, latest_checkpoint
from upright.training.std_learning_rate import set_action_std
from upright.training.warm_start import load_actor_from_onnx


def zero_actor_output(actor: torch.nn.Module) -> None:
    """Zero the last linear layer of the actor's MLP, so its mean action starts at exactly 0 (a residual policy then
    starts from its base's behaviour).

    Raises:
        ValueError: the actor has no linear layer in ``actor.mlp``.
    """
    linears = [m for m in actor.mlp.modules() if isinstance(m, torch.nn.Linear)]
    if not linears:
        raise ValueError("the actor's MLP has no linear layer to zero")
    with torch.no_grad():
        linears[-1].weight.zero_()
        linears[-1].bias.zero_()


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def resolve_run_dir(cfg: DictConfig) -> tuple[pathlib.Path, pathlib.Path | None]:
    """Return (run directory, checkpoint to resume or None).

    Raises:
        FileExistsError: a fresh run would overwrite a run that has checkpoints (use resume= or another run.name).
        FileNotFoundError: ``resume=`` points at nothing resumable.
    """
    if cfg.resume:
        ckpt = latest_checkpoint(cfg.resume)
        return ckpt.parent, ckpt
    run_dir = pathlib.Path(cfg.run.root) / cfg.task_name / str(cfg.run.name)
    if any(run_dir.glob("model_*.pt")):
        raise FileExistsError(
            f"Run directory {run_dir} already has checkpoints. Continue it with resume={run_dir}, "
            "or choose another run.name=..."
        )
    return run_dir, None


def make_run_dir(run_dir: pathlib.Path) -> list[pathlib.Path]:
    """Create ``run_dir`` and its missing parents; return the folders this created, deepest first."""
    created = []
    folder = run_dir
    while not folder.exists():
        created.append(folder)
        folder = folder.parent
    run_dir.mkdir(parents=True, exist_ok=True)
    return created


def remove_empty_dirs(folders: list[pathlib.Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty; stop at the first that is not."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (or gone): it and its parents stay
            return


def distributed_rank() -> tuple[int, int, int]:
    """(global rank, local rank, world size) from torchrun's environment; (0, 0, 1) without torchrun."""
    return int(os.getenv("RANK", "0")), int(os.getenv("LOCAL_RANK", "0")), int(os.getenv("WORLD_SIZE", "1"))


def train(cfg: DictConfig, residual_setup=None) -> pathlib.Path:
    """Train the configured task; return the run directory. Ctrl-C/SIGTERM save a checkpoint, then re-raise.

    ``residual_setup``: for ``policy.base=...`` (residual RL), the module that sets the residual up and records it,
    :mod:`upright.vla.residual_setup` (its ``setup_residual``, ``residual_metadata``, ``finish_residual`` and
    ``describe_record``); ``train.py`` passes it.

    Under torchrun (WORLD_SIZE > 1) every process runs ``env.num_envs`` envs with seed ``seed + RANK``;
    rsl-rl-lib averages gradients across processes (NCCL on ``cuda:<LOCAL_RANK>``, gloo on CPU) and only
    rank 0 writes checkpoints and logs.

    The run folder is created once the env is built; a start that fails before training (model not found, bad
    checkpoint, Ctrl-C) removes the folders it created while they are still empty.

    Raises:
        ModelNotFoundError: the robot model is not available (:func:`upright.robots.menagerie.model_path`).
        FileExistsError, FileNotFoundError: see :func:`resolve_run_dir`.
        ValueError: ``train.resume_std`` without ``resume=``; ``train.init_policy`` with ``resume=`` or ``policy.base``,
            or a file that is not this env's policy (:func:`~upright.training.warm_start.load_actor_from_onnx`);
            ``train.group_weights`` not one weight per reward group;
            ``policy.base=...`` without ``residual_setup``.
    """
    rank, local_rank, world_size = distributed_rank()
    if world_size > 1 and str(cfg.device).startswith("cuda"):
        cfg.device = f"cuda:{local_rank}"
    seed_everything(cfg.seed + rank)
    run_dir, ckpt = resolve_run_dir(cfg)
    env = make_env(cfg.task_name, cfg.env, cfg.sim, device=cfg.device, seed=cfg.seed + rank)
    created = make_run_dir(run_dir)
    try:
        groups = list(getattr(env, "reward_group_names", ()))  # env.vlm_reward.group can add one
        if groups and len(groups) != len(cfg.train.group_weights):
            raise ValueError(
                f"train.group_weights has {len(cfg.train.group_weights)} entries but the env has "
                f"{len(groups)} reward groups {groups}; give one weight per group, in that order"
            )
        train_cfg = rsl_rl_config(cfg.train)
        meta = policy_metadata(cfg.task_name, env) | {"run_path": str(run_dir.resolve())}
        residual = cfg.get("policy") is not None and cfg.policy.get("base")
        if residual:  # residual RL on a frozen base (policy.base=...)
            from upright.policy_io.residual_base import ResidualCfg, check_residual_cfg

            if residual_setup is None:
                raise ValueError(
                    f"policy.base={cfg.policy.base}: residual RL needs its setup, "
                    "train(cfg, residual_setup=upright.vla.residual_setup) (train.py passes it)"
                )
            rcfg = ResidualCfg(**OmegaConf.to_container(cfg.policy, resolve=True))
            check_residual_cfg(rcfg, cfg.task_name)
            env, base_info = residual_setup.setup_residual(env, rcfg, run_dir, cfg.train.num_steps_per_env)
            meta = residual_setup.residual_metadata(meta, base_info, rcfg, env.num_actions)
        runner = UprightRunner(
            env,
            train_cfg,
            log_dir=str(run_dir),
            device=cfg.device,
            onnx_metadata=meta,
            update_threads=cfg.train.update_threads,
            onnx_snapshots=bool(cfg.train.get("onnx_snapshots", False)),
            onnx_dynamic_batch=bool(residual),  # ResidualChunkPolicy runs the residual graph for all envs in one call
        )
        resume_std = cfg.train.get("resume_std")
        if resume_std is not None and ckpt is None:
            raise ValueError(
                "train.resume_std applies to a resumed run (resume=...); a new run uses train.init_noise_std."
            )
        if residual and ckpt is None:
            zero_actor_output(runner.alg.actor)  # the residual starts at 0: the first actions are the base's
        init_policy = cfg.train.get("init_policy")
        if init_policy:
            if ckpt is not None or residual:
                raise ValueError(
                    f"train.init_policy={init_policy} starts a new, non-residual run's actor; "
                    "drop it (or resume= / policy.base=)"
                )
            loaded = load_actor_from_onnx(runner.alg.actor, init_policy, meta)
            print(
                f"Actor initialised from {init_policy} (its iteration {loaded['iteration']}; onnxruntime vs torch "
                f"{loaded['max_abs_error']:.1e}); action std {cfg.train.init_noise_std} (train.init_noise_std)",
                flush=True,
            )
        runner.critic_warmup_iterations = int(cfg.train.get("critic_warmup_iterations", 0))
        if ckpt is not None:
            try:
                runner.load(str(ckpt), map_location=cfg.device)
            except RuntimeError as err:  # load_state_dict's size mismatch: the run's layout differs from the file's
                if "size mismatch" not in str(err):
                    raise
                raise ResumeMismatchError(
                    f"resume={cfg.get('resume')}: {ckpt.name} does not fit this run's networks (observation "
                    f"widths {_obs_widths(runner)}; e.g. a different env.getup.actor_history or train.*_hidden_dims): "
                    f"resume with the settings it was trained with (its config_*.yaml), or widen it first "
                    f"(python -m upright.training.stack_actor_history)"
                ) from None
            print(f"Resuming {ckpt} after {runner.completed_iterations} completed iterations", flush=True)
            if resume_std is not None:
                set_action_std(runner.alg.actor, float(resume_std), runner.alg.optimizer)
                print(f"Action std set to {float(resume_std)} (train.resume_std)", flush=True)
        cut, cut_metric = cfg.train.get("noise_cut_iteration"), cfg.train.get("noise_cut_metric")
        if cut is not None or cut_metric is not None:
            cut = None if cut is None else int(cut)
            runner.noise_cut = (cut, float(cfg.train.noise_cut_std), float(cfg.train.noise_cut_entropy_coef))
            if cut_metric is not None:
                runner.noise_cut_trigger = MetricTrigger.for_env(
                    cut_metric,
                    cfg.train.noise_cut_metric_at_least,
                    cfg.train.noise_cut_metric_window,
                    max_episode_length=env.max_episode_length,
                    steps_per_env=cfg.train.num_steps_per_env,
                )
            if resume_std is not None and cut is not None and runner.completed_iterations >= cut:
                runner.noise_cut_applied = True  # the std asked for at this resume wins over an overdue cut
            runner.apply_noise_cut()  # a run resumed past the cut without it gets it now
        if rank == 0:
            config = run_dir / f"config_{runner.completed_iterations}.yaml"
            atomic_write_text(config, OmegaConf.to_yaml(cfg, resolve=True))
    except BaseException:  # a failed start leaves no empty run folder behind
        remove_empty_dirs(created)
        env.close()
        raise
    print(
        f"Run directory: {run_dir}  ({env.num_envs} envs, {cfg.sim.backend} backend, "
        f"{getattr(env.sim, 'num_threads', '?')} threads)",
        flush=True,
    )
    try:
        runner.learn_until(cfg.train.max_iterations, init_at_random_ep_len=cfg.train.init_at_random_ep_len)
        if world_size > 1:
            diff = runner.parameters_in_sync()
            print(f"rank {rank}/{world_size}: max |param - rank 0 param| = {diff:.3g};", flush=True)
            if diff != 0.0:
                raise RuntimeError(f"rank {rank}: policy parameters diverged from rank 0 by {diff}")
    finally:
        if residual and rank == 0:  # also after Ctrl-C/SIGTERM: the record says whether the base stayed frozen
            print(residual_setup.describe_record(residual_setup.finish_residual(env, run_dir)), flush=True)
        env.close()
        if world_size > 1 and torch.distributed.is_initialized():  # gloo's threads stop before the interpreter exits
            torch.distributed.destroy_process_group()
    return run_dir


def _obs_widths(runner) -> dict[str, int]:
    """Width of each observation group the runner's env gives (``actor``, ``critic``)."""
    return {k: int(v.shape[-1]) for k, v in runner.env.get_observations().items()}


class ResumeMismatchError(ValueError):
    """``resume=`` names a checkpoint whose networks do not fit the run's observation widths or layout (train.py
    prints it in one line)."""
