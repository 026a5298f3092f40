"""Resolving ``policy=`` to a file, and checking a policy file's metadata against what a task's env expects.

Torch-free: play, evaluation and the VLA code wrap these in their own loaders.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np

from upright.policy_io.schema import ENV_ACTION_MODES, PolicyMetadataError, action_mode_of

METADATA_MUST_MATCH = (
    "task",
    "joint_names",
    "observation_names",
    "observation_dims",
    "observation_history_length",
)
"""ONNX metadata keys that must equal the env's exactly."""


class PolicyLoadError(ValueError):
    """A policy cannot be loaded or does not fit the task (the message says which and why)."""


def resolve_policy_path(policy: str) -> pathlib.Path:
    """Resolve ``policy=``: a ``.pt``/``.onnx`` file, or a run directory (its ``policy.onnx``, else its latest
    ``model_<it>.pt``).

    Raises:
        PolicyLoadError: nothing loadable there (the message says what was looked for).
    """
    p = pathlib.Path(policy).expanduser()
    if p.is_dir():
        if (p / "policy.onnx").is_file():
            return p / "policy.onnx"
        ckpts = sorted(
            p.glob("model_*.pt"), key=lambda f: int(f.stem.split("_")[1]) if f.stem.split("_")[1].isdigit() else -1
        )
        if ckpts:
            return ckpts[-1]
        raise PolicyLoadError(
            f"policy={policy}: run directory has neither policy.onnx nor a model_<iteration>.pt checkpoint"
        )
    if not p.exists():
        raise PolicyLoadError(
            f"policy={policy}: no such file or directory. Give a run directory, a checkpoint .pt, an .onnx file, "
            "'zero' or 'random'."
        )
    if p.suffix not in (".pt", ".onnx"):
        raise PolicyLoadError(
            f"policy={policy}: expected a .pt checkpoint or an .onnx file, got '{p.suffix or p.name}'"
        )
    return p


def check_metadata(meta: dict, expected: dict, path: str | pathlib.Path) -> None:
    """Compare an ONNX file's metadata with what the env expects (:data:`METADATA_MUST_MATCH`, ``control_dt`` (s),
    and the ``action_mode`` of a schema >= 3 file: an older file's says relative whatever its run trained with).

    Args:
        meta: the file's decoded metadata.
        expected: the env's (:func:`upright.tasks.registry.policy_metadata`); lists, tuples or numpy arrays.

    Raises:
        PolicyLoadError: a key differs (one line listing each difference: key, file's value, task's value).
    """
    problems = []
    for key in METADATA_MUST_MATCH:
        got, want = meta.get(key), expected.get(key)
        if isinstance(want, (np.ndarray, tuple)):
            want = list(np.asarray(want).tolist()) if isinstance(want, np.ndarray) else list(want)
        if got != want:
            problems.append(f"{key}: policy has {_short(got)}, task expects {_short(want)}")
    if "action_mode" in meta and meta.get("upright_metadata_version") not in ("1", "2"):
        try:
            mode = action_mode_of(meta, path, ENV_ACTION_MODES)
        except PolicyMetadataError as err:
            raise PolicyLoadError(str(err)) from None
        if mode != expected.get("action_mode"):
            problems.append(f"action_mode: policy has {mode!r}, env.action_mode is {expected.get('action_mode')!r}")
    dt_got, dt_want = meta.get("control_dt"), expected.get("control_dt")
    if dt_got is not None and dt_want is not None and not math.isclose(float(dt_got), float(dt_want), rel_tol=1e-6):
        problems.append(f"control_dt: policy has {dt_got}, task expects {dt_want}")
    if problems:
        raise PolicyLoadError(
            f"{path} does not match task '{expected.get('task')}': "
            + "; ".join(problems)
            + ". Play it with the task/config it was trained with, or re-export it."
        )


def _short(value, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
