"""Where a run's config is, beside a checkpoint or a policy file: train.py writes ``config_<n>.yaml`` into the run
directory when a run starts or resumes after n completed iterations, and ``python -m upright.training.export --out``
writes ``config.yaml`` beside the ``policy.onnx`` it exports. :func:`upright.conf.load_run_config` reads the file."""

from __future__ import annotations

import pathlib
import re


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
        raise FileNotFoundError(
            f"no config_<it>.yaml beside {checkpoint}: export needs the run directory train.py wrote"
        )
    return max(configs)[1]


def config_beside(onnx_path: str | pathlib.Path) -> pathlib.Path:
    """The run config of a policy file: ``config.yaml`` beside it (``export --out``), else the newest
    ``config_<n>.yaml`` (a run directory, where train.py writes ``policy.onnx`` at every checkpoint save).

    Raises:
        FileNotFoundError: neither is there.
    """
    onnx_path = pathlib.Path(onnx_path)
    plain = onnx_path.with_name("config.yaml")
    if plain.is_file():
        return plain
    numbered = [
        (int(m.group(1)), p)
        for p in onnx_path.parent.glob("config_*.yaml")
        if (m := re.fullmatch(r"config_(\d+)\.yaml", p.name))
    ]
    if not numbered:
        raise FileNotFoundError(f"no config.yaml or config_<n>.yaml beside {onnx_path}: pass it with --config")
    return max(numbered)[1]
