"""The ONNX policy metadata schema shared by the exporter (training), the daemon (deploy), play and evaluation.

A policy file stores its contract as ``metadata_props`` entries whose values are JSON strings, enough
to run the policy with nothing but the file (:func:`upright.tasks.registry.policy_metadata` writes them):

- joints: ``joint_names`` (the policy's order of actions and of the per-joint observation terms), ``kp``,
  ``kd`` (N·m/rad, N·m·s/rad), ``torque_limit`` (N·m), ``default_joint_pos`` (rad); the joints the policy
  does not drive, held by PD at fixed targets: ``held_joint_names``, ``held_kp``, ``held_kd``,
  ``held_torque_limit``, ``held_joint_pos``;
- action: ``action_mode``, one of :data:`ACTION_MODES`: ``"relative"`` (HoST) PD target = measured q +
  ``action_scale`` · action, ``"absolute"`` PD target = ``default_joint_pos`` + ``action_scale`` · action (the
  default pose is the offset; no separate key); the lift task's files say ``"delta"`` (PD target = clip(previous
  target + ``action_scale`` · action, limits)) or ``"ee_delta"`` (:data:`ENV_ACTION_MODES`); ``action_formula``
  (the same in words, for people);
  ``action_scale`` (β), ``action_clip``; ``control_dt`` (s), ``decimation`` and ``sim_dt`` (the PD/physics substeps);
- observation: ``observation_names`` in order with ``observation_dims`` (widths), ``observation_scales``,
  ``observation_descriptions`` (units, frames), ``observation_clip``; ``observation_history_length`` H and
  ``history_layout`` = :data:`HISTORY_LAYOUT` (the input is H whole frames, oldest first); the optional
  ``observation_history_start``, one of :data:`HISTORY_STARTS` (what the history holds after a reset);
- episode start: ``unactuated_steps`` (zero action and zero observation frames for that many steps);
- ``privileged_inputs`` (empty: no input a robot cannot measure) and ``training_assistance`` (what training
  applied that the policy does not observe, e.g. the pull force).

Every side imports this module (the standard library only; files are read through onnxruntime by
:mod:`upright.policy_io.onnx_info`, since the robot computer's slim install has no ``onnx`` package); deploy never
imports training.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from upright.policy_io import onnx_info

METADATA_VERSION = "3"
"""Schema version of upright's ONNX metadata (2: history layout, held-joint torque limits, unactuated start,
privileged inputs and observation descriptions added; 3: ``action_mode`` is ``"relative"`` or ``"absolute"``, the
formula moved to ``action_formula``. A schema-2 file always says relative, even when its run trained with
``env.action_mode=absolute``: ``--refresh-metadata`` takes the mode from the run config)."""

ACTION_MODES = ("relative", "absolute")
"""Values of ``action_mode``: how an action a (J,) becomes the PD targets of the policy joints (rad)."""

DELTA_ACTION_MODE = "delta"
"""The lift task's action mode (MuJoCo Playground's manipulation envs): the action moves the previous targets."""

EE_DELTA_ACTION_MODE = "ee_delta"
"""The lift task's Cartesian mode (``env.action_mode=ee_delta``): the action moves the gripper site through
differential IK, and the finger target."""

ENV_ACTION_MODES = (*ACTION_MODES, DELTA_ACTION_MODE, EE_DELTA_ACTION_MODE)
"""Every ``action_mode`` an upright env may write. Simulation (play, evaluation) runs all of them. The deploy daemon
runs :data:`DAEMON_ACTION_MODES`: an MLP policy file (this schema) may be :data:`MLP_ACTION_MODES` (an ``ee_delta``
lift file carries its arm's chain, ``kinematic_chain``, for the IK: :mod:`upright.deploy.ee_action`; its cube inputs
need ``upright-deploy run --object-pose``), and a chunked (VLA) policy :data:`CHUNK_ACTION_MODES`."""

MLP_ACTION_MODES = (*ACTION_MODES, EE_DELTA_ACTION_MODE)
"""The ``action_mode`` values of an MLP policy file the deploy daemon runs."""

CHUNK_ACTION_MODES = (*ACTION_MODES, DELTA_ACTION_MODE)
"""The ``action_mode`` values of a chunked (VLA) policy's contract (:data:`CHUNK_CONTRACT_KEYS`)."""

DAEMON_ACTION_MODES = (*ACTION_MODES, DELTA_ACTION_MODE, EE_DELTA_ACTION_MODE)
"""The action rules the deploy daemon's controller implements (:class:`upright.deploy.controller.Controller`)."""

