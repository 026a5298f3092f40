"""The record layout of upright's datasets, shared by every writer of them (the daemon's logger,
:mod:`upright.deploy`; demonstration recording, :mod:`upright.training.record_demos`; takeovers in simulation,
:mod:`upright.vla.sim_operator`): the frame features (:func:`frame_features`), the codes the ``control_source`` and
``safety_flags`` columns hold (:class:`ControlSource`, :class:`SafetyFlag`, :data:`FAULT_FLAGS`) and the upright
keys of ``info.json`` that name them (:func:`extra_info`), and the episode outcome codes (:data:`OUTCOMES`).
Standard library only (the daemon's modules import it without pyarrow).
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

OUTCOMES = ("open", "success", "failure", "estop", "damping", "stopped", "interrupted")
"""Episode outcome codes of the dataset's ``outcome`` column and the logger's episode-end records (index = code)."""


class ControlSource(IntEnum):
    """Who commanded a logged frame (the dataset's ``control_source`` codes)."""

    POLICY = 0
    HUMAN = 1
    PAUSED = 2
    DAMPING = 3
    ESTOP = 4


class SafetyFlag(IntFlag):
    """Bits of the logged ``safety_flags``."""

    NONE = 0
    MOTOR_TIMEOUT = 1 << 0
    """A motor reply timed out this tick."""
    MOTOR_CRC = 1 << 1
    """A motor reply had a bad CRC / header / id this tick."""
    LINK_FAULT = 1 << 2
    """A motor missed N replies in a row, or its last good reply is too old."""
    IMU_STALE = 1 << 3
    """The IMU sequence stopped advancing (or its replies stopped) for too long."""
    NONFINITE_OBS = 1 << 4
    NONFINITE_ACTION = 1 << 5
    TARGET_LIMIT_CLAMPED = 1 << 6
    DELTA_CLAMPED = 1 << 7
    TORQUE_CLAMPED = 1 << 8
    TILT = 1 << 9
    OVERTEMP_WARN = 1 << 10
    OVERTEMP = 1 << 11
    MOTOR_ERROR = 1 << 12
    DEADLINE_OVERRUN = 1 << 13
    OVERRUN_FAULT = 1 << 14
    """K policy ticks in a row overran their deadline."""
    RAMPING = 1 << 15
    """POLICY was entered recently: targets blend from the measured pose."""
    LOGGER_DROP = 1 << 16
    """A frame could not be handed to the logger (its pipe was full)."""
    WATCHDOG = 1 << 17
    IMU_TIMEOUT = 1 << 18
    IMU_CRC = 1 << 19
    EXCEPTION = 1 << 20
    """The loop raised (policy, robot link, ...), or a chunked policy's inference worker failed: damping."""
    STALE_ACTION = 1 << 21
    """A chunked policy had no fresh action for this tick (queue empty, or its chunk older than
    ``max_chunk_age_s``): the policy joints held their targets."""
    STALE_FAULT = 1 << 22
    """``max_consecutive_stale`` POLICY ticks in a row had no fresh action: damping."""
    CAMERA_STALE = 1 << 23
    """A chunked policy's camera frame was missing or older than ``max_frame_age_s`` when a chunk was due: none was
    requested this tick (queued actions still run; an empty queue then raises ``STALE_ACTION``)."""
    OBJECT_STALE = 1 << 24
    """A lift policy's object pose (``--object-pose``) was missing or older than its maximum age at a policy tick: the
    policy was not called and POLICY held its targets (``max_consecutive_stale`` such ticks in a row fault with
    ``STALE_FAULT``)."""


FAULT_FLAGS = (
    SafetyFlag.LINK_FAULT
    | SafetyFlag.IMU_STALE
    | SafetyFlag.NONFINITE_OBS
    | SafetyFlag.NONFINITE_ACTION
    | SafetyFlag.TILT
    | SafetyFlag.OVERTEMP
    | SafetyFlag.MOTOR_ERROR
    | SafetyFlag.OVERRUN_FAULT
    | SafetyFlag.WATCHDOG
    | SafetyFlag.EXCEPTION
    | SafetyFlag.STALE_FAULT
)
"""Flags that send the robot to DAMPING."""


def frame_features(
    joint_names: tuple[str, ...],
    frame_names: list[str],
    images: dict[str, tuple[int, int]] | None = None,
    action_names: tuple[str, ...] | None = None,
) -> dict[str, dict]:
    """The dataset's explicit features for a policy with ``joint_names`` and observation-frame entries ``frame_names``;
    ``images``: camera name -> (H, W) px adds ``observation.images.<name>`` (dtype ``image``, shape [H, W, 3], as
    ``record_demos --cameras`` writes them); ``action_names``: the entries of ``action`` and
    ``observation.policy_action`` when the action is not one per joint (an ``ee_delta`` policy's site dx, dy, dz and
    finger; default: the joints)."""
    j = list(joint_names)
    act = list(action_names) if action_names is not None else j
    f32 = lambda names: {"dtype": "float32", "shape": [len(names)], "names": list(names)}  # noqa: E731
    scalar = lambda dtype: {"dtype": dtype, "shape": [1], "names": None}  # noqa: E731
    state_names = [f"q.{n}" for n in j] + [f"dq.{n}" for n in j]
    state_names += [f"gyro.{a}" for a in "xyz"] + [f"gravity.{a}" for a in "xyz"]
    features = {
        "observation.state": f32(state_names),
        "observation.policy_obs": f32(frame_names),
        "observation.policy_action": f32(act),
        "action": f32(act),
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
