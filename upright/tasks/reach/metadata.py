"""The ONNX metadata of a reach policy (:mod:`upright.policy_io.schema`): everything needed to run it with nothing but
the file, and the target it was trained to reach."""

from __future__ import annotations

from typing import Any

from upright.policy_io.schema import ACTION_FORMULAS
from upright.tasks.lift.metadata import panda_joint_metadata
from upright.tasks.metadata import POLICY_IO, observation_metadata
from upright.tasks.reach.observations import OBS_CLIP, ROBOT_MEASURABLE_TERMS


def reach_policy_metadata(env) -> dict[str, Any]:
    """Metadata of a policy for the reach env ``env`` (:class:`~upright.tasks.reach.env.ReachEnv`); per-actuator
    arrays in :data:`upright.robots.panda.ACTUATOR_NAMES` order (7 arm joints, then the finger)."""
    return {
        "task": "reach",
        **panda_joint_metadata(),
        "action_scale": float(env.cfg.action_scale),
        "action_mode": "delta",
        "action_formula": ACTION_FORMULAS["delta"] + "; the finger target is one finger's opening in m",
        "action_clip": float(env.cfg.action_clip),
        "control_dt": env.step_dt,
        "sim_dt": env.sim_cfg.timestep,
        "decimation": int(env.cfg.decimation),
        **observation_metadata(env.observation_terms, env.observation_dims, 1, OBS_CLIP, ROBOT_MEASURABLE_TERMS),
        "unactuated_steps": 0,
        "training_assistance": "none",
        "target_box": {"x": list(env.cfg.target_x), "y": list(env.cfg.target_y), "z": list(env.cfg.target_z)},
        "success_threshold": float(env.cfg.success_threshold),
        **POLICY_IO,
    }
