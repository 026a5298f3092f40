"""The ONNX metadata of a lift policy (:mod:`upright.policy_io.schema`): everything needed to run it with nothing
but the file."""

from __future__ import annotations

from typing import Any

from upright.policy_io.schema import ACTION_FORMULAS
from upright.robots import panda
from upright.tasks.lift.observations import (
    HISTORY_LENGTH,
    OBS_CLIP,
    ROBOT_MEASURABLE_TERMS,
)
from upright.tasks.metadata import POLICY_IO, observation_metadata


def lift_deploy_contract(
    action_scale: float | None = None, action_clip: float | None = None, control_dt: float | None = None
) -> dict[str, Any]:
    """What the deploy daemon needs to run a chunked lift policy in the ``delta`` action mode
    (:data:`upright.policy_io.schema.CHUNK_CONTRACT_KEYS`): the 8 actuated Panda joints (7 arm joints, then
    ``finger_joint1``), Kp/Kd and the home targets of :mod:`upright.robots.panda`, and the lift env's action rule.

    Args:
        action_scale, action_clip: β and the clip of the rule (default:
            :class:`~upright.tasks.lift.config.LiftEnvCfg`'s, 0.04 and 1).
        control_dt: s per action (default: the env's decimation x the physics step, 4 x 0.005 = 0.02 s).
    """
    from upright.tasks.lift.config import LiftEnvCfg
    from upright.tasks.standup.config import SimCfg  # the physics settings every task trains with

    cfg = LiftEnvCfg()
    info = panda.panda_info()
    return {
        "joint_names": list(panda.ARM_JOINT_NAMES) + [panda.FINGER_JOINT_NAMES[0]],
        "kp": info.kp.tolist(),
        "kd": info.kd.tolist(),
        "default_joint_pos": info.home_ctrl.tolist(),
        "action_mode": "delta",
        "action_scale": float(cfg.action_scale if action_scale is None else action_scale),
        "action_clip": float(cfg.action_clip if action_clip is None else action_clip),
        "control_dt": float(cfg.decimation * SimCfg().timestep if control_dt is None else control_dt),
        "task": "lift",
    }


def panda_joint_metadata() -> dict[str, Any]:
    """The per-joint keys of a Panda policy: the 8 actuated joints (7 arm joints, then ``finger_joint1``) with their
    Kp/Kd, home targets, force limits and control ranges (:mod:`upright.robots.panda`); no held joints."""
    info = panda.panda_info()
    return {
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
    }


def lift_policy_metadata(env) -> dict[str, Any]:
    """Metadata of a policy for the lift env ``env`` (:class:`~upright.tasks.lift.env.LiftEnv`); per-actuator arrays
    in :data:`upright.robots.panda.ACTUATOR_NAMES` order (7 arm joints, then the finger). With
    ``env.action_mode=ee_delta`` the file also names the IK's site, step scale and settings (``ee_*``, ``ik_*``)."""
    mode = str(env.cfg.action_mode)
    ee = {}
    if mode == "ee_delta":
        from upright.tasks.lift import ik

        ee = {
            "ee_action_scale": float(env.cfg.ee_action_scale),
            "ee_site": panda.GRIPPER_SITE,
            "ee_action_names": ["site_dx", "site_dy", "site_dz", "finger"],
            "ik_damping": ik.IK_DAMPING,
            "ik_rotation_weights": list(ik.IK_ROTATION_WEIGHTS),
            "ik_null_gain": ik.IK_NULL_GAIN,
            "ee_min_height": None if env.cfg.ee_min_height is None else float(env.cfg.ee_min_height),
            "ee_gravity_compensation": bool(env.cfg.ee_gravity_compensation),
            "ee_max_lead": None if env.cfg.ee_max_lead is None else float(env.cfg.ee_max_lead),
            "ee_max_lead_down": None if env.cfg.ee_max_lead_down is None else float(env.cfg.ee_max_lead_down),
            "ee_observe_lead": bool(env.cfg.ee_observe_lead),
            # the arm's chain, so that the daemon computes the IK and the gravity compensation without MuJoCo
            # (upright.policy_io.kinematics; q = the 9 Panda joints, 7 arm hinges then the 2 finger slides)
            "kinematic_chain": ik.chain_from_model(env.model).to_metadata(),
            "ik_home_joint_pos": [float(v) for v in panda.HOME_QPOS[:7]],
        }
    return {
        "task": "lift",
        **panda_joint_metadata(),
        "action_scale": float(env.cfg.action_scale),
        "action_mode": mode,
        "action_formula": ACTION_FORMULAS[mode] + "; the finger target is one finger's opening in m "
        "(finger_joint2 mirrors it)",
        **ee,
        "action_clip": float(env.cfg.action_clip),
        "control_dt": env.step_dt,
        "sim_dt": env.sim_cfg.timestep,
        "decimation": int(env.cfg.decimation),
        **observation_metadata(
            env.observation_terms, env.observation_dims, HISTORY_LENGTH, OBS_CLIP, ROBOT_MEASURABLE_TERMS
        ),
        "unactuated_steps": 0,
        "training_assistance": (
            "none applied to the robot; the cube and target positions come from the simulator (a real setup needs a "
            "cube tracker for the privileged inputs)"
        ),
        "success_threshold": float(env.cfg.success_threshold),
        **POLICY_IO,
    }
