"""The lift env: a Franka Panda picks up a cube and lifts it to a target, N envs in parallel on any
:mod:`upright.sim` backend, a batched ``rsl_rl`` ``VecEnv`` (MuJoCo Playground ``PandaPickCube``).

One env step (0.02 s): the action a ∈ [-1, 1]^8 moves the position targets, ctrl ← clip(ctrl + 0.04·a, ctrl range),
for the 7 arm actuators and the finger actuator (``env.action_mode=ee_delta``: a ∈ [-1, 1]^4 moves the gripper site
by 0.015·a[:3] m through differential IK, :mod:`.ik`, and the finger target by 0.04·a[3]); the targets are held for
``decimation`` = 4 physics steps of 0.005 s (delayed by 0-``action_delay_substeps`` substeps under domain
randomisation); then state, rewards (3 groups), terminations, the curriculum's update of envs whose episode ended,
resets and the next observation.

Reset (Playground): the robot at keyframe ``home`` with its targets, the cube upright on the floor at
(0.7, 0) m + U(±r_cube) in xy, the target at (0.7, 0) m + U(±r_target) in xy and U(h0, h_max) m above the cube's
start centre; r_cube, r_target and h_max follow each env's curriculum level (:mod:`.curriculum`). An episode ends
after 150 env steps, when the cube leaves the workspace, or when the simulation diverged (:mod:`.terminations`); success
(cube centre within 2.5 cm of the target at some env step) does not end it.
"""

from __future__ import annotations

import mujoco
import torch
from tensordict import TensorDict

from upright.envs import ManagerBasedRlEnv
from upright.managers.episode import EpisodeStats
from upright.managers.observation import HistoryObservations, ObservationHistory, compute_frame
from upright.managers.reward import RewardManager
from upright.managers.termination import TerminationManager, TerminationTerm
from upright.managers.vlm_reward import with_vlm_reward
from upright.robots import panda
from upright.sim import GEOMETRY_FIELDS, make_sim
from upright.tasks.lift.actions import ACTION_MODES, PandaTargetAction
from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.curriculum import lift_curriculum
from upright.tasks.lift.observations import HISTORY_LENGTH, OBS_CLIP, observation_dims, observation_terms
from upright.tasks.lift.randomization import LiftRandomizer
from upright.tasks.lift.reset_sampling import LiftResetSampling
from upright.tasks.lift.rewards import REWARD_GROUPS, lift_reward_terms
from upright.tasks.lift.scene import GRIPPER_QUAT_SENSOR, floor_sensor_slices, grasp_sensor_slices, lift_scene
from upright.tasks.lift.state import LiftState
from upright.tasks.lift.terminations import cube_out_of_bounds, joint_limit_violation, non_finite, success


