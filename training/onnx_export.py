"""ONNX export of the actor (observation normaliser included) with self-describing metadata.

The metadata lets a deployed policy run from the ``.onnx`` file alone: joints, Kp/Kd, torque limits, default
pose, held joints and their targets, action scale β and mode, control dt and decimation, the observation terms
with widths, scales and units, the history length and layout (whole frames, oldest first), the unactuated
start, and which inputs (none) a robot could not provide. The keys are listed in
:mod:`upright.tasks.policy_schema`. Values are stored as ``metadata_props`` strings; lists and numbers as JSON.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pathlib
import warnings
from typing import Any

import numpy as np
import onnx
import torch

from upright.tasks.policy_schema import METADATA_VERSION, REQUIRED_KEYS, PolicyMetadataError, read_metadata

__all__ = [
    "METADATA_VERSION", "REQUIRED_KEYS", "PolicyMetadataError", "attach_metadata", "check_onnx_matches_torch",
    "quiet_onnx_exporter", "read_metadata",
]  # the schema lives in upright.tasks.policy_schema (shared with deploy)


@contextlib.contextmanager
def quiet_onnx_exporter():
    """Silence the torch ONNX exporter's optional-dependency warnings (e.g. torchvision ops) while exporting."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        logger.setLevel(level)


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return value


def attach_metadata(path: str | pathlib.Path, metadata: dict[str, Any]) -> None:
    """Write ``metadata`` (JSON-serialisable values) into the ONNX file's ``metadata_props``, replacing old ones.

    The weights are stored inside the file (torch's exporter may write them to ``<name>.data``; that
    side file is folded in and removed), so the ``.onnx`` file alone is the policy.
    """
    path = pathlib.Path(path)
    model = onnx.load(str(path))  # loads external weights into the graph
    del model.metadata_props[:]
    for key, value in {"upright_metadata_version": METADATA_VERSION, **metadata}.items():
        entry = model.metadata_props.add()
        entry.key = key
        entry.value = json.dumps(_to_jsonable(value))
    onnx.save(model, str(path), save_as_external_data=False)
    side = path.with_name(path.name + ".data")
    if side.exists():
        side.unlink()


def check_onnx_matches_torch(
    path: str | pathlib.Path, policy: torch.nn.Module, obs: torch.Tensor, atol: float = 1e-5
) -> float:
    """Run the ONNX file with onnxruntime and the torch policy on the same observations.

    Args:
        path: ONNX file with input ``obs`` (1, D) and output ``actions``.
        policy: torch module mapping (B, D) float32 to actions, in eval mode.
        obs: (B, D) float32 observations to compare on, e.g. the env's current ones.
        atol: tolerance on the absolute difference.

    Returns:
        The max absolute difference.

    Raises:
        AssertionError: the outputs differ by more than ``atol``.
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    obs = obs.detach().to("cpu", torch.float32)
    with torch.no_grad():
        expected = policy(obs).cpu().numpy()
    got = np.concatenate([session.run(None, {"obs": obs[i : i + 1].numpy()})[0] for i in range(obs.shape[0])])
    err = float(np.abs(got - expected).max())
    if err > atol:
        raise AssertionError(f"ONNX output differs from torch by {err:.3g} > {atol:g} ({path})")
    return err
