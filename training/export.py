"""Export any training checkpoint to ONNX with upright's metadata (the file the daemon and play.py load).

    python -m upright.training.export --checkpoint logs/standup/<run>/model_<it>.pt --out assets/policies/NAME

The run's config (``config_<it>.yaml`` beside the checkpoint, the one in force when the checkpoint was trained) rebuilds
the task (1 env) and the runner, the checkpoint is loaded, and ``policy.onnx`` is written with the same
metadata and the same onnxruntime-vs-torch check as at every save during training. The action scale in the
metadata is the mean β of the checkpoint's training envs (its curriculum state), the β the policy last
trained at. Also writes ``config.yaml`` (the run config) beside it.

Raises (as exit messages): the checkpoint or its run config is missing.
"""

from __future__ import annotations

import argparse
import pathlib
import re

import torch
from omegaconf import OmegaConf


def run_config_for(checkpoint: pathlib.Path) -> pathlib.Path:
    """The run's ``config_<n>.yaml`` in force when ``model_<k>.pt`` was trained: the highest n <= k (train.py
    writes ``config_<n>.yaml`` when a run starts or resumes after n completed iterations; the checkpoint
    ``model_<k>.pt`` holds k + 1 completed iterations).

    Raises:
        FileNotFoundError: no ``config_*.yaml`` beside the checkpoint.
    """
    match = re.search(r"model_(\d+)\.pt$", checkpoint.name)
    it = int(match.group(1)) if match else None
    configs = []
    for path in checkpoint.parent.glob("config_*.yaml"):
        m = re.search(r"config_(\d+)\.yaml$", path.name)
        if m and (it is None or int(m.group(1)) <= it):
            configs.append((int(m.group(1)), path))
    if not configs:
        raise FileNotFoundError(f"no config_<it>.yaml beside {checkpoint}: export needs the run directory train.py wrote")
    return max(configs)[1]


def export_checkpoint(checkpoint: str | pathlib.Path, out_dir: str | pathlib.Path) -> dict:
    """Export ``checkpoint`` to ``out_dir/policy.onnx`` (+ ``config.yaml``); return a summary dict.

    Raises:
        FileNotFoundError: the checkpoint or its run config is missing.
    """
    from upright.tasks.registry import make_env, policy_metadata
    from upright.training.runner import UprightRunner
    from upright.training.train_loop import rsl_rl_config

    checkpoint = pathlib.Path(checkpoint)
    if not checkpoint.is_file():
        raise FileNotFoundError(f"checkpoint {checkpoint} does not exist")
    cfg = OmegaConf.load(run_config_for(checkpoint))
    cfg.env.num_envs = 1
    cfg.sim.num_threads = 1
    env = make_env(cfg.task_name, cfg.env, cfg.sim, device="cpu", seed=int(cfg.seed))
    try:
        runner = UprightRunner(env, rsl_rl_config(cfg.train), log_dir=None, device="cpu",
                               onnx_metadata={})  # fmt: skip
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
            "action_scale": float(env.beta.mean()),
        }
    finally:
        env.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="model_<it>.pt in a run directory")
    parser.add_argument("--out", required=True, help="folder for policy.onnx and config.yaml")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    try:
        summary = export_checkpoint(args.checkpoint, args.out)
    except FileNotFoundError as err:
        parser.exit(2, f"export: {err}\n")
    for key, value in summary.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
