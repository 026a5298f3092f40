"""The logger's record layout, shared by the daemon's client and the logger process: the dataset's features,
the fixed-size pipe record and the upright keys of info.json (see :mod:`upright.deploy.logger_process`).
"""

from __future__ import annotations

import select

import numpy as np

from upright.dataset_io.lerobot import OUTCOMES
from upright.deploy.safety import FAULT_FLAGS, SafetyFlag
from upright.deploy.state_machine import ControlSource

KIND_FRAME, KIND_EPISODE_END, KIND_CLOSE = 0, 1, 2
REASON_BYTES = 240
"""Longest episode-end reason carried in a record (UTF-8, truncated)."""


def frame_features(
    joint_names: tuple[str, ...], frame_names: list[str], images: dict[str, tuple[int, int]] | None = None
) -> dict[str, dict]:
    """The dataset's explicit features for a policy with ``joint_names`` and observation-frame entries ``frame_names``;
    ``images``: camera name -> (H, W) px adds ``observation.images.<name>`` (dtype ``image``, shape [H, W, 3], as
    ``record_demos --cameras`` writes them)."""
    j = list(joint_names)
    f32 = lambda names: {"dtype": "float32", "shape": [len(names)], "names": list(names)}  # noqa: E731
    scalar = lambda dtype: {"dtype": dtype, "shape": [1], "names": None}  # noqa: E731
    state_names = [f"q.{n}" for n in j] + [f"dq.{n}" for n in j]
    state_names += [f"gyro.{a}" for a in "xyz"] + [f"gravity.{a}" for a in "xyz"]
    features = {
        "observation.state": f32(state_names),
        "observation.policy_obs": f32(frame_names),
        "observation.policy_action": f32(j),
        "action": f32(j),
        "action.joint_target": f32(j),
        "intervention": scalar("bool"),
        "control_source": scalar("int64"),
        "safety_flags": scalar("int64"),
        "t_mono_ns": scalar("int64"),
        "imu_time_us": scalar("int64"),
        "loop_lateness_us": scalar("float32"),
        "next.reward": scalar("float32"),
        "next.done": scalar("bool"),
    }
    for cam, (h, w) in (images or {}).items():
        features[f"observation.images.{cam}"] = {
            "dtype": "image",
            "shape": [int(h), int(w), 3],
            "names": ["height", "width", "channel"],
        }
    return features


def image_features(features: dict[str, dict]) -> dict[str, tuple[int, int]]:
    """Feature name -> (H, W) of the image features (they travel through the image ring, not the pipe)."""
    return {n: (int(f["shape"][0]), int(f["shape"][1])) for n, f in features.items() if f["dtype"] == "image"}


_NP = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}


def record_dtype(features: dict[str, dict]) -> np.dtype:
    """Fixed-size pipe record: header fields (``reason`` is used by episode-end records), then one field per feature.

    Raises:
        ValueError: the record would not fit one atomic pipe write (PIPE_BUF).
    """
    fields = [
        ("kind", np.uint8),
        ("outcome", np.uint8),
        ("episode", np.int64),
        ("frame_index", np.int64),
        ("image_stamp", np.int64),
        ("reason", f"S{REASON_BYTES}"),
    ]
    for name, f in features.items():
        if f["dtype"] == "image":  # through the image ring
            continue
        shape = tuple(f["shape"])
        fields.append((name, _NP[f["dtype"]], shape) if shape != (1,) else (name, _NP[f["dtype"]]))
    dt = np.dtype(fields)
    if dt.itemsize > select.PIPE_BUF:
        raise ValueError(f"a frame record is {dt.itemsize} bytes, more than PIPE_BUF ({select.PIPE_BUF})")
    return dt


def extra_info(task: str, policy: str) -> dict:
    """upright keys added to info.json: the codes of control_source, safety_flags and outcomes."""
    return {
        "upright": {
            "task": task,
            "policy": policy,
            "control_source_codes": {s.name.lower(): int(s) for s in ControlSource},
            "safety_flag_bits": {f.name: int(f) for f in SafetyFlag if f.value},
            "episode_outcomes": list(OUTCOMES),
            "fault_flags": int(FAULT_FLAGS),
            "notes": "action = executed action in policy units, the policy file's action rule inverted "
            "((target - q) / action_scale for action_mode relative, (target - default_joint_pos) / action_scale "
            "for absolute, (target - previous target) / action_scale for delta); "
            "observation.policy_action = the policy's proposal; intervention = control_source == human; "
            "a fault (safety_flags & fault_flags) ends its episode on that frame, the episode's "
            "upright/reason says why",
        }
    }