CHUNK_CONTRACT_KEYS = (
    "joint_names",
    "kp",
    "kd",
    "default_joint_pos",
    "action_mode",
    "action_scale",
    "control_dt",
)
"""What the deploy daemon needs to run a chunked (VLA) policy beside the VLA metadata (:mod:`upright.vla.onnx_policy`):
joints in action order, Kp/Kd, default pose, ``action_mode`` (one of :data:`CHUNK_ACTION_MODES`) and
``action_scale``, ``control_dt`` (s). Optional: ``action_clip`` (default: no clip), ``held_joint_names`` with
``held_kp``, ``held_kd``, ``held_joint_pos`` (default: none), ``task``. A VLA ONNX file carries them as top-level
metadata keys (``python -m upright.vla.train_bc --deploy-contract lift``); any policy can take them from a JSON file
(``upright-deploy run --policy-contract FILE``). Same names and units as the MLP schema above."""

ACTION_FORMULAS = {
    "relative": "p_target = q_measured + action_scale * action, held for one control period",
    "absolute": "p_target = default_joint_pos + action_scale * action, held for one control period",
    "delta": (
        "p_target = clip(p_target_prev + action_scale * clip(action, -action_clip, action_clip), ctrl_lower, "
        "ctrl_upper), p_target starting at default_joint_pos each episode, held for one control period"
    ),
    "ee_delta": (
        "d = ee_action_scale * clip(action[:3], -action_clip, action_clip) (m, world frame), d_z raised to at least "
        "ee_min_height - (site height at p_target_prev) (m; ee_min_height null: no bound), and with ee_max_lead "
        "(m) replaced by the step that keeps the site at p_target within ee_max_lead of the measured site, and with "
        "ee_max_lead_down (m) d_z raised so that the site at p_target is at most ee_max_lead_down below the measured "
        "site; arm p_target = "
        "clip(p_target_prev + dq, ctrl_lower, ctrl_upper) with dq the damped-least-squares IK step that moves the "
        "gripper site by d at p_target_prev while holding its home orientation (upright.tasks.lift.ik); finger "
        "p_target = clip(prev + action_scale * action[3]); p_target starting at default_joint_pos each episode"
    ),
}
"""``action_formula`` of each action mode (written beside ``action_mode``)."""

HISTORY_LAYOUT = "frames_oldest_first"
"""The only history layout: the policy input is ``concat(frame[t-H+1], ..., frame[t])``, whole frames of
``sum(observation_dims)`` values stacked oldest first (not term by term)."""

HISTORY_STARTS = ("zeros", "first_frame")
"""What a policy's history holds after a reset (``observation_history_start``; absent means ``zeros``): ``zeros``
(HoST's env: zero frames, and zero frames pushed while unactuated), or ``first_frame`` (the first frame pushed after
the reset fills every slot, as mjlab's history buffers; the get-up recipe)."""

REQUIRED_KEYS = (
    "upright_metadata_version",
    "task",
    "joint_names",
    "kp",
    "kd",
    "torque_limit",
    "default_joint_pos",
    "held_joint_names",
    "held_kp",
    "held_kd",
    "held_torque_limit",
    "held_joint_pos",
    "action_scale",
    "action_mode",
    "action_clip",
    "control_dt",
    "decimation",
    "sim_dt",
    "observation_names",
    "observation_dims",
    "observation_scales",
    "observation_descriptions",
    "observation_clip",
    "observation_history_length",
    "history_layout",
    "unactuated_steps",
    "privileged_inputs",
    "training_assistance",
    "input_name",
    "output_name",
)
"""Keys every upright policy file carries."""

REEXPORT_HINT = (
    "Re-export it with upright: python -m upright.training.export --checkpoint <run>/model_<it>.pt --out <dir> "
    "(train.py exports policy.onnx at every checkpoint save), or bring this file to the current schema with "
    "python -m upright.training.export --refresh-metadata <policy.onnx> (reads the run config beside it)."
)
"""How to fix a file whose metadata is incomplete (appended to the one-line refusal)."""


class PolicyMetadataError(ValueError):
    """An ONNX file lacks upright metadata, carries invalid metadata, or does not fit the robot/task."""


