"""Typed configuration of the standup task, HoST defaults (ground, supine).

Sources: HoST spec (``g1_config_ground.py``; Huang et al., RSS 2025). Every field can be overridden
from the command line, e.g. ``python train.py task=standup env.num_envs=256``. The terrain and the
start posture are chosen with the top-level keys ``terrain=ground|platform|wall|slope`` and
``posture=supine|prone``, which also set the terrain's HoST values of the fields below
(:mod:`upright.tasks.standup.terrains.settings`); in Python, use
:func:`upright.tasks.standup.terrains.standup_env_cfg`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from upright.managers.vlm_reward import VLMRewardCfg
from upright.tasks.standup.curriculum import CurriculumCfg
from upright.tasks.standup.getup.config import GetupCfg
from upright.tasks.standup.randomization import DisturbanceCfg, DomainRandCfg


@dataclass
class StandupEnvCfg:
    """Env settings: episode, action, observation, reset randomisation."""

    mdp: str = "host"
    """The MDP: ``host`` (HoST's rewards, starts, observations and gains) or ``getup`` (the get-up MDP of MuJoCo
    Playground and mjlab_playground, :mod:`upright.tasks.standup.getup`; ``recipe=getup`` sets it with its PPO
    settings). Evaluation, export and play run either."""
    getup: GetupCfg = field(default_factory=GetupCfg)
    """Settings of ``mdp=getup`` (ignored by ``host``)."""
    terrain: str = "ground"
    """Terrain: ground | platform | wall | slope (set with the top-level ``terrain=<name>``, which also sets
    the terrain's values of the fields below)."""
    posture: str = "supine"
    """Start posture: supine | prone (top-level ``posture=<name>``; wall supports supine only: seated start)."""
    num_envs: int = 512
    """Parallel envs. HoST uses 4096 on a GPU. On a 2-core CPU the PPO update costs ~3x the env stepping,
    so a smaller batch (512 x 50 steps) gives more policy updates per hour; use 4096 on a GPU."""
    episode_length_s: float = 10.0
    """Episode length, s (500 env steps at 50 Hz)."""
    decimation: int = 4
    """Physics steps per env step: dt 0.005 s x 4 = 0.02 s, a 50 Hz policy."""
    unactuated_steps: int = 30
    """Env steps at the start of each episode with zero action and zero observation (HoST: 30 = 0.6 s; wall and
    slope 50 = 1 s)."""
    curriculum: CurriculumCfg = field(default_factory=CurriculumCfg)
    """Pull-force and β curricula (β: p_target = q + β·a). ``env.curriculum.enabled=false`` for play and evaluation."""
    action_clip: float = 100.0
    """Sampled actions are clipped to ±action_clip (HoST ``clip_actions``)."""
    obs_noise: bool = True
    """Add HoST's uniform observation noise (paper Table VIII). ``env.disturbance.obs_noise_scale`` overrides it."""
    init_height: float = 0.5
    """Pelvis height at reset above the terrain surface below it, m; the robot drops and settles during the
    unactuated phase (HoST: 0.5; wall 0.45; slope 0.8)."""
    init_joint_scale: tuple[float, float] = (0.9, 1.1)
    """Reset joint angles = default x U(scale) + U(offset), clipped to the joint range (HoST spec §6 "Initial
    joint angle"). Part of domain randomisation: ``env.domain_rand.enabled=false`` resets to the exact default pose."""
    init_joint_offset: tuple[float, float] = (-0.1, 0.1)
    """Reset joint-angle offset range, rad."""
    action_mode: str = "relative"
    """How actions become PD targets of the 23 policy joints: ``relative`` (HoST) p = q + β·a, around the measured
    joint angles; ``absolute`` (not HoST; legged_gym's convention) p = q_default + β·a, around the default pose.
    Both use the curriculum's β as the scale."""
    passive_push_force: float = 0.0
    """Force along world x on the torso during the unactuated phase, N (HoST wall and slope: 2 x -50 N = -100 N,
    which lays the robot back against the ramp)."""
    max_joint_vel: float = 300.0
    """Terminate when any |q̇| exceeds this, rad/s (HoST)."""
    max_base_lin_vel: float = 20.0
    """Terminate when the pelvis speed exceeds this, m/s (HoST)."""
    domain_rand: DomainRandCfg = field(default_factory=DomainRandCfg)
    """HoST's domain randomisation (spec §6), on by default as in training and HoST's evaluation;
    ``env.domain_rand.enabled=false`` turns it off (play does). See :mod:`upright.tasks.standup.randomization`."""
    disturbance: DisturbanceCfg = field(default_factory=DisturbanceCfg)
    """Robustness-test disruptions (observation noise x k, fixed action delay, pushes, payload, torque dropout,
    fixed friction), all off by default, e.g. ``env.disturbance.torque_dropout=0.1``."""
    vlm_reward: VLMRewardCfg = field(default_factory=VLMRewardCfg)
    """Not HoST: a CLIP reward from a sentence (VLM-RMs; off by default, :mod:`upright.managers.vlm_reward`), added to
    the reward of either MDP; ``recipe=vlm_kneel`` uses it."""


@dataclass
class SimCfg:
    """Physics backend selection."""

    backend: str = "native"
    """Backend name: ``native`` (MuJoCo C, threads; the CPU default), ``warp`` (MuJoCo Warp; GPUs) or ``mjx``
    (MuJoCo-MJX on JAX; GPUs)."""
    num_threads: int = 0
    """Threads for the native backend; 0 = all CPUs."""
    timestep: float = 0.005
    """Physics dt, s (HoST)."""
