"""The policy contract, read from an ONNX file's metadata alone, and checked against the robot.

Everything the daemon needs to run a policy comes from the file: joints, Kp/Kd, default pose,
held joints, action mode (``relative`` or ``absolute``), scale and clip, control dt, observation terms
with dims, scales and history, observation clip, and the graph's input/output names. Values are JSON
strings in the model's ``metadata_props``, the schema of :mod:`upright.policy_io.schema` that the exporter writes
(deploy does not import training).

A file without that metadata, or whose joints do not match the robot's, is refused with
:class:`PolicyMetadataError` before the daemon touches a motor; so is a file whose values are not physically
plausible for the robot (:func:`check_plausible`: Kp/Kd, torque limits, ``action_scale``, ``control_dt`` against the
motors' envelope of :func:`~upright.deploy.robot_config.gain_envelope`), a key of the wrong JSON type
(:data:`~upright.policy_io.schema.KEY_TYPES`), and a graph that onnxruntime cannot load or whose output on a zero
observation is not the declared (1, J) of finite values (:func:`~upright.policy_io.spec.dry_run`). Each refusal is
one line naming the file and the key. The schema, the spec and the dry run are :mod:`upright.policy_io`'s; this module
adds the robot (joints, gain envelope) and the observation terms the daemon builds.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np

from upright.deploy.ee_action import EeDeltaRule
from upright.deploy.robot_config import (
    KD_SATURATION_SPEED_RAD_S,
    KP_SATURATION_ERROR_RAD,
    MAX_ACTION_SCALE,
    MAX_CONTROL_DT_S,
    RobotConfig,
    gain_envelope,
)  # fmt: skip
from upright.policy_io.obs_terms import TRACKED_TERMS, terms_for
from upright.policy_io.schema import (
    EE_DELTA_ACTION_MODE,
    HISTORY_LAYOUT,
    HISTORY_STARTS,
    METADATA_VERSION,
    MLP_ACTION_MODES,
    REEXPORT_HINT,
    REQUIRED_KEYS,
    PolicyMetadataError,
    action_mode_of,
    check_types,
    graph_io,
    read_raw_metadata,
)  # fmt: skip
from upright.policy_io.spec import PolicySpec, dry_run, joint_floats, positive_number


def load_policy_spec(
    path: str | pathlib.Path, robot: RobotConfig | None = None, io_rate_hz: float = 500.0, object_pose: bool = False
) -> PolicySpec:
    """Read and check a policy file's metadata; with ``robot``, also check it against the robot.

    Everything here runs before the daemon opens a port, the operator socket or a dataset, ending with one
    inference of the graph on a zero observation (:func:`~upright.policy_io.spec.dry_run`).

    Args:
        path: the ONNX file.
        robot: check joints, gains and torque limits against its motors (:func:`check_joints_match_robot`,
            :func:`check_plausible`); None: only what needs no robot.
        io_rate_hz: the daemon's loop rate (``upright-deploy run --io-rate``): ``control_dt`` must be a whole
            number of its periods.
        object_pose: the daemon has an object pose source (``--object-pose``): a lift file's cube terms
            (:data:`~upright.policy_io.obs_terms.TRACKED_TERMS`), listed as privileged inputs, are then built from it.

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
    privileged = [str(t) for t in meta["privileged_inputs"]]
    tracked = meta.get("task") == "lift" and all(t in TRACKED_TERMS for t in privileged)
    if privileged and not (tracked and object_pose):
        fix = (
            "give --object-pose udp://HOST:PORT (a cube tracker's pose stream) to supply them"
            if tracked
            else "refusing to run it"
        )
        raise PolicyMetadataError(f"{path}: the policy reads inputs a robot does not provide: {privileged}; {fix}")
    action_mode = action_mode_of(meta, path, MLP_ACTION_MODES)
    order = meta.get("observation_history_order", "oldest_first")
    if order != "oldest_first":
        raise PolicyMetadataError(f"{path}: observation_history_order {order!r} is not supported")
    start = meta.get("observation_history_start", "zeros")
    if start not in HISTORY_STARTS:
        raise PolicyMetadataError(
            f"{path}: observation_history_start {start!r} is not supported (one of {list(HISTORY_STARTS)})"
        )

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
    if (meta.get("task") == "lift") != (action_mode == EE_DELTA_ACTION_MODE):
        raise PolicyMetadataError(
            f"{path}: task {meta.get('task')!r} with action_mode {action_mode!r}: the daemon runs a lift MLP file in "
            "ee_delta mode and ee_delta for the lift task only; re-export it (python -m upright.training.export)"
        )
    terms = terms_for(action_mode)
    num_actions = len(meta.get("ee_action_names", ())) if action_mode == EE_DELTA_ACTION_MODE else n
    for name, dim in zip(names, dims):
        if name not in terms:
            raise PolicyMetadataError(
                f"{path}: observation term '{name}' is unknown to this daemon for task {meta['task']!r} "
                f"(known: {sorted(terms)})"
            )
        expected = num_actions if name == "last_action" else terms[name].width(n)
        if dim != expected:
            raise PolicyMetadataError(f"{path}: observation term '{name}' has dim {dim}, expected {expected}")
    history = int(meta["observation_history_length"])
    if history < 1:
        raise PolicyMetadataError(f"{path}: observation_history_length must be >= 1")

    spec = PolicySpec(
        path=str(path),
        task=str(meta["task"]),
        joint_names=joints,
        kp=joint_floats(meta, "kp", n, path),
        kd=joint_floats(meta, "kd", n, path),
        default_joint_pos=joint_floats(meta, "default_joint_pos", n, path),
        held_joint_names=held,
        held_kp=joint_floats(meta, "held_kp", nh, path) if nh else np.zeros(0),
        held_kd=joint_floats(meta, "held_kd", nh, path) if nh else np.zeros(0),
        held_joint_pos=joint_floats(meta, "held_joint_pos", nh, path) if nh else np.zeros(0),
        action_mode=action_mode,
        action_scale=positive_number("action_scale", meta["action_scale"], path),
        action_clip=positive_number("action_clip", meta.get("action_clip", math.inf), path, allow_inf=True),
        control_dt=positive_number("control_dt", meta["control_dt"], path),
        observation_names=names,
        observation_dims=dims,
        observation_scales=scales,
        history_length=history,
        observation_clip=positive_number(
            "observation_clip", meta.get("observation_clip", math.inf), path, allow_inf=True
        ),
        input_name=str(meta.get("input_name", "obs")),
        output_name=str(meta.get("output_name", "actions")),
        metadata=meta,
    )
    if np.any(spec.kp < 0) or np.any(spec.kd < 0) or np.any(spec.held_kp < 0) or np.any(spec.held_kd < 0):
        raise PolicyMetadataError(f"{path}: negative Kp or Kd")

    inputs, outputs = graph_io(path)
    if spec.input_name not in inputs or spec.output_name not in outputs:
        raise PolicyMetadataError(
            f"{path}: graph has inputs {list(inputs)} and outputs {list(outputs)}, metadata names "
            f"'{spec.input_name}' -> '{spec.output_name}'"
        )
    # a width of -1 (dynamic, or one onnxruntime's shape inference could not settle) is checked by the dry run below
    if inputs[spec.input_name][-1:] not in ([spec.obs_dim], [-1]):
        raise PolicyMetadataError(
            f"{path}: input '{spec.input_name}' has shape {inputs[spec.input_name]}, metadata implies "
            f"{spec.history_length} x {spec.frame_dim} = {spec.obs_dim}"
        )
    if outputs[spec.output_name][-1:] not in ([spec.num_actions], [-1]):
        raise PolicyMetadataError(
            f"{path}: output '{spec.output_name}' has shape {outputs[spec.output_name]}, expected {spec.num_actions} "
            "actions"
        )
    if action_mode == EE_DELTA_ACTION_MODE:  # the chain and the IK settings (the rule is built again by the controller)
        rule = EeDeltaRule(meta, spec.kp, spec.action_scale, str(path))
        if not np.all(np.isfinite(rule.applied(spec.default_joint_pos))):
            raise PolicyMetadataError(
                f"{path}: the HOLD targets (default_joint_pos, gravity-compensated) are not finite"
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
        rows.append(("torque_limit", spec.joint_names, joint_floats(meta, "torque_limit", spec.num_joints, spec.path)))
    if "held_torque_limit" in meta and spec.held_joint_names:
        rows.append(("held_torque_limit", spec.held_joint_names,
                     joint_floats(meta, "held_torque_limit", len(spec.held_joint_names), spec.path)))  # fmt: skip
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
