"""Settings of the get-up MDP (``env.getup.*``; active when ``env.mdp=getup``, which ``recipe=getup`` sets).

Defaults follow mujocolab/mjlab_playground, branch ``g1-getup`` (``src/mjlab_playground/getup/getup_env_cfg.py`` and
``config/g1/env_cfgs.py``) unless a field says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GetupRewardWeights:
    """Weights of the get-up reward terms (one group, each addend x the env step dt; mjlab_playground ``g1-getup``)."""

    orientation: float = 1.0
    """Torso uprightness exp(-2·|g_torso - (0, 0, -1)|²)."""
    torso_height: float = 1.0
    """(e^min(h, h*) - 1)/(e^h* - 1) of the torso_link origin's height h, h* its height standing."""
    pelvis_height: float = 1.0
    """The same for the pelvis ("prevents the sitting local minimum", mjlab_playground G1 config)."""
    posture: float = 1.0
    """exp(-mean((q - q0)²/σ²)), counted only while the torso is upright (:attr:`GetupCfg.posture_gate`)."""
    action_rate: float = -0.01
    """Σ (a_t - a_{t-1})²."""
    joint_vel_hinge: float = -0.1
    """Σ max(|q̇| - :attr:`GetupCfg.joint_vel_threshold`, 0)²."""
    joint_limits: float = -1.0
    """Σ of the amount (rad) by which q lies outside the soft limits (0.9 x each URDF bound, HoST)."""
    self_collision: float = -0.1
    """1 when a self-contact pushes harder than :attr:`GetupCfg.self_collision_force` at the env step's last
    physics substep (mjlab counts the substeps of the step with one, 0..4)."""


@dataclass
class GetupCfg:
    """The get-up MDP's resets, action gains, observation noise and rewards."""

    stand_fraction: float = 0.4
    """Fraction of training resets standing in the default pose (pelvis at its standing height + 2 cm), acting at
    once (no settle)."""
    fall_fraction: float = 0.6
    """Fraction of training resets dropped from :attr:`fall_height` with a uniformly random orientation, joints and
    velocities drawn as below, then a settle of ``env.unactuated_steps``. The remaining 1 - stand - fall start from
    the terrain's HoST posture (``posture=supine|prone``); evaluation uses only those."""
    fall_height: float = 0.8
    """Pelvis height of a dropped start, m."""
    fall_joint_fraction: float = 0.45
    """Dropped starts draw each joint uniformly over this central fraction of its range (mjlab_playground: half of
    the 0.9 soft range, 0.45 of the range, about its centre)."""
    fall_velocity: float = 0.5
    """Dropped starts draw each root linear/angular velocity component (world frame; m/s, rad/s) and each joint
    velocity (rad/s) from U(-v, v)."""
    natural_freq_hz: float = 5.0
    """Natural frequency of each policy joint's PD loop on its motor's reflected inertia, Hz: Kp = I·ω², Kd = 2ζIω
    (mjlab_playground ``g1-getup``: 5 Hz; mjlab's G1 default is 10 Hz)."""
    damping_ratio: float = 2.0
    """Damping ratio ζ of the PD loops (mjlab_playground ``g1-getup``)."""
    encoder_bias: float = 0.015
    """Half-width of a constant per-joint, per-env encoder offset drawn at creation, rad; it enters the actor's
    joint-position observation (a relative action is unaffected by it on the robot and in simulation)."""
    posture_gate: float = 0.01
    """The posture reward counts while |g_torso - (0, 0, -1)|² is below this (a tilt under 5.7°)."""
    joint_vel_threshold: float = 2.0
    """Hinge of the joint-velocity penalty, rad/s."""
    self_collision_force: float = 10.0
    """A self-contact counts when its force exceeds this, N (mjlab's velocity task ``self_collision_cost``)."""
    actor_history: int = 1
    """Frames of the actor's observation, stacked oldest first (1: the current frame, mjlab_playground). After a reset
    the first frame fills every slot, so a start acts on a full history (HoST's G1 policy reads 6 frames,
    ``num_actor_history``; its ablation, Table III of the paper, loses most on the wall with one). The critic reads one
    frame."""
    fall_termination: bool = False
    """End an episode when its pelvis falls below 0.5 m after passing 0.7 m (HoST's ground failure;
    :func:`~upright.tasks.standup.getup.terminations.fell_after_rise`). Off: no fall ends an episode, only the time-out
    or a diverged simulation (mjlab_playground). Training only: evaluation runs the protocol without it."""
    success_tilt: float = 0.05
    """Training metric ``Metrics/stood``: torso tilt error |g_torso - (0, 0, -1)|² below this (12.8°) with the
    pelvis within 2 cm of its standing height, at any step of the episode (mjlab_playground ``getup_success``)."""
    rewards: GetupRewardWeights = field(default_factory=GetupRewardWeights)
    """Reward weights."""


def validate_getup(cfg: GetupCfg, terrain: str, prefix: str = "env.getup") -> None:
    """Check the get-up settings.

    Raises:
        ValueError: a fraction outside [0, 1] or summing above 1, a non-positive gain setting, an actor history
            below one frame, or a terrain other than ground (the message names the key and the fix).
    """
    for key in ("stand_fraction", "fall_fraction", "fall_joint_fraction"):
        value = float(getattr(cfg, key))
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{prefix}.{key} must lie in [0, 1], got {value}")
    if cfg.stand_fraction + cfg.fall_fraction > 1.0 + 1e-9:
        raise ValueError(
            f"{prefix}.stand_fraction + {prefix}.fall_fraction must be <= 1, got "
            f"{cfg.stand_fraction} + {cfg.fall_fraction}; lower one of them"
        )
    if int(cfg.actor_history) < 1 or int(cfg.actor_history) != cfg.actor_history:
        raise ValueError(f"{prefix}.actor_history must be an integer >= 1 (frames), got {cfg.actor_history}")
    for key in ("natural_freq_hz", "damping_ratio", "fall_height"):
        if float(getattr(cfg, key)) <= 0:
            raise ValueError(f"{prefix}.{key} must be > 0, got {getattr(cfg, key)}")
    if terrain != "ground":
        raise ValueError(
            f"terrain={terrain}: recipe=getup (env.mdp=getup, the get-up MDP) is written for flat ground "
            f"(terrain=ground); use recipe=host terrain={terrain} (HoST's terrains), or drop terrain={terrain}."
        )


def use_protocol_episodes(cfg) -> None:
    """Set ``cfg`` (the ``env.getup`` settings, a dataclass or DictConfig) to the episodes of HoST's evaluation
    protocol, which evaluation and play run: every episode starts from the terrain's posture (no standing or dropped
    starts) and ends only at its time-out (no :attr:`GetupCfg.fall_termination`, a training device)."""
    cfg.stand_fraction = cfg.fall_fraction = 0.0
    cfg.fall_termination = False
