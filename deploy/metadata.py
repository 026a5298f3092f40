"""The policy contract, read from an ONNX file's metadata alone, and checked against the robot.

Everything the daemon needs to run a policy comes from the file: joints, Kp/Kd, default pose,
held joints, action mode (``relative`` or ``absolute``), scale and clip, control dt, observation terms
with dims, scales and history, observation clip, and the graph's input/output names. Values are JSON
strings in the model's ``metadata_props``, the schema of :mod:`upright.tasks.policy_schema` that the exporter writes
(deploy does not import training).

A file without that metadata, or whose joints do not match the robot's, is refused with
:class:`PolicyMetadataError` before the daemon touches a motor.
"""

from __future__ import annotations

import json
import math
import pathlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from upright.deploy.robot_config import RobotConfig
from upright.tasks.policy_schema import (
    HISTORY_LAYOUT, METADATA_VERSION, REEXPORT_HINT, REQUIRED_KEYS, PolicyMetadataError, action_mode_of,
)  # fmt: skip
from upright.tasks.standup.observations import OBSERVATION_TERMS, observation_dims

TERMS_BY_NAME = {t.name: t for t in OBSERVATION_TERMS}
"""The shared observation term definitions the daemon can build, by name."""


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
    :data:`~upright.tasks.policy_schema.ACTION_MODES` for an MLP file: ``"relative"`` p_target = q_measured + β·a
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
    def frame_dim(self) -> int:
        """Width of one observation frame."""
        return int(sum(self.observation_dims))

    @property
    def obs_dim(self) -> int:
        """Width of the policy input (history · frame)."""
        return self.frame_dim * self.history_length


