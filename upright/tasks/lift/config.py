"""Typed configuration of the lift task. Defaults anchor MuJoCo Playground's ``PandaPickCube``
(``mujoco_playground/_src/manipulation/franka_emika_panda/pick.py``: ``ctrl_dt`` 0.02, ``sim_dt`` 0.005,
``episode_length`` 150, ``action_scale`` 0.04, reward scales, cube xy ±0.2 m, target 0.2-0.4 m above the cube's
start) and ManiSkill's ``PickCube`` success threshold (``goal_thresh`` 0.025 m). Every field can be overridden from
the command line, e.g. ``python train.py task=lift env.num_envs=256 env.domain_rand.enabled=false``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from upright.managers.vlm_reward import VLMRewardCfg


@dataclass
class LiftRewardsCfg:
    """Reward weights (Playground ``reward_config.scales``, plus upright's ``grasp`` and ``lifted``), each multiplied
    by dt = 0.02 s in its group's sum."""

    gripper_box: float = 4.0
    """Group ``reach``: gripper site to cube centre."""
    box_target: float = 8.0
    """Group ``lift``: cube to target, once the gripper has reached the cube."""
    grasp: float = 4.0
    """Group ``reach``: both finger pads touch the cube (ManiSkill ``PickCube``'s ``is_grasped``). Not Playground's:
    ``env.rewards.grasp=0 env.rewards.lifted=0`` is Playground's reward. With both terms the cube is grasped and
    lifted within 150 iterations (2 seeds); without them it was never lifted in 447 (``docs/lift_learning.md``)."""
    grasp_off_floor: bool = False
    """``grasp`` pays nothing while the hand or a fingertip touches the floor (as ``carry_off_floor``; false: the
    grasp pays wherever it happens). Stalled seeds grasp with the hand capsule pressed on the table (~165 N) and are
    paid the full ``grasp`` there (``docs/lift_learning.md``, session 13)."""
    lifted: float = 8.0
    """Group ``lift``: grasped and raised by more than ``lift_height`` (Isaac Lab's ``lifting_object``; not
    Playground's)."""
    lift_height: float = 0.02
    """Height of the cube centre above its start that counts as lifted, m."""
    box_target_fine: float = 0.0
    """Group ``lift``: ``box_target`` again with ``fine_sharpness`` (a precision term, as Isaac Lab's second goal
    tracking term with std 0.05 m; not Playground's; 0 = off)."""
    fine_sharpness: float = 20.0
    """Sharpness of ``box_target_fine``, 1/m: 1 - tanh(20 · 0.025) = 0.54 at the success radius, 0.24 at 5 cm."""
    carry: float = 0.0
    """Group ``lift``: the fraction of the start-to-target distance covered while grasped (linear; ManiSkill's
    grasp-gated place reward; not Playground's; 0 = off)."""
    carry_off_floor: bool = True
    """``carry`` pays nothing while the hand or a fingertip touches the floor (false: session 11's ungated term, under
    which 2 of 4 seeds learnt to lean the hand on the table and tilt the cube up; ``docs/lift_learning.md``)."""
    at_target: float = 0.0
    """Group ``lift``: the cube centre within ``at_target_threshold`` of the target (a success bonus; not Playground's;
    0 = off)."""
    at_target_threshold: float = 0.025
    """Distance that counts as at the target, m (the success threshold, ManiSkill ``goal_thresh``)."""
    no_floor_collision: float = 0.25
    """Group ``regularization``: hand and fingertips off the floor."""
    robot_target_qpos: float = 0.3
    """Group ``regularization``: arm near the home posture."""
    action_rate: float = 0.0
    """Group ``regularization``: -|a_t - a_{t-1}|² weight (not Playground; 0 = off)."""
    reach_threshold: float = 0.012
    """The gripper has "reached" the cube once its site comes this close to the cube centre, m (Playground)."""


@dataclass
class LiftCurriculumCfg:
    """Per-env curriculum (:mod:`upright.tasks.lift.curriculum`): a level in [0, 1] per env widens the cube's start
    range and the target's xy range and height from the values below (level 0) to the env's full ranges (level 1).
    Not Playground (which trains on the full ranges from the start)."""

    enabled: bool = True
    """False: every env at level 1 (the full task; evaluation and play)."""
    init_level: float = 0.0
    """Level of every env at the start of training."""
    step_up: float = 0.02
    """Level increase of an env whose episode succeeded."""
    step_down: float = 0.08
    """Level decrease of an env whose episode failed. With ``step_up`` 0.02 a level holds still at 80 % success
    (step_down / (step_up + step_down)), so ranges widen only while an env succeeds more often than that."""
    cube_xy_start: float = 0.05
    """Half-width of the cube's start xy range at level 0, m."""
    target_xy_start: float = 0.05
    """Half-width of the target's xy range at level 0, m."""
    target_height_max_start: float = 0.25
    """Largest target height above the cube's start at level 0, m."""
    grasped_start_fraction: float = 0.0
    """Fraction of training resets that start with the cube between the closed fingers at its start position, the
    arm solved by IK to put the gripper site at the cube centre (:mod:`upright.tasks.lift.grasp_start`; a
    reset-to-demonstration aid for the discovery of the lift, not Playground's; 0 = off). Those episodes are left
    out of the curriculum's level updates and of ``Metrics/success``; curriculum off (evaluation, play): never."""
    far_edge_fraction: float = 0.0
    """Fraction of training resets whose cube start x, and independently whose target x, is drawn from the outer
    band of the env's current xy range, ``[x0 + r - far_edge_band, x0 + r]`` (x0 = 0.7 m, r the half-width at the
    env's level), instead of the whole range: extra practice where the hand must reach furthest and tilt
    (``docs/lift_learning.md``, session 16; 0 = off). Curriculum off (evaluation, play): never."""
    far_edge_band: float = 0.05
    """Width of that outer band along x, m."""
    ee_max_lead_down_level: float = 0.0
    """``env.ee_max_lead_down`` bounds the command only in envs whose level has reached this (0: in every env). From
    scratch the bound stalled the discovery of the carry (seed 3, 186 iterations without a lift, as ``ee_max_lead``
    in session 14), so it can wait until an env has widened its ranges (``docs/lift_learning.md``, session 17).
    Curriculum off (evaluation, play): in every env."""
    target_height_min_start: float | None = None
    """Smallest target height above the cube's start at level 0, m (None: ``env.target_height[0]`` at every level).
    A low start (e.g. 0.05 with ``target_height_max_start=0.1``) lets a policy that has only learnt to lift the cube
    a few cm succeed, so the levels can rise."""


@dataclass
class LiftDomainRandCfg:
    """Domain randomisation (:mod:`upright.tasks.lift.randomization`); ``enabled=false`` turns all of it off."""

    enabled: bool = True
    cube_mass_scale: tuple[float, float] = (0.5, 2.0)
    """Cube mass factor, drawn per env at each reset (nominal: MuJoCo's 1000 kg/m³ x 96 cm³ = 0.096 kg)."""
    cube_size_scale: tuple[float, float] = (0.85, 1.15)
    """Cube size factor per reset, on all three half sizes (nominal 4 x 4 x 6 cm, so 3.4-4.6 cm wide: within the
    gripper's 8 cm opening); the inertia follows (x factor²), the mass is drawn by ``cube_mass_scale``."""
    cube_friction_scale: tuple[float, float] = (0.6, 1.2)
    """Cube sliding-friction factor per reset (nominal 1.0)."""
    kp_scale: tuple[float, float] = (0.8, 1.2)
    """Actuator Kp factor, per actuator and reset (``gainprm[0]`` and ``-biasprm[1]`` together)."""
    kd_scale: tuple[float, float] = (0.8, 1.2)
    """Actuator Kd factor, per actuator and reset (``-biasprm[2]``)."""
    obs_noise_scale: float = 1.0
    """Multiplier of every observation term's noise half-width (0: none)."""
    action_delay_substeps: int = 1
    """Largest action delay, physics substeps of 5 ms, drawn per env at reset from 0..this (0: none)."""


@dataclass
class LiftCameraCfg:
    """The optional ``rgb`` observation group (off by default: training is from state)."""

    enabled: bool = False
    """Render camera images into the ``rgb`` observation group."""
    width: int = 64
    height: int = 64
    cameras: tuple[str, ...] = ("front",)
    """Scene cameras to render: ``front`` and/or ``wrist``."""
    backend: str = "auto"
    """``opengl`` (MuJoCo's renderer, one env after another; EGL or OSMesa on CPU), ``warp`` (MuJoCo Warp's batch ray
    tracer, all envs in one launch; needs ``upright[warp]``; CUDA when present, else Warp's CPU device) or ``auto``
    (``warp`` when mujoco-warp is installed and a CUDA device is present, else ``opengl``). The two shade differently:
    keep one backend for a vision policy's training and evaluation."""


@dataclass
class LiftEnvCfg:
    """Env settings: episode, action, reset ranges, success, rewards, curriculum, randomisation, cameras."""

    num_envs: int = 1024
    """Parallel envs. Playground uses 2048 on a GPU; 1024 keeps a 2-core CPU's iteration near a few seconds."""
    episode_length_s: float = 3.0
    """Episode length, s: 150 env steps of 0.02 s (Playground ``episode_length``)."""
    decimation: int = 4
    """Physics steps per env step: 0.005 s x 4 = 0.02 s (Playground ``ctrl_dt`` / ``sim_dt``)."""
    action_scale: float = 0.04
    """ctrl ← clip(ctrl + action_scale · a, ctrl range): rad per env step for the arm, m for the finger
    (Playground ``action_scale``)."""
    action_clip: float = 1.0
    """Actions are clipped to ±this before scaling (the bound of Playground's tanh-squashed policy)."""
    action_mode: str = "delta"
    """``delta`` (Playground): a ∈ [-1, 1]^8 moves the 7 arm targets and the finger target,
    ctrl ← clip(ctrl + action_scale · a). ``ee_delta`` (not Playground; Isaac Lab's ``Isaac-Lift-Cube-Franka-IK-Rel``,
    ManiSkill's ``pd_ee_delta_pos``): a ∈ [-1, 1]^4, the first three move the gripper site by ``ee_action_scale`` · a
    (world frame, m) through differential IK with the hand's orientation held (:mod:`upright.tasks.lift.ik`), the
    last moves the finger target by ``action_scale`` · a."""
    ee_action_scale: float = 0.015
    """``ee_delta``: the site's largest commanded step per env step, m (0.75 m/s; the scripted expert's
    ``max_step``)."""
    ee_min_height: float | None = None
    """``ee_delta``: the commanded gripper site is kept at least this high above the table, m (a workspace floor, as
    a Cartesian controller's bounds on a real cell; None: none). It bounds the command, not the measured hand: the
    Menagerie arm's position actuators have no gravity compensation, so an outstretched arm sags ~1 cm below its
    targets, and with 0.025 the pads (1.9 cm below the site, ``mjx_panda.xml`` pad boxes) can still graze the table.
    Without it the policy can command the hand 20 cm into the table, which presses it onto the table and flips the
    wrist (``docs/lift_learning.md``, session 12)."""
    ee_gravity_compensation: bool = False
    """``ee_delta``: the arm's position targets are the commanded configuration q_c plus g(q_c) / Kp (g the gravity
    torques at q_c from ``mj_rne``, Kp the nominal gains of ``mjx_panda.xml``), so the arm holds q_c instead of
    sagging below it (the Franka's own controller compensates gravity, libfranka's "gravity is compensated by the
    robot"; the scripted expert does the same). False: the targets are q_c (the Menagerie actuators have no gravity
    compensation; the outstretched arm sags ~1 cm)."""
    ee_max_lead: float | None = None
    """``ee_delta``: the commanded gripper site (the site at the arm's position targets q_c) is kept within this
    distance of the measured site, m (None: unbounded). The IK step accumulates on q_c, so while the hand is blocked
    (pressed on the table, or at the edge of its reach) the command otherwise runs on ahead of it, unseen by the
    policy (its observation has the measured arm, not the targets), and must be wound back before the hand moves
    the other way: the stuck far-edge episodes of session 14 had the command 30 cm below and 15 cm behind the
    hand (``docs/lift_learning.md``). The bound is an anti-windup clamp on the Cartesian command; a real cell
    computes it from the measured joint angles and the arm's kinematic model."""
    ee_max_lead_down: float | None = None
    """``ee_delta``: the commanded gripper site is kept at most this far *below* the measured site, m (None:
    unbounded); the other directions stay free. A one-sided ``ee_max_lead``: the windup that pressed the hand into
    the table at the far edge (the command 30 cm below the hand, session 14) is bounded, while the lead the command
    needs above and ahead of a sagging, outstretched arm carrying the cube (the integral action that ``ee_max_lead``
    took away from far targets) is kept (``docs/lift_learning.md``, session 17)."""
    ee_observe_lead: bool = False
    """``ee_delta``: append the command's lead over the hand, the site at the arm's position targets minus the measured
    site (3 values, m, world frame), to the observation (:data:`upright.tasks.lift.observations.EE_LEAD_TERM`). The
    other way to deal with the windup that ``ee_max_lead`` bounds: the integral action is kept and made visible."""
    cube_xy_range: float = 0.2
    """Half-width of the cube's start xy range around (0.7, 0) m (Playground ±0.2)."""
    target_xy_range: float = 0.2
    """Half-width of the target's xy range around (0.7, 0) m (Playground ±0.2)."""
    target_height: tuple[float, float] = (0.2, 0.4)
    """Range of the target's height above the cube's start centre, m (Playground 0.2-0.4)."""
    success_threshold: float = 0.025
    """Success: cube centre within this distance of the target, m (ManiSkill ``goal_thresh``)."""
    rewards: LiftRewardsCfg = field(default_factory=LiftRewardsCfg)
    curriculum: LiftCurriculumCfg = field(default_factory=LiftCurriculumCfg)
    domain_rand: LiftDomainRandCfg = field(default_factory=LiftDomainRandCfg)
    camera: LiftCameraCfg = field(default_factory=LiftCameraCfg)
    vlm_reward: VLMRewardCfg = field(default_factory=lambda: VLMRewardCfg(camera="front"))
    """A CLIP reward from a sentence (VLM-RMs; off by default, :mod:`upright.managers.vlm_reward`); the target marker
    is drawn where the scene puts it, not at the episode's target."""


def lift_sim_cfg():
    """``sim.*`` defaults of ``task=lift``: physics step 0.005 s (Playground ``PandaPickCube`` ``sim_dt``)."""
    from upright.tasks.standup.config import SimCfg

    return SimCfg(timestep=0.005)
