"""ONNX export of the actor (observation normaliser included) with self-describing metadata.

The metadata lets a deployed policy run from the ``.onnx`` file alone: joints, Kp/Kd, torque limits, default
pose, held joints and their targets, action scale β and mode, control dt and decimation, the observation terms
with widths, scales and units, the history length and layout (whole frames, oldest first), the unactuated
start, and which inputs (none) a robot could not provide. The keys are listed in
:mod:`upright.policy_io.schema`. Values are stored as ``metadata_props`` strings; lists and numbers as JSON.
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

from upright.policy_io.schema import METADATA_VERSION, REQUIRED_KEYS, PolicyMetadataError, read_metadata

__all__ = [
    "METADATA_VERSION",
    "REQUIRED_KEYS",
    "PolicyMetadataError",
    "attach_metadata",
    "check_onnx_matches_torch",
    "export_dynamic_batch",
    "onnx_batch_is_dynamic",
    "quiet_onnx_exporter",
    "read_metadata",
]  # the schema lives in upright.policy_io.schema (shared with deploy)


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


MAX_DYNAMIC_BATCH = 65536
"""Largest batch a dynamic-batch export accepts (torch.export needs a bound; far above any env count used)."""


def export_dynamic_batch(model: torch.nn.Module, path: str | pathlib.Path) -> None:
    """Export an actor's ONNX module (rsl-rl's ``as_onnx()``: input ``obs`` (B, D) float32, output ``actions``
    (B, A)) with a dynamic batch axis B (1 <= B <= :data:`MAX_DYNAMIC_BATCH`), torch's dynamo exporter, opset 18, the
    weights inside the file (rsl-rl's own ``export_policy_to_onnx`` fixes B = 1). No metadata (:func:`attach_metadata`).
    """
    model = model.to("cpu").eval()
    dim = int(model.input_size)
    batch = torch.export.Dim("batch", min=1, max=MAX_DYNAMIC_BATCH)
    # an example batch of 2: torch.export specialises a dimension of size 1
    with torch.no_grad():
        torch.onnx.export(
            model,
            (torch.zeros(2, dim),),
            str(path),
            input_names=list(model.input_names),
            output_names=list(model.output_names),
            opset_version=18,
            dynamo=True,
            dynamic_shapes=({0: batch},),
            external_data=False,
            verbose=False,
        )


def onnx_batch_is_dynamic(session) -> bool:
    """Whether the first input of an onnxruntime session has a dynamic batch dimension (a name or None, not an int).
    Files written by rsl-rl's ``export_policy_to_onnx`` (the standup and lift policies, and residual policies exported
    before :func:`export_dynamic_batch` was used for them) have B fixed to 1: run them one row at a time."""
    return not isinstance(session.get_inputs()[0].shape[0], int)


def check_onnx_matches_torch(
    path: str | pathlib.Path, policy: torch.nn.Module, obs: torch.Tensor, atol: float = 1e-5
) -> float:
    """Run the ONNX file with onnxruntime and the torch policy on the same observations.

    Args:
        path: ONNX file with input ``obs`` (1, D) or (B, D) (dynamic batch) and output ``actions``.
        policy: torch module mapping (B, D) float32 to actions, in eval mode.
        obs: (B, D) float32 observations to compare on, e.g. the env's current ones.
        atol: tolerance on the absolute difference.

    Returns:
        The max absolute difference: one row at a time, and, for a file with a dynamic batch, all rows in one call too.

    Raises:
        AssertionError: the outputs differ by more than ``atol``.
    """
    from upright.policy_io.session import open_session

    session = open_session(path)
    obs = obs.detach().to("cpu", torch.float32)
    with torch.no_grad():
        expected = policy(obs).cpu().numpy()
    got = np.concatenate([session.run(None, {"obs": obs[i : i + 1].numpy()})[0] for i in range(obs.shape[0])])
    err = float(np.abs(got - expected).max())
    if onnx_batch_is_dynamic(session):
        err = max(err, float(np.abs(session.run(None, {"obs": obs.numpy()})[0] - expected).max()))
    if err > atol:
        raise AssertionError(f"ONNX output differs from torch by {err:.3g} > {atol:g} ({path})")
    return err