def read_raw_metadata(path: str | pathlib.Path) -> dict[str, Any]:
    """Decode the JSON values of an ONNX file's ``metadata_props`` (weights are not loaded).

    Raises:
        PolicyMetadataError: the file cannot be read as ONNX, or a value is not JSON.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise PolicyMetadataError(f"policy file {path} does not exist")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001 - any parse failure is "not a policy file"
        raise PolicyMetadataError(f"{path} is not a readable ONNX file: {err}") from err
    try:
        return {p.key: json.loads(p.value) for p in model.metadata_props}
    except json.JSONDecodeError as err:
        raise PolicyMetadataError(f"{path}: metadata value is not JSON ({err})") from err


def _graph_io(path: pathlib.Path) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    model = onnx.load(str(path), load_external_data=False)

    def dims(vi) -> list[int]:
        return [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]

    inits = {i.name for i in model.graph.initializer}
    return (
        {i.name: dims(i) for i in model.graph.input if i.name not in inits},
        {o.name: dims(o) for o in model.graph.output},
    )


def _floats(meta: dict, key: str, n: int, path) -> np.ndarray:
    value = np.asarray(meta[key], dtype=np.float64).reshape(-1)
    if value.size != n:
        raise PolicyMetadataError(f"{path}: '{key}' has {value.size} values, expected {n} (one per joint)")
    if not np.all(np.isfinite(value)):
        raise PolicyMetadataError(f"{path}: '{key}' contains NaN or inf")
    return value


def _positive(name: str, value: Any, path, allow_inf: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise PolicyMetadataError(f"{path}: '{name}' = {value!r} is not a number") from err
    if not (v > 0) or (math.isinf(v) and not allow_inf) or math.isnan(v):
        raise PolicyMetadataError(f"{path}: '{name}' must be a positive number, got {value!r}")
    return v


def load_policy_spec(path: str | pathlib.Path, robot: RobotConfig | None = None) -> PolicySpec:
    """Read and check a policy file's metadata; with ``robot``, also check it against the robot.

    Raises:
        PolicyMetadataError: missing metadata, inconsistent values, unknown observation terms, an
            input/output shape that disagrees with the metadata, or joints that do not match the robot
            (a policy or held joint the robot lacks, a robot joint the file leaves uncommanded, a
            default pose outside the joint limits).
    """
    path = pathlib.Path(path)
    meta = read_raw_metadata(path)
    missing = [k for k in REQUIRED_KEYS if k not in meta]
    if missing:
        raise PolicyMetadataError(
            f"{path} is not a self-describing upright policy: metadata keys {missing} are missing. "
            f"Refusing to run it. {REEXPORT_HINT}"
        )
    if str(meta["upright_metadata_version"]) != METADATA_VERSION:
        raise PolicyMetadataError(
            f"{path}: metadata version {meta['upright_metadata_version']!r}, this daemon reads {METADATA_VERSION!r}. "
            f"{REEXPORT_HINT}"
        )
    if meta["history_layout"] != HISTORY_LAYOUT:
        raise PolicyMetadataError(f"{path}: history_layout {meta['history_layout']!r} is not supported (only {HISTORY_LAYOUT!r})")
    if meta["privileged_inputs"]:
        raise PolicyMetadataError(
            f"{path}: the policy reads inputs a robot does not provide: {meta['privileged_inputs']}; refusing to run it"
        )
    action_mode = action_mode_of(meta, path)
    order = meta.get("observation_history_order", "oldest_first")
    if order != "oldest_first":
        raise PolicyMetadataError(f"{path}: observation_history_order {order!r} is not supported")

    joints = tuple(str(j) for j in meta["joint_names"])
    n = len(joints)
    if n == 0 or len(set(joints)) != n:
        raise PolicyMetadataError(f"{path}: joint_names must be non-empty and unique")
    held = tuple(str(j) for j in meta.get("held_joint_names", []))
    nh = len(held)

    names = tuple(str(s) for s in meta["observation_names"])
    dims = tuple(int(d) for d in meta["observation_dims"])
    scales = tuple(float(s) for s in meta["observation_scales"])
    if not (len(names) == len(dims) == len(scales)):
        raise PolicyMetadataError(f"{path}: observation_names/dims/scales have different lengths")
    expected_dims = dict(zip((t.name for t in OBSERVATION_TERMS), observation_dims(n)))
    for name, dim in zip(names, dims):
        if name not in TERMS_BY_NAME:
            raise PolicyMetadataError(
                f"{path}: observation term '{name}' is unknown to this daemon (known: {sorted(TERMS_BY_NAME)})"
            )
        if dim != expected_dims[name]:
            raise PolicyMetadataError(f"{path}: observation term '{name}' has dim {dim}, expected {expected_dims[name]}")
    history = int(meta["observation_history_length"])
    if history < 1:
        raise PolicyMetadataError(f"{path}: observation_history_length must be >= 1")

    spec = PolicySpec(
        path=str(path),
        task=str(meta["task"]),
        joint_names=joints,
        kp=_floats(meta, "kp", n, path),
        kd=_floats(meta, "kd", n, path),
        default_joint_pos=_floats(meta, "default_joint_pos", n, path),
        held_joint_names=held,
        held_kp=_floats(meta, "held_kp", nh, path) if nh else np.zeros(0),
        held_kd=_floats(meta, "held_kd", nh, path) if nh else np.zeros(0),
        held_joint_pos=_floats(meta, "held_joint_pos", nh, path) if nh else np.zeros(0),
        action_mode=action_mode,
        action_scale=_positive("action_scale", meta["action_scale"], path),
        action_clip=_positive("action_clip", meta.get("action_clip", math.inf), path, allow_inf=True),
        control_dt=_positive("control_dt", meta["control_dt"], path),
        observation_names=names,
        observation_dims=dims,
        observation_scales=scales,
        history_length=history,
        observation_clip=_positive("observation_clip", meta.get("observation_clip", math.inf), path, allow_inf=True),
        input_name=str(meta.get("input_name", "obs")),
        output_name=str(meta.get("output_name", "actions")),
        metadata=meta,
    )
    if np.any(spec.kp < 0) or np.any(spec.kd < 0) or np.any(spec.held_kp < 0) or np.any(spec.held_kd < 0):
        raise PolicyMetadataError(f"{path}: negative Kp or Kd")

    inputs, outputs = _graph_io(path)
    if spec.input_name not in inputs or spec.output_name not in outputs:
        raise PolicyMetadataError(
            f"{path}: graph has inputs {list(inputs)} and outputs {list(outputs)}, metadata names "
            f"'{spec.input_name}' -> '{spec.output_name}'"
        )
    if inputs[spec.input_name][-1:] != [spec.obs_dim]:
        raise PolicyMetadataError(
            f"{path}: input '{spec.input_name}' has shape {inputs[spec.input_name]}, metadata implies "
            f"{spec.history_length} x {spec.frame_dim} = {spec.obs_dim}"
        )
    if outputs[spec.output_name][-1:] != [n]:
        raise PolicyMetadataError(f"{path}: output '{spec.output_name}' has shape {outputs[spec.output_name]}, expected {n} joints")
    if robot is not None:
        check_joints_match_robot(spec, robot)
    return spec


def check_joints_match_robot(spec: PolicySpec, robot: RobotConfig) -> None:
    """Check that the policy's joints and held joints are exactly the robot's motors, with poses in range.

    Raises:
        PolicyMetadataError: the message lists the mismatching joints.
    """
    robot_joints = robot.joint_names
    ours = spec.joint_names + spec.held_joint_names
    both = sorted(set(spec.joint_names) & set(spec.held_joint_names))
    unknown = [j for j in ours if j not in robot_joints]
    uncommanded = [j for j in robot_joints if j not in ours]
    problems = []
    if both:
        problems.append(f"joints both policy-driven and held: {both}")
    if unknown:
        problems.append(f"joints the robot '{robot.name}' does not have: {unknown}")
    if uncommanded:
        problems.append(f"robot joints the policy file neither drives nor holds: {uncommanded}")
    if problems:
        raise PolicyMetadataError(
            f"{spec.path}: the policy's joints do not match the robot; refusing to run it. " + "; ".join(problems)
        )
    motors = {m.joint: m for m in robot.motors}
    for name, pos in zip(ours, np.concatenate([spec.default_joint_pos, spec.held_joint_pos])):
        m = motors[name]
        if not m.lower <= pos <= m.upper:
            raise PolicyMetadataError(f"{spec.path}: default position {pos:.4f} of {name} outside [{m.lower}, {m.upper}]")
