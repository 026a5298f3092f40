"""Helpers of the viewer tests: tiny ONNX policies, free ports, running play.py."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAY = ROOT / "play.py"


def write_onnx_policy(
    path: pathlib.Path, obs_dim: int, num_actions: int, metadata: dict | None, gain: float = 0.0
) -> pathlib.Path:
    """A linear + tanh policy ``obs`` (1, obs_dim) -> ``actions`` (1, num_actions), with upright metadata if given."""
    from upright.training.onnx_export import attach_metadata

    w = (np.random.default_rng(0).standard_normal((obs_dim, num_actions)) * gain).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["z"]), helper.make_node("Tanh", ["z"], ["actions"])],
        "policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, obs_dim])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, num_actions])],
        [numpy_helper.from_array(w, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    if metadata is not None:
        attach_metadata(path, metadata)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def play_env() -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    return env


def run_play(args: list[str], cwd: pathlib.Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python play.py ARGS`` to completion (no display: headless paths)."""
    return subprocess.run(
        [sys.executable, str(PLAY), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=play_env()
    )
