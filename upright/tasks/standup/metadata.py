"""The ONNX metadata of a standup-task policy (:mod:`upright.policy_io.schema`): HoST's MDP
(:func:`policy_metadata`) and the get-up recipe's (:func:`getup_policy_metadata`), each everything needed to run the
policy with nothing but the file."""

from __future__ import annotations

from typing import Any

from upright.policy_io.schema import ACTION_FORMULAS
from upright.robots import g1
from upright.tasks.metadata import POLICY_IO, observation_metadata

ROBOT_MEASURABLE_TERMS: dict[str, str] = {
    "base_ang_vel": "pelvis IMU gyro",
    "projected_gravity": "pelvis IMU orientation",
    "joint_pos": "joint encoders",
    "joint_vel": "joint encoders",
    "last_action": "the policy's own previous output",
    "action_scale": "the constant action_scale of the metadata",
}
"""Observation terms a robot provides, and from what. Any other term of the actor's observation is listed in
the metadata's ``privileged_inputs`` (and the daemon refuses the file)."""


def policy_metadata(env) -> dict[str, Any]:
    """ONNX metadata describing how to run a policy of the standup task (``env.mdp=host`` or ``getup``) with nothing
    but the file.

    The keys and their meaning are listed in :mod:`upright.policy_io.schema` (every key of
    :data:`~upright.policy_io.schema.REQUIRED_KEYS` is present); :mod:`upright.training.onnx_export`
    writes them as JSON strings. Per-joint arrays are float64 (J,) in ``joint_names`` order. ``action_mode`` is
    the env's ``env.action_mode``; in ``absolute`` mode the action's offset is ``default_joint_pos``, the env's
    default pose of the policy joints (``env.default_pose``, from :func:`upright.robots.g1.robot_info`).
    """
    if str(getattr(env.cfg, "mdp", "host")) == "getup":
        return getup_policy_metadata(env)
    from upright.tasks.standup import observations  # read at call time (a test adds a term to OBSERVATION_TERMS)

    h, dims = observations.HISTORY_LENGTH, observations.observation_dims(env.num_actions)
    obs = observation_metadata(observations.OBSERVATION_TERMS, dims, h, observations.OBS_CLIP, ROBOT_MEASURABLE_TERMS)
    return {
        "task": "standup",
        "terrain": str(env.cfg.terrain),
        "posture": str(env.cfg.posture),
        **_joint_metadata(env),
        "action_scale": float(env.beta.mean()),
        "action_mode": str(env.cfg.action_mode),
        "action_formula": ACTION_FORMULAS[str(env.cfg.action_mode)],
        "action_clip": env.cfg.action_clip,
        "control_dt": env.step_dt,
        "sim_dt": env.sim_cfg.timestep,
        "decimation": env.cfg.decimation,
        **obs,
        "history_layout_description": (
            f"input = concat(frame[t-{h - 1}], ..., frame[t]): {h} whole frames of "
            f"{sum(dims)} values, oldest first; frame = concat over observation_names of scale * term, "
            "clipped to +-observation_clip"
        ),
        "unactuated_steps": int(env.cfg.unactuated_steps),
        "unactuated_start": (
            "for the first unactuated_steps control steps of an episode the action is 0 (PD target = measured q) "
            "and the frames pushed into the history are zeros; the first policy action is computed at step "
            "unactuated_steps from H-1 zero frames and the current frame, with last_action = 0"
        ),
        "training_assistance": (
            "training applied an upward pull force on the torso (pull-force curriculum) that the policy does not "
            "observe; run it without any such force. No privileged or simulator-only input is in the observation"
        ),
        **POLICY_IO,
    }


def _joint_metadata(env) -> dict[str, Any]:
    """The per-joint keys of a standup-task policy (policy and held joints; gains of the env's model)."""
    info = env.robot
    pol, held = info.policy_joint_ids, info.held_joint_ids
    return {
        "robot": "unitree_g1_29dof",
        "joint_names": list(info.policy_joint_names),
        "kp": info.kp[pol],
        "kd": info.kd[pol],
        "default_joint_pos": info.default_pose[pol],
        "torque_limit": info.torque_limit[pol],
        "held_joint_names": list(g1.HELD_JOINT_NAMES),
        "held_kp": info.kp[held],
        "held_kd": info.kd[held],
        "held_torque_limit": info.torque_limit[held],
        "held_joint_pos": info.default_pose[held],
        "armature": info.armature[pol],
        "held_armature": info.armature[held],
        "armature_source": (
            "kg*m^2 per joint: the reflected rotor inertia of the motor(s) driving it through their two-stage "
            "planetary gearbox (rotor inertias and gear ratios from Unitree, as in mujocolab/mjlab "
            "src/mjlab/asset_zoo/robots/unitree_g1/g1_constants.py); a simulator needs it: the gains are stiff for "
            "the bare links"
        ),
    }


def getup_policy_metadata(env) -> dict[str, Any]:
    """ONNX metadata of a ``recipe=getup`` (``env.mdp=getup``) policy: ``env.getup.actor_history`` observation frames of
    :data:`upright.tasks.standup.getup.observations.ACTOR_TERMS` (oldest first, the first frame after a reset filling
    every slot: ``observation_history_start = first_frame``), relative actions with the env's fixed β, the
    reflected-inertia gains (:mod:`upright.tasks.standup.getup.actions`) and the settle after a drop."""
    from upright.tasks.standup.getup import observations as gobs

    g = env.cfg.getup
    h, dims = int(g.actor_history), gobs.observation_dims(env.num_actions)
    obs = observation_metadata(gobs.ACTOR_TERMS, dims, h, gobs.OBS_CLIP, gobs.ACTOR_SENSORS)
    return {
        "task": "standup",
        "mdp": "getup",
        "terrain": str(env.cfg.terrain),
        "posture": str(env.cfg.posture),
        **_joint_metadata(env),
        "gains_source": (
            f"policy joints: Kp = I*w^2, Kd = 2*zeta*I*w with I the motor's reflected rotor inertia (joint armature), "
            f"w = 2*pi*{float(g.natural_freq_hz)} Hz, zeta = {float(g.damping_ratio)}; held joints: HoST's gains"
        ),
        "getup_natural_freq_hz": float(g.natural_freq_hz),
        "getup_damping_ratio": float(g.damping_ratio),
        "action_scale": float(env.beta.mean()),
        "action_mode": "relative",
        "action_formula": ACTION_FORMULAS["relative"],
        "action_clip": env.cfg.action_clip,
        "control_dt": env.step_dt,
        "sim_dt": env.sim_cfg.timestep,
        "decimation": env.cfg.decimation,
        **obs,
        "history_layout_description": (
            f"input = concat(frame[t-{h - 1}], ..., frame[t]): {h} whole frames of {sum(dims)} values, oldest first; "
            "frame = concat over observation_names of scale * term, clipped to +-observation_clip"
            if h > 1
            else f"input = one frame of {sum(dims)} values: concat over observation_names of scale * term, clipped to "
            "+-observation_clip"
        ),
        "observation_history_start": "first_frame",
        "unactuated_steps": int(env.cfg.unactuated_steps),
        "unactuated_start": (
            "settle: after a start from lying or falling, for the first unactuated_steps control steps the PD target "
            "is the measured q (the action is ignored, last_action is 0); observations are real frames throughout, "
            "and the first frame after a reset fills every history slot. A start standing in the default pose acts "
            "at once"
        ),
        "training_assistance": "none: no pull force or other external help in training",
        **POLICY_IO,
    }
