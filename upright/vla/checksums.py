"""SHA-256 fingerprints of policies: a file's bytes, a torch module's parameters, a policy server's metadata.

Residual RL (:mod:`upright.vla.residual`) records them to show that its frozen base stayed frozen; the policy server
(:mod:`upright.vla.server`) sends :func:`policy_weights_sha256` in its metadata, so that a client can tell whether
the weights it is served changed. Torch is imported only to hash a module's parameters.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from typing import Any

import numpy as np


def file_sha256(path: str | pathlib.Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def parameters_sha256(policy: Any) -> str | None:
    """Hex SHA-256 over a torch policy's state dict (names, dtypes, shapes and bytes, in key order); None for a
    policy without one (an ONNX or remote base: its file checksum or its server's metadata is the record)."""
    if not hasattr(policy, "state_dict"):
        return None
    import torch

    h = hashlib.sha256()
    for name, t in policy.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def policy_weights_sha256(policy: Any) -> str | None:
    """A fingerprint of a policy's weights: :func:`parameters_sha256` of a torch module (TinyVLA), the
    :func:`file_sha256` of the file an ONNX policy runs (its ``path``); None when neither applies."""
    sha = parameters_sha256(policy)
    if sha is not None:
        return sha
    path = getattr(policy, "path", None)
    if isinstance(path, (str, pathlib.Path)) and pathlib.Path(path).is_file():
        return file_sha256(path)
    return None


def jsonable(value: Any) -> Any:
    """``value`` with numpy arrays as ``{"ndarray": list, "dtype": str}``, numpy scalars as numbers, bytes as text and
    tuples as lists (JSON-serialisable when the rest is)."""
    if isinstance(value, np.ndarray):
        return {"ndarray": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {str(jsonable(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def metadata_sha256(metadata: dict) -> str:
    """Hex SHA-256 of a policy server's metadata as canonical JSON (sorted keys; numpy arrays as lists with their
    dtype, bytes as text), so the same metadata always gives the same hash."""
    text = json.dumps(jsonable(metadata), sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()
