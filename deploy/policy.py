"""onnxruntime inference of a policy file: one thread, sequential execution, warmed up.

Chunked (VLA) policies run through :class:`~upright.deploy.chunk_runner.ChunkRunner` instead; both are callables
the controller calls once per policy tick.
"""

from __future__ import annotations

import numpy as np

from upright.deploy.metadata import PolicySpec


class PolicyFault(RuntimeError):
    """The policy cannot produce actions any more (e.g. a chunked policy's inference worker raised). The controller
    sends the robot to DAMPING with this exception's message (one line) as the reason."""


def open_session(path: str, quiet: bool = False):
    """An onnxruntime session of ``path`` on the CPU with one intra-op and one inter-op thread, sequential, every graph
    optimisation, no spinning threads (the daemon's; :func:`upright.deploy.metadata.dry_run` loads the file the same
    way before any port opens). ``quiet``: no onnxruntime warnings on stderr (the dry run's findings are its errors)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    if quiet:
        opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


class OnnxPolicy:
    """Runs ``spec.path`` with onnxruntime on the CPU with one intra-op and one inter-op thread.

    Args:
        spec: the checked policy contract (input/output names and widths).
        warmup: inference runs at construction (the first calls are slow).
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
