"""The ONNX metadata of a lift policy (:mod:`upright.tasks.policy_schema`): everything needed to run it with nothing
but the file."""

from __future__ import annotations

from typing import Any

from upright.robots import panda
from upright.tasks.lift.observations import (
    HISTORY_LENGTH, OBS_CLIP, OBSERVATION_DIMS, OBSERVATION_TERMS, ROBOT_MEASURABLE_TERMS,
)  # fmt: skip
from upright.tasks.policy_schema import ACTION_FORMULAS, DELTA_ACTION_MODE, HISTORY_LAYOUT


def lift_policy_metadata(env) -> dict[str, Any]:
    """Metadata of a policy for the lift env ``env`` (:class:`~upright.tasks.lift.env.LiftEnv`); per-actuator arrays
    in :data:`upright.robots.panda.ACTUATOR_NAMES` order (7 arm joints, then the finger)."""
    info = panda.panda_info()
    frame = sum(OBSERVATION_DIMS)
    return {
        "task": "lift",
        "robot": "franka_emika_panda",
        "joint_names": list(panda.ARM_JOINT_NAMES) + [panda.FINGER_JOINT_NAMES[0]],
        "kp": info.kp,
        "kd": info.kd,
        "default_joint_pos": info.home_ctrl,
        "torque_limit": info.force_limit,
        "ctrl_lower": info.ctrl_lower,
        "ctrl_upper": info.ctrl_upper,
        "held_joint_names": [],
        "held_kp": [],
        "held_kd": [],
        "held_torque_limit": [],
        "held_joint_pos": [],
        "action_scale": float(env.cfg.action_scale),
        "action_mode": DELTA_ACTION_MODE,
        "action_formula": ACTION_FORMULAS[DELTA_ACTION_MODE] + "; the finger target is one finger's opening in m "
        "(finger_joint2 mirrors it)",
        "action_clip": float(env.cfg.action_clip),
        "control_dt": env.step_dt,
        "sim_dt": env.sim_cfg.timestep,
        "decimation": int(env.cfg.decimation),
        "observation_names": [t.name for t in OBSERVATION_TERMS],
        "observation_dims": list(OBSERVATION_DIMS),
        "observation_scales": [t.scale for t in OBSERVATION_TERMS],
        "observation_descriptions": [_first_line(t.func.__doc__) for t in OBSERVATION_TERMS],
        "observation_noise": [t.noise for t in OBSERVATION_TERMS],
        "observation_history_length": HISTORY_LENGTH,
        "observation_history_order": "oldest_first",
        "history_layout": HISTORY_LAYOUT,
        "observation_frame_dim": frame,
        "observation_dim": HISTORY_LENGTH * frame,
        "observation_clip": OBS_CLIP,
        "unactuated_steps": 0,
        "privileged_inputs": [t.name for t in OBSERVATION_TERMS if t.name not in ROBOT_MEASURABLE_TERMS],
        "training_assistance": (
            "none applied to the robot; the cube and target positions come from the simulator (a real setup needs a "
            "cube tracker for the privileged inputs)"
        ),
        "success_threshold": float(env.cfg.success_threshold),
        "observation_normalizer": "included in the graph",
        "input_name": "obs",
        "output_name": "actions",
    }


def _first_line(doc: str | None) -> str:
    return doc.strip().splitlines()[0] if doc else ""
