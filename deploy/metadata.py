"""The policy contract, read from an ONNX file's metadata alone, and checked against the robot.

Everything the daemon needs to run a policy comes from the file: joints, Kp/Kd, default pose,
held joints, action mode (``relative`` or ``absolute``), scale and clip, control dt, observation terms
with dims, scales and history, observation clip, and the graph's input/output names. Values are JSON
strings in the model's ``metadata_props``, the schema of :mod:`upright.tasks.policy_schema` that the exporter writes
(deploy does not import training).

A file without that metadata, or whose joints do not match the robot's, is refused with
:class:`PolicyMetadataError` before the daemon touches a motor; so is a file whose values are not physically
plausible for the robot (:func:`check_plausible`: Kp/Kd, torque limits, ``action_scale``, ``control_dt`` against the
motors' envelope of :func:`~upright.deploy.robot_config.gain_envelope`), a key of the wrong JSON type
(:data:`KEY_TYPES`), and a graph that onnxruntime cannot load or whose output on a zero observation is not the
declared (1, J) of finite values (:func:`dry_run`). Each refusal is one line naming the file and the key.
"""

from __future__ import annotations

import json
import math
import pathlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from upright.deploy.robot_config import (
    KD_SATURATION_SPEED_RAD_S,
    KP_SATURATION_ERROR_RAD,
    MAX_ACTION_SCALE,
    MAX_CONTROL_DT_S,
    RobotConfig,
    gain_envelope,
)  # fmt: skip
from upright.tasks.policy_schema import (
    HISTORY_LAYOUT,
    METADATA_VERSION,
    REEXPORT_HINT,
    REQUIRED_KEYS,
    PolicyMetadataError,
    action_mode_of,
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
    except Exception as err:
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


_STR, _INT, _NUM, _STRS, _INTS, _NUMS = "str", "int", "num", "strs", "ints", "nums"
KEY_TYPES: dict[str, str] = {
    "upright_metadata_version": _STR, "task": _STR,
    "joint_names": _STRS, "kp": _NUMS, "kd": _NUMS, "torque_limit": _NUMS, "default_joint_pos": _NUMS,
    "held_joint_names": _STRS, "held_kp": _NUMS, "held_kd": _NUMS, "held_torque_limit": _NUMS, "held_joint_pos": _NUMS,
    "action_scale": _NUM, "action_mode": _STR, "action_clip": _NUM, "control_dt": _NUM, "decimation": _INT,
    "sim_dt": _NUM, "observation_names": _STRS, "observation_dims": _INTS, "observation_scales": _NUMS,
    "observation_descriptions": _STRS, "observation_clip": _NUM, "observation_history_length": _INT,
    "observation_history_order": _STR, "history_layout": _STR, "unactuated_steps": _INT, "privileged_inputs": _STRS,
    "training_assistance": _STR, "input_name": _STR, "output_name": _STR,
}  # fmt: skip
"""The JSON type of each key the daemon reads (every required key, and the optional ``observation_history_order``):
``str``, ``int``, ``num`` (int or float, not a boolean), or a flat list of one of them (``strs``, ``ints``,
``nums``)."""

_TYPE_WORDS = {
    _STR: "a string", _INT: "an integer", _NUM: "a number", _STRS: "a list of strings", _INTS: "a list of integers",
    _NUMS: "a flat list of numbers",
}  # fmt: skip


def _is(kind: str, value: Any) -> bool:
    if kind == _STR:
        return isinstance(value, str)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, list) and all(_is(kind[:-1] if kind != _NUMS else _NUM, v) for v in value)


def _show(value: Any, width: int = 60) -> str:
    """``value`` as JSON on one line, shortened to ``width`` characters."""
    text = json.dumps(value) if not isinstance(value, float) else f"{value:g}"
    return text if len(text) <= width else text[: width - 3] + "..."


