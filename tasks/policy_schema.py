"""The ONNX policy metadata schema shared by the exporter (training) and the daemon (deploy).

A policy file stores its contract as ``metadata_props`` entries whose values are JSON strings:
joints, Kp/Kd, default pose, action scale and mode, control dt, observation terms with dims, scales
and history length. Both sides import this module; deploy never imports training.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import onnx

METADATA_VERSION = "1"
"""Schema version of upright's ONNX metadata."""

REQUIRED_KEYS = (
    "upright_metadata_version", "task", "joint_names", "kp", "kd", "default_joint_pos", "action_scale",
    "action_mode", "control_dt", "observation_names", "observation_dims", "observation_scales",
    "observation_history_length",
)  # fmt: skip
"""Keys every upright policy file carries."""


class PolicyMetadataError(ValueError):
    """An ONNX file lacks upright metadata, carries invalid metadata, or does not fit the robot/task."""


def read_metadata(path: str | pathlib.Path) -> dict[str, Any]:
    """Read upright metadata from an ONNX file (values JSON-decoded).

    Raises:
        PolicyMetadataError: missing keys (the message lists them and says how to re-export).
    """
    model = onnx.load(str(path), load_external_data=False)
    meta = {p.key: json.loads(p.value) for p in model.metadata_props}
    missing = [k for k in REQUIRED_KEYS if k not in meta]
    if missing:
        raise PolicyMetadataError(
            f"{path} is not a self-describing upright policy: metadata keys {missing} are missing. "
            "Re-export it with upright (train.py exports on every checkpoint save)."
        )
    return meta