class LiftEnv(LiftResetSampling, ManagerBasedRlEnv):
    """Panda pick-and-lift, N envs.

    Args:
        cfg: env settings (:class:`~upright.tasks.lift.config.LiftEnvCfg`).
        sim_cfg: backend settings (``backend``, ``num_threads``, ``timestep``).
        device: torch device of observations, rewards and actions.
        seed: seed of the env's random generator (resets, noise, randomisation).

    Raises:
        ModelNotFoundError: the Panda model cannot be found (set ``MENAGERIE_ROOT``).
        ValueError: a bad config value (the message names the key and the fix).
    """

    def __init__(self, cfg: LiftEnvCfg, sim_cfg, device: str = "cpu", seed: int = 0):
        if cfg.decimation < 1:
            raise ValueError(f"env.decimation must be >= 1, got {cfg.decimation}")
        if cfg.num_envs < 1:
            raise ValueError(f"env.num_envs must be >= 1, got {cfg.num_envs}")
        if cfg.action_scale <= 0 or cfg.action_clip <= 0:
            raise ValueError(
                f"env.action_scale and env.action_clip must be > 0, got {cfg.action_scale}, {cfg.action_clip}"
            )
        if cfg.action_mode not in ACTION_MODES:
            raise ValueError(f"env.action_mode must be one of {list(ACTION_MODES)}, got {cfg.action_mode!r}")
        if cfg.ee_max_lead is not None and not cfg.ee_max_lead > 0:
            raise ValueError(f"env.ee_max_lead must be > 0 m (or null: unbounded), got {cfg.ee_max_lead}")
        if cfg.ee_max_lead_down is not None and not cfg.ee_max_lead_down > 0:
            raise ValueError(f"env.ee_max_lead_down must be > 0 m (or null: unbounded), got {cfg.ee_max_lead_down}")
        if not 0.0 <= cfg.curriculum.ee_max_lead_down_level <= 1.0:
            raise ValueError(
                "env.curriculum.ee_max_lead_down_level must be a level in [0, 1], got "
                f"{cfg.curriculum.ee_max_lead_down_level}"
            )
        if cfg.ee_observe_lead and cfg.action_mode != "ee_delta":
            raise ValueError("env.ee_observe_lead=true needs env.action_mode=ee_delta (the lead is the IK command's)")
        if cfg.ee_action_scale <= 0:
            raise ValueError(f"env.ee_action_scale must be > 0 (m per env step), got {cfg.ee_action_scale}")
        h0, h1 = cfg.target_height
        if not 0 <= h0 <= h1:
            raise ValueError(
                f"env.target_height must be [low, high] with 0 <= low <= high, got {list(cfg.target_height)}"
            )
        c = cfg.curriculum
        if not (0.0 <= c.far_edge_fraction <= 1.0 and c.far_edge_band > 0.0):
            raise ValueError(
                f"env.curriculum.far_edge_fraction must be in [0, 1] and far_edge_band > 0 m, got "
                f"{c.far_edge_fraction}, {c.far_edge_band}"
            )
        self.cfg = cfg
        self.sim_cfg = sim_cfg
        self.device = torch.device(device)
        self.rng = torch.Generator(device="cpu").manual_seed(seed)
        self.model = lift_scene(sim_cfg.timestep)
        self.sim = make_sim(
            sim_cfg.backend,
            self.model,
            cfg.num_envs,
            sim_cfg.num_threads,
            self.device,
            extra_fields=GEOMETRY_FIELDS if cfg.domain_rand.enabled else (),
        )  # the cube's size
        self.num_envs = cfg.num_envs
        self.step_dt = sim_cfg.timestep * cfg.decimation
        """Control period, s (0.02)."""
        self.max_episode_length = int(round(cfg.episode_length_s / self.step_dt))
        """Env steps per episode (150)."""
        self.action_term = PandaTargetAction(cfg, self.model, self.device)
        """Delta position targets, in joint space or at the gripper site through IK (:mod:`.actions`)."""
        self.num_ctrl = self.action_term.num_ctrl
        """Position targets (8: 7 arm joints, the finger)."""
        self.num_actions = self.action_term.num_actions
        """Width of the policy's action: 8 (``delta``) or 4 (``ee_delta``: site dx, dy, dz, finger)."""
        self.observation_terms = observation_terms(cfg.ee_observe_lead)
        """The frame's terms in order (:func:`~upright.tasks.lift.observations.observation_terms`)."""
        self.observation_dims = observation_dims(self.num_actions, cfg.ee_observe_lead)
        """Width of each observation term (:func:`~upright.tasks.lift.observations.observation_dims`)."""
        self.ik = self.action_term.ik
        """The action term's differential IK (``ee_delta``; None in ``delta``)."""
        self._init_indices()
        n, dev = self.num_envs, self.device
        terms, groups = with_vlm_reward(
            lift_reward_terms(cfg.rewards),
            REWARD_GROUPS,
            getattr(cfg, "vlm_reward", None),
            self.model,
            self.sim,
            self.device,
        )
        self.reward_manager = RewardManager(terms, groups, dt=self.step_dt)
        self.reward_group_names = self.reward_manager.group_names
        """Reward groups, in the column order of ``extras["reward_groups"]`` (one critic each)."""
        self.episode = EpisodeStats(n, dev)
        self.curriculum = lift_curriculum(cfg, n, dev)
        """Per-env levels widening the reset ranges (:mod:`upright.tasks.lift.curriculum`)."""
        self.randomizer = LiftRandomizer(cfg.domain_rand, self.sim, cfg.decimation, seed + 1_000_003)
        self.ctrl = torch.zeros(n, self.num_ctrl, device=dev)
        """(N, 8) position targets in force, rad / m."""
        self.actions = torch.zeros(n, self.num_actions, device=dev)
        self.last_actions = torch.zeros(n, self.num_actions, device=dev)
        self.target_pos = torch.zeros(n, 3, device=dev)
        """(N, 3) target of the cube centre, world frame, m."""
        self.cube_start = torch.zeros(n, 3, device=dev)
        """(N, 3) cube centre at the episode's start, m."""
        self.grasped_start = torch.zeros(n, dtype=torch.bool, device=dev)
        """(N,) the episode began with the cube between the fingers (``env.curriculum.grasped_start_fraction``)."""
        self._grasp_ik = None
        self._home_applied: torch.Tensor | None = None
        """(1, 8) the home targets as sent to the actuators (the action term's ``applied_ctrl``), computed at the
        first reset."""
        self.reached = torch.zeros(n, dtype=torch.bool, device=dev)
        """(N,) latched: the gripper site came within ``rewards.reach_threshold`` of the cube this episode."""
        self.success_once = torch.zeros(n, dtype=torch.bool, device=dev)
        """(N,) the cube has been within the success threshold of the target at some env step of this episode."""
        self.success_step = torch.full((n,), -1, dtype=torch.long, device=dev)
        """(N,) int64 env step at which the episode first succeeded (-1: not yet)."""
        self.obs_history = ObservationHistory(n, sum(self.observation_dims), HISTORY_LENGTH, dev)
        self.observation_manager = HistoryObservations(lift_frame, self.obs_history)
        self.event_terms = (action_delay,)
        self.post_physics_terms = (latch_reached,)
        self.termination_manager = TerminationManager(
            [
                TerminationTerm("cube_out_of_bounds", cube_out_of_bounds),
                TerminationTerm("non_finite", non_finite),
                TerminationTerm(
                    "joint_limit_violation",
                    joint_limit_violation,
                    {"lower": self.joint_lower, "upper": self.joint_upper},
                ),
            ]
        )
        self.curriculum_terms = (level_curriculum,)
        self.renderer = None
        if cfg.camera.enabled:
            from upright.tasks.lift.camera import make_camera_renderer

            self.renderer = make_camera_renderer(self.model, cfg.camera)
        self.reset_all()

    # ------------------------------------------------------------------ set-up
    def _init_indices(self) -> None:
        m = self.model

        def obj(kind, name: str) -> int:
            i = mujoco.mj_name2id(m, kind, name)
            if i < 0:
                raise ValueError(f"Lift scene lacks '{name}'; the Menagerie file does not match upright.robots.panda")
            return i

        jids = [obj(mujoco.mjtObj.mjOBJ_JOINT, j) for j in panda.JOINT_NAMES]
        self._q_adr = torch.tensor(m.jnt_qposadr[jids], dtype=torch.long)
        self._v_adr = torch.tensor(m.jnt_dofadr[jids], dtype=torch.long)
        cube = obj(mujoco.mjtObj.mjOBJ_BODY, panda.CUBE_BODY)
        cube_joint = int(m.body_jntadr[cube])
        self._cube_q = int(m.jnt_qposadr[cube_joint])
        self._gripper_site = obj(mujoco.mjtObj.mjOBJ_SITE, panda.GRIPPER_SITE)
        self._tip_sites = [obj(mujoco.mjtObj.mjOBJ_SITE, s) for s in panda.FINGERTIP_SITES]
        self._quat_adr = int(m.sensor_adr[obj(mujoco.mjtObj.mjOBJ_SENSOR, GRIPPER_QUAT_SENSOR)])
        self._floor_adr = torch.tensor(floor_sensor_slices(m), dtype=torch.long)
        self._grasp_adr = torch.tensor(grasp_sensor_slices(m), dtype=torch.long)
        dev = self.device
        key = m.keyframe("home")
        self._home_qpos = torch.tensor(key.qpos, dtype=torch.float32, device=dev)
        """(nq,) keyframe ``home``: robot, cube at its nominal place."""
        self.home_ctrl = torch.tensor(key.ctrl, dtype=torch.float32, device=dev)
        self.home_q = self._home_qpos[self._q_adr.to(dev)]
        jrange = torch.tensor(m.jnt_range[jids], dtype=torch.float32, device=dev)
        self.joint_lower, self.joint_upper = jrange[:, 0], jrange[:, 1]
        rng = torch.tensor(m.actuator_ctrlrange, dtype=torch.float32, device=dev)
        self.ctrl_lower, self.ctrl_upper = rng[:, 0], rng[:, 1]
        self.cube_home = self._home_qpos[self._cube_q : self._cube_q + 3].clone()
        """(3,) the cube's nominal start centre, m (the centre of the reset ranges)."""

    # ------------------------------------------------------------------ state
    def _read_state(self) -> LiftState:
        s = self.sim.state
        qpos, qvel, sites = s.qpos, s.qvel, s.site_xpos
        c = self._cube_q
        return LiftState(
            q=qpos[:, self._q_adr],
            dq=qvel[:, self._v_adr],
            ctrl=self.ctrl.clone(),
            action=self.actions.clone(),
            last_action=self.last_actions.clone(),
            home_q=self.home_q,
            gripper_pos=sites[:, self._gripper_site],
            gripper_quat=s.sensordata[:, self._quat_adr : self._quat_adr + 4],
            fingertip_pos=sites[:, self._tip_sites],
            cube_pos=qpos[:, c : c + 3],
            cube_quat=qpos[:, c + 3 : c + 7],
            target_pos=self.target_pos.clone(),
            cube_start=self.cube_start.clone(),
            pad_contact=s.sensordata[:, self._grasp_adr.to(s.sensordata.device)] > 0,
            floor_contact=s.sensordata[:, self._floor_adr.to(s.sensordata.device)].abs().sum(dim=-1) > 0,
            reached=self.reached.clone(),
            episode_step=self.episode.length.clone(),
            command_site=self._command_site() if self.cfg.ee_observe_lead else None,
        )

    def _command_site(self) -> torch.Tensor:
        """(N, 3) the gripper site at the arm's position targets, world frame, m (the action term's ``ctrl_frames``)."""
        return torch.as_tensor(self.action_term.ctrl_frames(self)[0], dtype=torch.float32, device=self.device)

    # ------------------------------------------------------------------ VecEnv
    def get_observations(self) -> TensorDict:
        """``actor`` and ``critic``: (N, 49) float32 (:data:`~upright.tasks.lift.observations.OBSERVATION_TERMS`);
        with ``env.camera.enabled``, also ``rgb``: (N, C, H, W, 3) uint8 images of the configured cameras."""
        groups = self.observation_manager.get()
        if self.renderer is not None:
            groups["rgb"] = self.renderer.render(self.sim, self.target_pos).to(self.device)
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def _log_step(self, state: LiftState, group_rewards: torch.Tensor, dones: torch.Tensor) -> dict[str, torch.Tensor]:
        """Success bookkeeping (:attr:`success_once`, :attr:`success_step` and their values at the step's end, before
        resets), then the finished episodes' reward means, the curriculum level and the success metrics."""
        succ = success(state, self.cfg.success_threshold)
        first = succ & ~self.success_once
        self.success_step[first] = self.episode.length[first]
        self.success_once |= succ
        self.last_success = succ
        """(N,) bool success at the end of the last env step (before resets)."""
        self.success_once_at_done = self.success_once.clone()
        """(N,) bool :attr:`success_once` at the end of the last env step, before resets (evaluation reads it)."""
        self.success_step_at_done = self.success_step.clone()
        """(N,) int64 :attr:`success_step` at the end of the last env step, before resets."""
        log = self.episode.finished_means(dones)
        log["Curriculum/level"] = self.curriculum.level
        log["Metrics/cube_height"] = state.cube_pos[:, 2] - self.cube_start[:, 2]
        log["Metrics/reached"] = self.reached.float()
        log["Metrics/grasped"] = state.grasped.float()
        if bool(self.grasped_start.any()):
            log["Curriculum/grasped_start"] = self.grasped_start.float()
            gs = dones & self.grasped_start
            if bool(gs.any()):
                log["Metrics/success_grasped_start"] = self.success_once[gs].float()
            dones = dones & ~self.grasped_start  # the metrics below: normal starts only
        if bool(dones.any()):
            log["Metrics/success"] = self.success_once[dones].float()
            log["Metrics/success_at_end"] = succ[dones].float()
            log["Metrics/final_cube_target_distance"] = state.cube_to_target.norm(dim=-1)[dones]
            ok = dones & self.success_once
            if bool(ok.any()):
                log["Metrics/time_to_success_s"] = self.success_step[ok].float() * self.step_dt
        return log

    # ------------------------------------------------------------------ resets (drawing the starts: .reset_sampling)
    def reset_envs(
        self, env_ids: torch.Tensor, cube_pos: torch.Tensor | None = None, target_pos: torch.Tensor | None = None
    ) -> None:
        """Start new episodes in ``env_ids`` (M,): robot at home, cube and target drawn (:meth:`sample_reset`) unless
        given as (M, 3) m."""
        m = int(env_ids.numel())
        if m == 0:
            return
        cube, target = self.sample_reset(env_ids)
        cube = cube if cube_pos is None else cube_pos.to(self.device, torch.float32)
        target = target if target_pos is None else target_pos.to(self.device, torch.float32)
        self.randomizer.resample_fields(env_ids)  # first: the cube's size sets its height
        if cube_pos is None:  # resting on the floor
            cube[:, 2] = self.randomizer.cube_half_height(env_ids).to(self.device)
        qpos = self._home_qpos.expand(m, -1).clone()
        qpos[:, self._cube_q : self._cube_q + 3] = cube
        qpos[:, self._cube_q + 3 : self._cube_q + 7] = torch.tensor([1.0, 0.0, 0.0, 0.0], device=self.device)
        ctrl = self.home_ctrl.expand(m, -1).clone()
        grasped = self._grasped_starts(env_ids, cube, qpos, ctrl) if cube_pos is None else None
        if self._home_applied is None:  # constant: the home targets' gravity compensation
            self._home_applied = self.action_term.applied_ctrl(self, self.home_ctrl[None])
        applied = self._home_applied.expand(m, -1).clone()
        if grasped is not None and bool(grasped.any()):
            applied[grasped] = self.action_term.applied_ctrl(self, ctrl[grasped])
        self.randomizer.reset_delay(env_ids, applied)
        self.sim.reset_envs(env_ids, qpos, torch.zeros(m, self.model.nv, device=self.device))
        self.ctrl[env_ids] = ctrl
        self.grasped_start[env_ids] = False if grasped is None else grasped
        self.actions[env_ids] = 0.0
        self.last_actions[env_ids] = 0.0
        self.target_pos[env_ids] = target
        self.cube_start[env_ids] = cube
        self.reached[env_ids] = False
        self.success_once[env_ids] = False
        self.success_step[env_ids] = -1
        self.episode.reset(env_ids)
        self.obs_history.reset(env_ids)

    def close(self) -> None:
        """Release the backend (and the renderer)."""
        if self.renderer is not None:
            self.renderer.close()
        self.sim.close()