def check_types(meta: dict[str, Any], path) -> None:
    """Check the JSON type of every key of :data:`KEY_TYPES` that ``meta`` has.

    Raises:
        PolicyMetadataError: ``<file>: <key> = <value> is not <type> ...`` (one line).
    """
    for key, kind in KEY_TYPES.items():
        if key in meta and not _is(kind, meta[key]):
            raise PolicyMetadataError(
                f"{path}: {key} = {_show(meta[key])} is not {_TYPE_WORDS[kind]} ({type(meta[key]).__name__}); the "
                "exporter writes it as one: re-export the policy (python -m upright.training.export --checkpoint "
                "<run>/model_<it>.pt --out <dir>)"
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


def load_policy_spec(
    path: str | pathlib.Path, robot: RobotConfig | None = None, io_rate_hz: float = 500.0
) -> PolicySpec:
    """Read and check a policy file's metadata; with ``robot``, also check it against the robot.

    Everything here runs before the daemon opens a port, the operator socket or a dataset, ending with one
    inference of the graph on a zero observation (:func:`dry_run`).

    Args:
        path: the ONNX file.
        robot: check joints, gains and torque limits against its motors (:func:`check_joints_match_robot`,
            :func:`check_plausible`); None: only what needs no robot.
        io_rate_hz: the daemon's loop rate (``upright-deploy run --io-rate``): ``control_dt`` must be a whole
            number of its periods.

    Raises:
        PolicyMetadataError: missing metadata, a key of the wrong type, inconsistent values, unknown observation
            terms, an input/output shape that disagrees with the metadata, joints that do not match the robot
            (a policy or held joint the robot lacks, a robot joint the file leaves uncommanded, a default pose
            outside the joint limits), implausible values (Kp, Kd, torque_limit, action_scale, control_dt), or a
            graph that onnxruntime cannot load or that computes another output than it declares. One line each.
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
    check_types(meta, path)
    if meta["history_layout"] != HISTORY_LAYOUT:
        raise PolicyMetadataError(
            f"{path}: history_layout {meta['history_layout']!r} is not supported (only {HISTORY_LAYOUT!r})"
        )
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
            raise PolicyMetadataError(
                f"{path}: observation term '{name}' has dim {dim}, expected {expected_dims[name]}"
            )
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
        raise PolicyMetadataError(
            f"{path}: output '{spec.output_name}' has shape {outputs[spec.output_name]}, expected {n} joints"
        )
    if robot is not None:
        check_joints_match_robot(spec, robot)
    check_plausible(spec, robot, io_rate_hz)
    dry_run(spec, outputs[spec.output_name])  # last: it loads the graph in onnxruntime
    return spec


def _per_joint_bounds(spec: PolicySpec, robot: RobotConfig):
    """(key, joint names, values) of the per-joint values a file gives, and the envelope of each joint."""
    meta = spec.metadata
    rows = [
        ("kp", spec.joint_names, spec.kp),
        ("kd", spec.joint_names, spec.kd),
        ("held_kp", spec.held_joint_names, spec.held_kp),
        ("held_kd", spec.held_joint_names, spec.held_kd),
    ]
    if "torque_limit" in meta:  # the MLP schema's keys (a chunked policy's contract has none)
        rows.append(("torque_limit", spec.joint_names, _floats(meta, "torque_limit", spec.num_joints, spec.path)))
    if "held_torque_limit" in meta and spec.held_joint_names:
        rows.append(("held_torque_limit", spec.held_joint_names,
                     _floats(meta, "held_torque_limit", len(spec.held_joint_names), spec.path)))  # fmt: skip
    return rows, {e.joint: e for e in gain_envelope(robot)}


def _joint_problem(key: str, value: float, env) -> tuple[str, str] | None:
    """(why, fix) when ``value`` of per-joint ``key`` is outside the joint's envelope ``env``, else None."""
    motor = f"{env.torque_limit:g} N·m of its motor" + (f" ({env.actuator})" if env.actuator else "")
    if key.endswith("torque_limit"):
        if 0 < value <= env.torque_limit * (1 + 1e-9):
            return None
        return (
            "not positive" if value <= 0 else f"above the {motor}",
            f"the file must carry the limit it was trained with, in (0, {env.torque_limit:g}] N·m (the daemon "
            "clamps to the motor's)",
        )
    kp = key.endswith("kp")
    gain, bound, unit = ("Kp", env.kp_max, "N·m/rad") if kp else ("Kd", env.kd_max, "N·m·s/rad")
    if value <= bound * (1 + 1e-9):
        return None
    why = []
    if value > env.frame_k_max:
        why.append(f"the motor frame encodes at most {env.frame_k_max:.1f} {unit} (the motor would silently run that)")
    if kp and value * KP_SATURATION_ERROR_RAD > env.torque_limit:
        why.append(
            f"a 0.1 rad error would command {value * 0.1:.3g} N·m, {value * 0.1 / env.torque_limit:.3g} x the "
            f"{motor} (at most 10 x is plausible: saturating at a {KP_SATURATION_ERROR_RAD:g} rad error)"
        )
    if not kp and value * KD_SATURATION_SPEED_RAD_S > env.torque_limit:
        why.append(
            f"a 1 rad/s speed would command {value:.3g} N·m, {value / env.torque_limit:.3g} x the {motor} "
            f"(at most 10 x is plausible: saturating at {KD_SATURATION_SPEED_RAD_S:g} rad/s)"
        )
    return " and ".join(why), f"re-export the policy with {gain} <= {bound:.1f} {unit} for this joint"


def check_plausible(spec: PolicySpec, robot: RobotConfig | None, io_rate_hz: float = 500.0) -> None:
    """Check that the file's values are physically plausible for ``robot``: each joint's Kp and Kd within its motor's
    envelope (:func:`~upright.deploy.robot_config.gain_envelope`: the torque a 0.1 rad error or a 1 rad/s speed
    commands at most 10 x the motor's torque limit, and no more than the motor's command frame encodes), each
    ``torque_limit`` positive and at most the motor's, ``action_scale`` at most
    :data:`~upright.deploy.robot_config.MAX_ACTION_SCALE` rad per unit action, and ``control_dt`` a whole number of
    loop periods (``1 / io_rate_hz``) between one period and
    :data:`~upright.deploy.robot_config.MAX_CONTROL_DT_S`. Without ``robot``, only the last two.

    Raises:
        PolicyMetadataError: ``<file>: <key> = <value> is implausible for <robot>: <why>; <fix>`` (the first bad value).
    """
    path = spec.path
    name = robot.name if robot is not None else "any robot"

    def refuse(key: str, value: float, why: str, fix: str) -> None:
        raise PolicyMetadataError(f"{path}: {key} = {value:g} is implausible for {name}: {why}; {fix}")

    if robot is not None:
        rows, envelope = _per_joint_bounds(spec, robot)
        for key, joints, values in rows:
            bad = [(j, float(v)) for j, v in zip(joints, values) if _joint_problem(key, float(v), envelope[j])]
            if bad:
                joint, value = bad[0]
                why, fix = _joint_problem(key, value, envelope[joint])
                more = f" ({len(bad) - 1} more joints of {key} are out of bounds too)" if len(bad) > 1 else ""
                refuse(f"{key}[{joint}]", value, why, fix + more)

    if spec.action_scale > MAX_ACTION_SCALE:
        refuse("action_scale", spec.action_scale, f"a unit action would move a PD target by {spec.action_scale:.3g} "
               f"rad, more than {MAX_ACTION_SCALE:g} rad per unit action", f"re-export with action_scale in (0, "
               f"{MAX_ACTION_SCALE:g}] (HoST 1.0, recipe=getup 0.6)")  # fmt: skip
    period = 1.0 / float(io_rate_hz)
    dt = spec.control_dt
    cycles = dt / period
    if dt > MAX_CONTROL_DT_S * (1 + 1e-9):
        refuse(
            "control_dt",
            dt,
            f"a policy period longer than {MAX_CONTROL_DT_S:g} s (10 Hz) cannot catch a fall",
            f"give the period it was trained with, a multiple of {period:g} s up to {MAX_CONTROL_DT_S:g} s",
        )
    if cycles < 1 - 1e-6:
        refuse(
            "control_dt",
            dt,
            f"shorter than one loop period ({period:g} s at --io-rate {io_rate_hz:g} Hz)",
            f"give the period it was trained with, a multiple of {period:g} s",
        )
    if abs(cycles - round(cycles)) > 1e-6:
        lo, hi = math.floor(cycles) * period, math.ceil(cycles) * period
        refuse("control_dt", dt, f"not a whole number of loop periods ({cycles:.4g} x {period:g} s at --io-rate "
               f"{io_rate_hz:g} Hz; the policy runs every N-th cycle)", f"give the period it was trained with, e.g. "
               f"{lo:g} or {hi:g}, or an --io-rate it divides")  # fmt: skip


_STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "com.microsoft")
"""Op domains onnxruntime's CPU provider implements (custom domains need a registered library)."""


