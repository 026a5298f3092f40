"""How to run one MLP policy file: :class:`PolicySpec` (the decoded contract) and the checks of it that need no robot
and no task (:func:`joint_floats`, :func:`positive_number`, :func:`dry_run`).

The robot-side checks (joints against the robot's motors, gains against their envelope) and the observation terms a
daemon can build live in :mod:`upright.deploy.metadata`, which builds the spec from a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from upright.policy_io.schema import PolicyMetadataError
from upright.policy_io.session import one_line, open_session


@dataclass(frozen=True)
class PolicySpec:
    """How to run one policy file. Arrays are float64, in the order of :attr:`joint_names`."""

    path: str
    task: str
    joint_names: tuple[str, ...]
    kp: np.ndarray
    kd: np.ndarray
    default_joint_pos: np.ndarray
    held_joint_names: tuple[str, ...]
    held_kp: np.ndarray
    held_kd: np.ndarray
    held_joint_pos: np.ndarray
    action_mode: str
    """How an action a (J,) becomes the PD targets of the policy joints (rad), one of
    :data:`~upright.policy_io.schema.ACTION_MODES` for an MLP file: ``"relative"`` p_target = q_measured + β·a
    (HoST), ``"absolute"`` p_target = default_joint_pos + β·a; a chunked policy's contract may also say ``"delta"``
    p_target = clip(previous p_target + β·a, joint limits) (:mod:`upright.deploy.chunk_policy`)."""
    action_scale: float
    """β of :attr:`action_mode`'s formula."""
    action_clip: float
    """Actions are clipped to ±action_clip before use (inf: no clip)."""
    control_dt: float
    """Policy period, s."""
    observation_names: tuple[str, ...]
    observation_dims: tuple[int, ...]
    observation_scales: tuple[float, ...]
    history_length: int
    """Whole frames stacked, oldest first (``history_layout`` = ``frames_oldest_first``)."""
    observation_clip: float
    input_name: str
    output_name: str
    metadata: dict[str, Any] = field(repr=False)
    """Every metadata key, decoded."""

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    @property
    def num_actions(self) -> int:
        """Width A of the policy's action: 4 for ``ee_delta`` (the site's dx, dy, dz and the finger,
        ``ee_action_names``), else one per policy joint."""
        if self.action_mode == "ee_delta":
            return len(self.metadata.get("ee_action_names", ()))
        return self.num_joints

    @property
    def frame_dim(self) -> int:
        """Width of one observation frame."""
        return int(sum(self.observation_dims))

    @property
    def obs_dim(self) -> int:
        """Width of the policy input (history · frame)."""
        return self.frame_dim * self.history_length


def joint_floats(meta: dict, key: str, n: int, path) -> np.ndarray:
    """``meta[key]`` as (n,) float64, one value per joint.

    Raises:
        PolicyMetadataError: another count than ``n``, or a NaN/inf (one line naming the key).
    """
    value = np.asarray(meta[key], dtype=np.float64).reshape(-1)
    if value.size != n:
        raise PolicyMetadataError(f"{path}: '{key}' has {value.size} values, expected {n} (one per joint)")
    if not np.all(np.isfinite(value)):
        raise PolicyMetadataError(f"{path}: '{key}' contains NaN or inf")
    return value


def positive_number(name: str, value: Any, path, allow_inf: bool = False) -> float:
    """``value`` as a positive float (inf only with ``allow_inf``).

    Raises:
        PolicyMetadataError: not a number, not positive, NaN, or inf when not allowed (one line naming ``name``).
    """
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise PolicyMetadataError(f"{path}: '{name}' = {value!r} is not a number") from err
    if not (v > 0) or (math.isinf(v) and not allow_inf) or math.isnan(v):
        raise PolicyMetadataError(f"{path}: '{name}' must be a positive number, got {value!r}")
    return v


def dry_run(spec: PolicySpec, declared: list[int] | None = None) -> None:
    """Load ``spec.path`` in onnxruntime as the daemon does (:func:`~upright.policy_io.session.open_session`) and run
    it once on a zero observation (1, obs_dim) float32: the output must be (1, A) (:attr:`PolicySpec.num_actions`) and
    finite.

    Args:
        declared: the output shape the graph declares (named in the refusal of another computed shape).

    Raises:
        PolicyMetadataError: onnxruntime cannot load or run the graph (an op of a custom domain, ...), or the output
            is another shape than the file declares, or NaN/inf (one line).
    """
    path = spec.path
    session = open_session(path, quiet=True)
    obs = np.zeros((1, spec.obs_dim), np.float32)
    try:
        out = np.asarray(session.run([spec.output_name], {spec.input_name: obs})[0])
    except Exception as err:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise PolicyMetadataError(
            f"{path}: input_name '{spec.input_name}': the graph fails on a zero observation "
            f"(1, {spec.obs_dim}): {one_line(err)}"
        ) from None
    want = (1, spec.num_actions)
    if out.shape != want:
        said = f"declares {list(declared)} and " if declared is not None else ""
        raise PolicyMetadataError(
            f"{path}: output_name '{spec.output_name}' computes shape {tuple(out.shape)} on a zero observation (1, "
            f"{spec.obs_dim}), but the graph {said}its action needs {want}; the graph does not compute what it "
            "declares: re-export it"
        )
    if not np.all(np.isfinite(out)):
        raise PolicyMetadataError(
            f"{path}: output_name '{spec.output_name}' is NaN/inf on a zero observation "
            f"({int(np.sum(~np.isfinite(out)))} of {out.size} values); re-export it"
        )
