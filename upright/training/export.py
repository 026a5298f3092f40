"""Export any training checkpoint to ONNX with upright's metadata (the file the daemon and play.py load).

    python -m upright.training.export --checkpoint logs/standup/<run>/model_<it>.pt --out upright/assets/policies/NAME

The run's config (``config_<it>.yaml`` beside the checkpoint, the one in force when the checkpoint was trained) rebuilds
the task (1 env) and the runner, the checkpoint is loaded, and ``policy.onnx`` is written with the same
metadata and the same onnxruntime-vs-torch check as at every save during training. The action scale in the
metadata is the mean β of the checkpoint's training envs (its curriculum state), the β the policy last
trained at. Also writes ``config.yaml`` (the run config) beside it.

``--refresh-metadata FILE.onnx`` instead adds to an existing policy file the metadata keys of the current
schema (:mod:`upright.policy_io.schema`) that it lacks, computed from the ``config.yaml`` beside it (in a run
directory: the newest ``config_<n>.yaml``); the weights and every key it already has stay as they are, and the
keys that define the policy's contract must agree with that config (:func:`refresh_metadata`). The one value
rewritten is the ``action_mode`` of a schema-2 (or older) file, which always said relative: it becomes the
config's ``env.action_mode`` (relative when the config predates that setting).

Raises (as exit messages): the checkpoint or its run config is missing; a refreshed file disagrees with its config.
"""

from __future__ import annotations

import argparse
import pathlib

import torch
from omegaconf import OmegaConf

from upright.conf import load_run_config
from upright.conf.run_files import config_beside, run_config_for


def export_checkpoint(checkpoint: str | pathlib.Path, out_dir: str | pathlib.Path) -> dict:
    """Export ``checkpoint`` to ``out_dir/policy.onnx`` (+ ``config.yaml``); return a summary dict.

    Raises:
        FileNotFoundError: the checkpoint or its run config is missing.
    """
    from upright.tasks.registry import make_env, policy_metadata
    from upright.training.rsl_rl_cfg import rsl_rl_config
    from upright.training.runner import UprightRunner

    checkpoint = pathlib.Path(checkpoint)
    if not checkpoint.is_file():
        raise FileNotFoundError(f"checkpoint {checkpoint} does not exist")
    cfg = load_run_config(run_config_for(checkpoint))  # settings added since the run get their defaults
    cfg.env.num_envs = 1
    cfg.sim.num_threads = 1
    env = make_env(cfg.task_name, cfg.env, cfg.sim, device="cpu", seed=int(cfg.seed))
    try:
        runner = UprightRunner(env, rsl_rl_config(cfg.train), log_dir=None, device="cpu", onnx_metadata={})
        infos = runner.load(str(checkpoint), map_location="cpu")
        runner.onnx_metadata = policy_metadata(cfg.task_name, env) | {"checkpoint": checkpoint.name}
        out = pathlib.Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        err = runner.export_onnx(out / "policy.onnx")
        OmegaConf.save(cfg, out / "config.yaml", resolve=True)
        return {
            "onnx": str(out / "policy.onnx"),
            "max_abs_error_vs_torch": err,
            "completed_iterations": runner.completed_iterations,
            "env_steps": int(infos.get("env_step_counter", 0)),
            "action_scale": float(env.beta.mean()) if hasattr(env, "beta") else float(env.cfg.action_scale),
            "action_mode": str(runner.onnx_metadata["action_mode"]),
        }
    finally:
        env.close()


CONTRACT_KEYS = (
    "task",
    "joint_names",
    "kp",
    "kd",
    "default_joint_pos",
    "held_joint_names",
    "observation_names",
    "observation_dims",
    "observation_scales",
    "observation_history_length",
    "control_dt",
    "decimation",
)
"""Keys :func:`refresh_metadata` requires to agree between the file and its config before adding any
(``action_mode`` too, where the file's schema can state it)."""


def _short(value, width: int = 70) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def contract_mismatch(file_meta: dict, env_meta: dict, require_all: bool = False) -> str | None:
    """The first key of :data:`CONTRACT_KEYS` whose value differs between a policy file's metadata and an env's
    (numbers compared with ``numpy.allclose``), as ``"'<key>' is <file value> in the file but <env value>"``; None
    when they agree. A key the file lacks is skipped, or (``require_all``) reported as missing."""
    import numpy as np

    for key in CONTRACT_KEYS:
        if key not in file_meta:
            if require_all:
                return f"'{key}' is missing from the file"
            continue
        a, b = file_meta[key], env_meta[key]
        numeric = not isinstance(b, str) and np.asarray(b).dtype.kind in "fi"
        try:
            same = bool(np.allclose(a, b)) if numeric else a == b
        except (TypeError, ValueError):  # another shape or type: not the same
            same = False
        if not same:
            return f"'{key}' is {_short(a)} in the file but {_short(b)}"
    return None