def _one_line(err: BaseException, width: int = 240) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def dry_run(spec: PolicySpec, declared: list[int] | None = None) -> None:
    """Load ``spec.path`` in onnxruntime as the daemon does (:func:`upright.deploy.policy.open_session`) and run it
    once on a zero observation (1, obs_dim): the output must be (1, J) and finite.

    Raises:
        PolicyMetadataError: onnxruntime cannot load or run the graph (an op of a custom domain, ...), or the output
            is another shape than the file declares, or NaN/inf (one line).
    """
    from upright.deploy.policy import open_session

    path = spec.path
    try:
        session = open_session(path, quiet=True)
    except Exception as err:  # noqa: BLE001 - onnxruntime raises its own exception types
        model = onnx.load(path, load_external_data=False)
        local = {f.domain for f in model.functions}
        custom = [
            f"{n.domain}::{n.op_type} (node '{n.name}')"
            for n in model.graph.node
            if n.domain not in _STANDARD_DOMAINS and n.domain not in local
        ]
        why = (
            f"ops of a custom domain onnxruntime does not implement: {', '.join(custom[:3])}"
            if custom
            else _one_line(err)
        )
        raise PolicyMetadataError(
            f"{path}: graph: onnxruntime cannot load it: {why}; export the policy with standard "
            "ONNX ops (python -m upright.training.export)"
        ) from None
    obs = np.zeros((1, spec.obs_dim), np.float32)
    try:
        out = np.asarray(session.run([spec.output_name], {spec.input_name: obs})[0])
    except Exception as err:  # noqa: BLE001
        raise PolicyMetadataError(
            f"{path}: input_name '{spec.input_name}': the graph fails on a zero observation "
            f"(1, {spec.obs_dim}): {_one_line(err)}"
        ) from None
    want = (1, spec.num_joints)
    if out.shape != want:
        said = f"declares {list(declared)} and " if declared is not None else ""
        raise PolicyMetadataError(
            f"{path}: output_name '{spec.output_name}' computes shape {tuple(out.shape)} on a zero observation (1, "
            f"{spec.obs_dim}), but the graph {said}joint_names need {want}; the graph does not compute what it "
            "declares: re-export it"
        )
    if not np.all(np.isfinite(out)):
        raise PolicyMetadataError(
            f"{path}: output_name '{spec.output_name}' is NaN/inf on a zero observation "
            f"({int(np.sum(~np.isfinite(out)))} of {out.size} values); re-export it"
        )


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
            raise PolicyMetadataError(
                f"{spec.path}: default position {pos:.4f} of {name} outside [{m.lower}, {m.upper}]"
            )
