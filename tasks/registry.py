"""Task registry: task name -> env factory and ONNX metadata builder."""

from __future__ import annotations

from typing import Any

from upright.robots import g1
from upright.tasks.standup.config import SimCfg, StandupEnvCfg


def make_env(task_name: str, env_cfg: StandupEnvCfg, sim_cfg: SimCfg, device: str, seed: int):
    """Build the env of ``task_name``.

    Raises:
        ValueError: unknown task (the message lists the valid ones).
    """
    if task_name == "standup":
        from upright.tasks.standup.env import StandupEnv

        return StandupEnv(env_cfg, sim_cfg, device=device, seed=seed)
    raise ValueError(f"Unknown task '{task_name}'. Valid tasks: standup")


def policy_metadata(task_name: str, env) -> dict[str, Any]:
    """ONNX metadata describing how to run a policy of ``task_name`` on the robot (see :mod:`upright.training.onnx_export`)."""
    from upright.tasks.standup.observations import HISTORY_LENGTH, OBS_CLIP, OBSERVATION_TERMS, observation_dims

    info = env.robot
    pol, held = info.policy_joint_ids, info.held_joint_ids
    return {
        "task": task_name,
        "terrain": str(env.cfg.terrain),
        "posture": str(env.cfg.posture),
        "robot": "unitree_g1_29dof",
        "joint_names": list(info.policy_joint_names),
        "kp": info.kp[pol],
        "kd": info.kd[pol],
        "default_joint_pos": info.default_pose[pol],
        "torque_limit": info.torque_limit[pol],
        "held_joint_names": list(g1.HELD_JOINT_NAMES),
        "held_kp": info.kp[held],
        "held_kd": info.kd[held],
        "held_joint_pos": info.default_pose[held],
        "action_scale": float(env.beta.mean()),
        "action_mode": "relative: p_target = q_measured + action_scale * action, held for one control period",
        "action_clip": env.cfg.action_clip,
        "control_dt": env.step_dt,
        "sim_dt": env.sim_cfg.timestep,
        "decimation": env.cfg.decimation,
        "observation_names": [t.name for t in OBSERVATION_TERMS],
        "observation_dims": observation_dims(env.num_actions),
        "observation_scales": [t.scale for t in OBSERVATION_TERMS],
        "observation_noise": [t.noise for t in OBSERVATION_TERMS],
        "observation_history_length": HISTORY_LENGTH,
        "observation_history_order": "oldest_first",
        "observation_clip": OBS_CLIP,
        "observation_normalizer": "included in the graph",
        "input_name": "obs",
        "output_name": "actions",
    }
