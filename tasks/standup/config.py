"""Typed configuration of the standup task (ground, supine), HoST defaults.

Sources: HoST spec (``g1_config_ground.py``; Huang et al., RSS 2025). Every field can be overridden
from the command line, e.g. ``python train.py task=standup env.num_envs=256``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from upright.tasks.standup.curriculum import CurriculumCfg


@dataclass
class StandupEnvCfg:
    """Env settings: episode, action, observation, reset randomisation."""

    num_envs: int = 512
    """Parallel envs. HoST uses 4096 on a GPU. On a 2-core CPU the PPO update costs ~3x the env stepping,
    so a smaller batch (512 x 50 steps) gives more policy updates per hour; use 4096 on a GPU."""
    episode_length_s: float = 10.0
    """Episode length, s (500 env steps at 50 Hz)."""
    decimation: int = 4
    """Physics steps per env step: dt 0.005 s x 4 = 0.02 s, a 50 Hz policy."""
    unactuated_steps: int = 30
    """Env steps at the start of each episode with zero action and zero observation (0.6 s)."""
    curriculum: CurriculumCfg = field(default_factory=CurriculumCfg)
    """Pull-force and β curricula (β: p_target = q + β·a). ``env.curriculum.enabled=false`` for play and evaluation."""
    action_clip: float = 100.0
    """Sampled actions are clipped to ±action_clip (HoST ``clip_actions``)."""
    obs_noise: bool = True
    """Add HoST's uniform observation noise (paper Table VIII)."""
    init_height: float = 0.5
    """Pelvis height at reset, m; the robot drops and settles during the unactuated phase."""
    init_joint_scale: tuple[float, float] = (0.9, 1.1)
    """Reset joint angles = default x U(scale) + U(offset), clipped to the joint range."""
    init_joint_offset: tuple[float, float] = (-0.1, 0.1)
    """Reset joint-angle offset range, rad."""
    max_joint_vel: float = 300.0
    """Terminate when any |q̇| exceeds this, rad/s (HoST)."""
    max_base_lin_vel: float = 20.0
    """Terminate when the pelvis speed exceeds this, m/s (HoST)."""


@dataclass
class SimCfg:
    """Physics backend selection."""

    backend: str = "native"
    """Backend name: ``native`` (MuJoCo C, threads; the CPU default) or ``mjx`` (MuJoCo-MJX on JAX; GPUs)."""
    num_threads: int = 0
    """Threads for the native backend; 0 = all CPUs."""
    timestep: float = 0.005
    """Physics dt, s (HoST)."""
