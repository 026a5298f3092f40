"""onnxruntime runners of an MLP policy file (kind ``"mlp"`` of :mod:`upright.policy_io.registry`), numpy in and out.

- :class:`OnnxPolicy`: the daemon's, one (1, obs_dim) observation per call into a preallocated input, warmed up;
- :class:`OnnxMlp`: play's and evaluation's, a (B, obs_dim) batch run one row at a time (the committed files fix
  the batch at 1).

Both open the file through :func:`~upright.policy_io.session.open_session` (one thread). Chunked (VLA) policies run
through :class:`~upright.deploy.chunk_runner.ChunkRunner` instead.
"""

from __future__ import annotations

import pathlib

import numpy as np

from upright.policy_io.registry import onnx_kind, register_loader
from upright.policy_io.schema import PolicyMetadataError
from upright.policy_io.session import open_session
from upright.policy_io.spec import PolicySpec


class OnnxPolicy:
    """Runs ``spec.path`` with onnxruntime on the CPU with one intra-op and one inter-op thread.

    Args:
        spec: the checked policy contract (input/output names and widths).
        warmup: inference runs at construction (the first calls are slow).

    Raises:
        PolicyMetadataError: onnxruntime cannot load the file (:func:`~upright.policy_io.session.open_session`).
    """

    def __init__(self, spec: PolicySpec, warmup: int = 200):
        self.session = open_session(spec.path)
        self.spec = spec
        self._input = np.zeros((1, spec.obs_dim), np.float32)
        self._feed = {spec.input_name: self._input}
        self._outputs = [spec.output_name]
        for _ in range(warmup):
            self(self._input)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions (J,) float32 for one (1, obs_dim) observation."""
        self._input[...] = obs
        return self.session.run(self._outputs, self._feed)[0][0]


class OnnxMlp:
    """An MLP policy file's graph (first input -> first output), run one observation row at a time.

    Args:
        path: the ``.onnx`` file.
        obs_dim: the width the caller feeds; checked against the graph's input when that is fixed (None: unchecked).

    Attributes:
        input_name, output_name: the graph's first input and output.

    Raises:
        PolicyMetadataError: onnxruntime cannot load the file, or its input width is not ``obs_dim`` (one line).
    """

    def __init__(self, path: str | pathlib.Path, obs_dim: int | None = None):
        self.path = pathlib.Path(path)
        self.session = open_session(self.path)
        inp = self.session.get_inputs()[0]
        width = inp.shape[-1]
        if obs_dim is not None and isinstance(width, int) and width != obs_dim:
            raise PolicyMetadataError(
                f"{path}: input '{inp.name}' has width {width}, the task's observation has {obs_dim}"
            )
        self.input_name, self.output_name = inp.name, self.session.get_outputs()[0].name

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions (B, J) float32 for observations (B, obs_dim) float32, one ``session.run`` per row."""
        outs = [self.session.run([self.output_name], {self.input_name: obs[i : i + 1]})[0] for i in range(len(obs))]
        return np.concatenate(outs)


def _is_mlp_onnx(spec: str) -> bool:
    path = pathlib.Path(spec)
    return path.suffix == ".onnx" and path.is_file() and onnx_kind(path) == "mlp"


register_loader("mlp_onnx", _is_mlp_onnx, OnnxMlp, kind="mlp")