def action_mode_of(
    meta: dict[str, Any], path: str | pathlib.Path = "<policy>", allowed: tuple[str, ...] = ACTION_MODES
) -> str:
    """The action mode (one of ``allowed``: :data:`ACTION_MODES` on the robot, :data:`ENV_ACTION_MODES` in
    simulation) of decoded metadata ``meta``.

    A file of an older schema (< 3) wrote a formula string starting with ``relative``; it reads as
    ``"relative"`` here, which is only what its exporter could say (see :data:`METADATA_VERSION`).

    Raises:
        PolicyMetadataError: ``action_mode`` is missing or names another mode (one line naming the fix).
    """
    mode = meta.get("action_mode")
    legacy = str(meta.get("upright_metadata_version")) in ("1", "2")
    if legacy and isinstance(mode, str) and mode.startswith("relative"):
        return "relative"
    if mode not in allowed:
        hint = (
            "a delta-mode (manipulation) MLP policy runs in simulation only (play.py, evaluate); the daemon runs "
            "delta for chunked VLA policies (docs/deploy_chunked.md) and ee_delta lift MLP policies"
            if mode in (DELTA_ACTION_MODE, EE_DELTA_ACTION_MODE)
            else "re-export it with python -m upright.training.export --checkpoint <run>/model_<it>.pt --out <dir>"
        )
        raise PolicyMetadataError(
            f"{path}: action_mode {mode!r} is not supported here (only {' or '.join(map(repr, allowed))}); {hint}"
        )
    return str(mode)


def read_metadata(path: str | pathlib.Path) -> dict[str, Any]:
    """Read upright metadata from an ONNX file (values JSON-decoded).

    Raises:
        PolicyMetadataError: missing keys (the message lists them and says how to re-export).
    """
    meta = {k: json.loads(v) for k, v in onnx_info.read(path).metadata.items()}
    missing = [k for k in REQUIRED_KEYS if k not in meta]
    if missing:
        raise PolicyMetadataError(
            f"{path} is not a self-describing upright policy: metadata keys {missing} are missing. {REEXPORT_HINT}"
        )
    return meta


def read_raw_metadata(path: str | pathlib.Path) -> dict[str, Any]:
    """Decode the JSON values of an ONNX file's ``metadata_props``, whatever keys it has (weights are not loaded).

    Raises:
        PolicyMetadataError: no such file, the file cannot be read as ONNX, or a value is not JSON (one line).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise PolicyMetadataError(f"policy file {path} does not exist")
    try:
        props = onnx_info.read(path).metadata
    except (OSError, onnx_info.OnnxFileError) as err:
        raise PolicyMetadataError(
            f"{path}: not a readable ONNX file (onnxruntime: {err}); re-export it with standard ONNX ops "
            "(python -m upright.training.export)"
        ) from err
    try:
        return {k: json.loads(v) for k, v in props.items()}
    except json.JSONDecodeError as err:
        raise PolicyMetadataError(f"{path}: metadata value is not JSON ({err})") from err


def graph_io(path: str | pathlib.Path) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """The declared shapes of an ONNX graph's inputs (initialisers excluded) and outputs, by name; a dimension without
    a fixed size (a named or dynamic one) is -1. Weights are not loaded.

    Raises:
        OSError, ~upright.policy_io.onnx_info.OnnxFileError: a file that cannot be read, or that onnxruntime cannot
            load (read it with :func:`read_raw_metadata` first for a one-line error).
    """
    info = onnx_info.read(path)
    return info.inputs, info.outputs


_STR, _INT, _NUM, _STRS, _INTS, _NUMS = "str", "int", "num", "strs", "ints", "nums"
KEY_TYPES: dict[str, str] = {
    "upright_metadata_version": _STR, "task": _STR,
    "joint_names": _STRS, "kp": _NUMS, "kd": _NUMS, "torque_limit": _NUMS, "default_joint_pos": _NUMS,
    "held_joint_names": _STRS, "held_kp": _NUMS, "held_kd": _NUMS, "held_torque_limit": _NUMS, "held_joint_pos": _NUMS,
    "armature": _NUMS, "held_armature": _NUMS,
    "action_scale": _NUM, "action_mode": _STR, "action_clip": _NUM, "control_dt": _NUM, "decimation": _INT,
    "sim_dt": _NUM, "observation_names": _STRS, "observation_dims": _INTS, "observation_scales": _NUMS,
    "observation_descriptions": _STRS, "observation_clip": _NUM, "observation_history_length": _INT,
    "observation_history_order": _STR, "observation_history_start": _STR, "history_layout": _STR,
    "unactuated_steps": _INT, "privileged_inputs": _STRS,
    "training_assistance": _STR, "input_name": _STR, "output_name": _STR,
}  # fmt: skip
"""The JSON type of each key the daemon reads or checks (every required key, and the optional
``observation_history_order``, ``observation_history_start`` and, for a simulator, ``armature`` and ``held_armature``,
kg·m²):
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