def refresh_metadata(onnx_path: str | pathlib.Path, config_path: str | pathlib.Path | None = None) -> list[str]:
    """Add the current schema's metadata keys that ``onnx_path`` lacks, from the env its run config builds.

    Keys the file already has keep their values (e.g. its ``action_scale``, ``iteration``); the schema version is
    updated. Use it for files exported before a key existed, when the checkpoint is gone. Exception: a file of
    schema < 3 gets the config's ``action_mode`` and ``action_formula`` (its own ``action_mode`` said relative
    whatever the run trained with).

    Args:
        onnx_path: the policy file (rewritten in place).
        config_path: the run config; defaults to :func:`config_beside`.

    Returns:
        The keys added (and ``action_mode`` when a schema < 3 value was rewritten), sorted.

    Raises:
        FileNotFoundError: the file or the config is missing.
        PolicyMetadataError: a key of :data:`CONTRACT_KEYS`, or a schema-3 ``action_mode``, differs between the
            file and the config's env.
    """
    import json

    import onnx

    from upright.policy_io.schema import ENV_ACTION_MODES, action_mode_of
    from upright.tasks.registry import make_env, policy_metadata
    from upright.training.onnx_export import PolicyMetadataError, _to_jsonable, attach_metadata

    onnx_path = pathlib.Path(onnx_path)
    if not onnx_path.is_file():
        raise FileNotFoundError(f"{onnx_path} does not exist")
    config_path = pathlib.Path(config_path) if config_path else config_beside(onnx_path)
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path} does not exist")
    old = {e.key: json.loads(e.value) for e in onnx.load(str(onnx_path), load_external_data=False).metadata_props}
    cfg = load_run_config(config_path)  # a config written before a setting existed gets that setting's default
    env_cfg, sim_cfg = cfg.env, cfg.sim
    env_cfg.num_envs, sim_cfg.num_threads = 1, 1
    env = make_env(cfg.task_name, env_cfg, sim_cfg, device="cpu", seed=int(cfg.seed))
    try:
        fresh = {k: _to_jsonable(v) for k, v in policy_metadata(cfg.task_name, env).items()}
    finally:
        env.close()
    problem = contract_mismatch(old, fresh)
    if problem:
        raise PolicyMetadataError(f"{onnx_path}: {problem} from {config_path}")
    rewritten = []
    if "action_mode" in old:
        legacy = str(old.get("upright_metadata_version")) in ("1", "2")
        if legacy:  # its exporter could only write relative: the run config says what the env did
            old["action_mode"] = fresh["action_mode"]  # (action_formula is new in schema 3: added below)
            rewritten = ["action_mode"]
        elif action_mode_of(old, onnx_path, ENV_ACTION_MODES) != fresh["action_mode"]:
            raise PolicyMetadataError(
                f"{onnx_path}: 'action_mode' is {old['action_mode']!r} in the file but "
                f"{fresh['action_mode']!r} from {config_path}"
            )
    added = sorted(k for k in fresh if k not in old)
    old.pop("upright_metadata_version", None)
    attach_metadata(onnx_path, old | {k: fresh[k] for k in added})
    return sorted(added + rewritten)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="model_<it>.pt in a run directory")
    parser.add_argument("--out", help="folder for policy.onnx and config.yaml")
    parser.add_argument("--refresh-metadata", metavar="ONNX", help="add missing metadata keys to this policy file")
    parser.add_argument(
        "--config",
        help="with --refresh-metadata: the run config (default: config.yaml beside it, "
        "else the newest config_<n>.yaml)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.refresh_metadata:
        from upright.training.onnx_export import PolicyMetadataError

        try:
            added = refresh_metadata(args.refresh_metadata, args.config)
        except (FileNotFoundError, PolicyMetadataError) as err:
            parser.exit(2, f"export: {err}\n")
        print(f"{args.refresh_metadata}: added or rewritten {added}")
        return
    if not (args.checkpoint and args.out):
        parser.error("--checkpoint and --out are required (or --refresh-metadata ONNX)")
    try:
        summary = export_checkpoint(args.checkpoint, args.out)
    except FileNotFoundError as err:
        parser.exit(2, f"export: {err}\n")
    for key, value in summary.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
