"""The one way upright opens an ONNX file in onnxruntime: :func:`open_session`.

Every onnxruntime session of a policy in the package (the daemon's MLP and chunked policies, play and evaluation, the
VLA runtime, a residual policy, the exporter's parity check) is built here, so that thread counts, execution mode,
graph optimisation and the refusal of a file onnxruntime cannot load are the same everywhere. onnxruntime is the only
import (the robot computer's daemon imports this; :mod:`upright.policy_io.onnx_info` names unknown operators).
"""

from __future__ import annotations

import pathlib

from upright.policy_io.onnx_info import custom_ops
from upright.policy_io.schema import PolicyMetadataError


def one_line(err: BaseException, width: int = 240) -> str:
    """``err``'s message on one line, shortened to ``width`` characters."""
    text = " ".join(str(err).split())
    return text if len(text) <= width else text[: width - 3] + "..."


DEFAULT_FIX = "export the policy with standard ONNX ops (python -m upright.training.export)"
"""The fix :func:`open_session`'s refusal names unless its caller gives another."""


def open_session(path: str | pathlib.Path, threads: int | None = 1, quiet: bool = False, fix: str = DEFAULT_FIX):
    """An onnxruntime ``InferenceSession`` of ``path`` on the CPU (``CPUExecutionProvider``), sequential execution,
    every graph optimisation (onnxruntime's default level).

    Args:
        path: the ``.onnx`` file (weights inside it).
        threads: intra-op and inter-op thread count, with no spinning worker threads (1: the daemon's, play's and the
            VLA runtime's setting; a policy of a few small matrices gains nothing from more). None: onnxruntime's
            defaults (one intra-op thread per core, spinning).
        quiet: no onnxruntime warnings on stderr (a caller that reports its own findings).
        fix: what the refusal tells the user to do (default: re-export with standard ops).

    Returns:
        The session; ``session.run(output_names, {input_name: array})`` takes and returns numpy arrays of the graph's
        declared dtypes (float32 for upright's policies).

    Raises:
        PolicyMetadataError: no such file, or onnxruntime cannot load it (an op of a custom domain it does not
            implement, a damaged file, ...): one line naming the file and the fix.
    """
    import onnxruntime as ort

    path = pathlib.Path(path)
    if not path.is_file():
        raise PolicyMetadataError(f"policy file {path} does not exist")
    opts = ort.SessionOptions()
    if threads is not None:
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = int(threads)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if quiet:
        opts.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001 - onnxruntime raises its own exception types
        custom = custom_ops(path)
        why = (
            f"ops of a custom domain onnxruntime does not implement: {', '.join(custom[:3])}"
            if custom
            else one_line(err)
        )
        raise PolicyMetadataError(f"{path}: graph: onnxruntime cannot load it: {why}; {fix}") from None