def lift_frame(env: LiftEnv) -> torch.Tensor:
    """The env's current (N, D) float32 frame of its observation terms (D = 49 in ``delta``, 45 in ``ee_delta``, 3
    more with ``ee_observe_lead``), noised with the randomiser's scale, clipped to ±``OBS_CLIP``."""
    return compute_frame(env.observation_terms, env.state, env.randomizer.obs_noise_scale, env.rng, OBS_CLIP)


def action_delay(env: LiftEnv, ctrl: torch.Tensor) -> torch.Tensor:
    """The randomiser's actuation delay of ``ctrl`` (N, 8) position targets (rad, finger m): what the actuators see
    in this env step's physics substeps (:class:`~upright.managers.randomization.ActionDelay`; ``ctrl`` itself
    without a delay)."""
    return env.randomizer.delay.push(ctrl)


def latch_reached(env: LiftEnv, state: LiftState) -> None:
    """Latch :attr:`LiftEnv.reached` where the gripper site is within ``rewards.reach_threshold`` of the cube."""
    env.reached |= state.gripper_to_cube.norm(dim=-1) < env.cfg.rewards.reach_threshold
    state.reached = env.reached.clone()


def level_curriculum(env: LiftEnv, env_ids: torch.Tensor, state: LiftState) -> None:
    """Step the per-env curriculum levels of the (M,) envs whose episode ended, from their success (grasped starts
    do not move the levels)."""
    normal = env_ids[~env.grasped_start[env_ids]]
    env.curriculum.on_episode_end(normal, env.success_once[normal])
