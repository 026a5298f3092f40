"""Reward terms of the get-up MDP: one group ``getup``, the SUM of ``weight · dt · term``.

mujocolab/mjlab_playground ``g1-getup`` (``src/mjlab_playground/getup/mdp/rewards.py``, weights and parameters in
``config/g1/env_cfgs.py``), after MuJoCo Playground's ``Go1Getup``. Each function returns the unweighted (N,) value of
a :class:`~upright.tasks.standup.getup.observations.GetupState`.
"""

from __future__ import annotations

import math
import re

import torch

from upright.managers.reward import RewardGroup, RewardTerm
from upright.robots.g1 import POLICY_JOINT_NAMES
from upright.tasks.standup.getup.config import GetupCfg
from upright.tasks.standup.getup.observations import GetupState
from upright.tasks.standup.rewards.regularization import joint_pos_limits

GROUP = RewardGroup("getup")
"""The single reward group (one critic): sum of ``weight · dt · term``."""

POSTURE_SIGMA: tuple[tuple[str, float], ...] = (
    (r".*_hip_(roll|yaw)_joint", 0.08),
    (r".*_hip_pitch_joint", 0.12),
    (r".*_knee_joint", 0.15),
    (r".*_ankle_.*", 0.2),
    (r"(waist_.*|.*_shoulder_.*|.*_elbow_.*|.*_wrist_.*)", 0.5),
)
"""σ of the posture reward per joint (regex, rad; mjlab_playground ``g1-getup`` ``config/g1/env_cfgs.py``): tight hips,
medium knees and ankles, loose waist and arms."""


def posture_sigma(names=POLICY_JOINT_NAMES) -> torch.Tensor:
    """(J,) float32 σ of each joint of ``names`` from :data:`POSTURE_SIGMA` (first match), rad.

    Raises:
        ValueError: a joint matches no pattern.
    """
    out = []
    for name in names:
        sigma = next((s for pattern, s in POSTURE_SIGMA if re.fullmatch(pattern, name)), None)
        if sigma is None:
            raise ValueError(f"posture_sigma: joint '{name}' matches no POSTURE_SIGMA pattern")
        out.append(sigma)
    return torch.tensor(out, dtype=torch.float32)


def torso_orientation(state: GetupState) -> torch.Tensor:
    """exp(-2·|g_torso - (0, 0, -1)|²): 1 upright, e^-8 upside down. (N,)."""
    return torch.exp(-2.0 * state.torso_tilt_error)


def height_reward(height: torch.Tensor, target: float) -> torch.Tensor:
    """(e^min(h, h*) - 1)/(e^h* - 1): 0 at h = 0, 1 at and above h* = ``target`` (m), convex in between. (N,)."""
    return (torch.exp(height.clamp(max=target)) - 1.0) / (math.exp(target) - 1.0)


def torso_height(state: GetupState, target: float) -> torch.Tensor:
    """:func:`height_reward` of the torso_link origin's height above the floor (z = 0). (N,)."""
    return height_reward(state.torso_pos[:, 2], target)


def pelvis_height(state: GetupState, target: float) -> torch.Tensor:
    """:func:`height_reward` of the pelvis's height above the floor (z = 0). (N,)."""
    return height_reward(state.base_pos[:, 2], target)


def gated_posture(state: GetupState, sigma: torch.Tensor, gate: float) -> torch.Tensor:
    """exp(-mean_j((q_j - q0_j)²/σ_j²)) where the torso's tilt error is below ``gate``, else 0. (N,)."""
    err = ((state.q - state.default_q) / sigma.to(state.q.device)).square().mean(dim=1)
    return torch.where(state.torso_tilt_error < gate, torch.exp(-err), torch.zeros_like(err))


def action_rate(state: GetupState) -> torch.Tensor:
    """Σ_j (a_t - a_{t-1})² (dimensionless). (N,)."""
    return (state.action - state.last_action).square().sum(dim=1)


def joint_vel_hinge(state: GetupState, threshold: float) -> torch.Tensor:
    """Σ_j max(|q̇_j| - threshold, 0)², (rad/s)². (N,)."""
    return (state.dq.abs() - threshold).clamp(min=0.0).square().sum(dim=1)


def self_collision(state: GetupState, force: float) -> torch.Tensor:
    """1 where a self-contact pushed harder than ``force`` (N) at the last physics substep, else 0. (N,)."""
    return (state.self_collision_force > force).float()


def getup_reward_terms(cfg: GetupCfg, torso_target: float, pelvis_target: float) -> list[RewardTerm]:
    """The get-up terms with ``cfg.rewards`` weights, all in :data:`GROUP`.

    Args:
        cfg: the MDP's settings.
        torso_target, pelvis_target: heights h* of the torso_link origin and the pelvis standing in the default
            pose, m (:func:`upright.tasks.standup.getup.events.standing_heights`).
    """
    w, g = cfg.rewards, GROUP.name
    return [
        RewardTerm("orientation", torso_orientation, g, w.orientation),
        RewardTerm("torso_height", torso_height, g, w.torso_height, {"target": float(torso_target)}),
        RewardTerm("pelvis_height", pelvis_height, g, w.pelvis_height, {"target": float(pelvis_target)}),
        RewardTerm("posture", gated_posture, g, w.posture, {"sigma": posture_sigma(), "gate": float(cfg.posture_gate)}),
        RewardTerm("action_rate", action_rate, g, w.action_rate),
        RewardTerm(
            "joint_vel_hinge", joint_vel_hinge, g, w.joint_vel_hinge, {"threshold": float(cfg.joint_vel_threshold)}
        ),
        RewardTerm("joint_limits", joint_pos_limits, g, w.joint_limits),
        RewardTerm("self_collision", self_collision, g, w.self_collision, {"force": float(cfg.self_collision_force)}),
    ]
