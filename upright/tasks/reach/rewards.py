"""The reach task's reward terms (one group, ``reach``, summed and scaled by the env step dt), after Isaac Lab's
``Isaac-Reach-Franka-v0`` (``isaaclab_tasks/manager_based/manipulation/reach/reach_env_cfg.py``)."""

from __future__ import annotations

import torch

from upright.managers.reward import RewardGroup, RewardTerm
from upright.tasks.reach.config import ReachRewardsCfg
from upright.tasks.reach.state import ReachState

GROUP = RewardGroup("reach")
"""The one reward group (one critic)."""


def position_error(state: ReachState) -> torch.Tensor:
    """(N,) distance from the gripper site to the target, m."""
    return state.position_error


def position_fine(state: ReachState, std: float = 0.1) -> torch.Tensor:
    """(N,) 1 - tanh(d / std) in [0, 1], 1 at the target."""
    return 1.0 - torch.tanh(state.position_error / std)


def action_rate(state: ReachState) -> torch.Tensor:
    """(N,) ||a_t - a_{t-1}||²."""
    return (state.action - state.last_action).square().sum(dim=-1)


def arm_joint_vel(state: ReachState) -> torch.Tensor:
    """(N,) ||dq||² over the 7 arm joints, (rad/s)²."""
    return state.dq[:, :7].square().sum(dim=-1)


def reach_reward_terms(cfg: ReachRewardsCfg) -> list[RewardTerm]:
    """The terms with the config's weights."""
    return [
        RewardTerm("position_error", position_error, GROUP.name, cfg.position_error),
        RewardTerm("position_fine", position_fine, GROUP.name, cfg.position_fine, {"std": cfg.fine_std}),
        RewardTerm("action_rate", action_rate, GROUP.name, cfg.action_rate),
        RewardTerm("joint_vel", arm_joint_vel, GROUP.name, cfg.joint_vel),
    ]
