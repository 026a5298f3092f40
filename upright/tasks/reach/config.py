"""Settings of ``task=reach`` (``env.*``), each overridable from the command line, e.g. ``python train.py task=reach
env.num_envs=512``. Defaults: Isaac Lab's ``Isaac-Reach-Franka-v0`` where it has one (the reward terms and weights,
joint-position actions, the command box), MuJoCo Playground's Panda settings for the rest (0.02 s env steps of 4
physics steps, the delta-target action of ``PandaPickCube``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReachRewardsCfg:
    """Reward weights (one group, ``reach``; each addend times the env step dt)."""

    position_error: float = -0.2
    """Weight of the distance from the gripper site to the target, m (Isaac Lab ``end_effector_position_tracking``)."""
    position_fine: float = 0.1
    """Weight of 1 - tanh(d / ``fine_std``) (Isaac Lab ``end_effector_position_tracking_fine_grained``)."""
    fine_std: float = 0.1
    """Length scale of the fine term, m (Isaac Lab: 0.1)."""
    action_rate: float = -1e-4
    """Weight of ||a_t - a_{t-1}||² (Isaac Lab ``action_rate``)."""
    joint_vel: float = -1e-4
    """Weight of ||dq||² over the arm joints, (rad/s)² (Isaac Lab ``joint_vel``)."""


@dataclass
class ReachEnvCfg:
    """``env.*`` of the reach task."""

    num_envs: int = 1024
    """Parallel envs N."""
    decimation: int = 4
    """Physics steps per env step (4 x 0.005 s = 0.02 s, 50 Hz)."""
    episode_length_s: float = 4.0
    """Episode length, s (200 env steps); the target is drawn once per episode. upright's choice: Isaac Lab's reach
    runs 12 s episodes and draws a new target every 4 s; one target per 4 s episode gives the same time per target
    with resets instead of resampling."""
    action_mode: str = "delta"
    """``delta``: ctrl <- clip(ctrl + action_scale * a, ctrl range) for the 7 arm joints and the finger (the only mode;
    :class:`~upright.tasks.lift.actions.PandaTargetAction`)."""
    action_scale: float = 0.04
    """Target change per unit action, rad (arm) and m (finger) per env step (Playground ``PandaPickCube``)."""
    action_clip: float = 1.0
    """Actions are clipped to ±this."""
    ee_gravity_compensation: bool = False
    """Not used in ``delta`` mode (the action term's setting for gripper-site actions)."""
    target_x: list[float] = field(default_factory=lambda: [0.35, 0.65])
    """Target range along world x (forward of the Panda's base), m (Isaac Lab's command box)."""
    target_y: list[float] = field(default_factory=lambda: [-0.2, 0.2])
    """Target range along world y, m."""
    target_z: list[float] = field(default_factory=lambda: [0.15, 0.5])
    """Target range along world z (above the floor), m."""
    init_joint_noise: float = 0.1
    """Arm joints start at the home pose + U(±this), rad (upright's choice; the target box sets the task's range)."""
    success_threshold: float = 0.02
    """A step counts as a success when the gripper site is within this of the target, m."""
    obs_noise: bool = True
    """Uniform noise on the joint observations: ±0.01 rad on positions (Isaac Lab's reach) and ±0.01 on the velocity
    term after its 0.1 scale, i.e. ±0.1 rad/s (upright's choice; Isaac Lab's reach adds ±0.01 rad/s)."""
    rewards: ReachRewardsCfg = field(default_factory=ReachRewardsCfg)
