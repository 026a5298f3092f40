"""The standup env (G1; ground, platform, wall or slope; supine or prone) on the env core
(:class:`upright.envs.ManagerBasedRlEnv`), over any :mod:`upright.sim` backend.

One env step (0.02 s) = the policy's action turned into PD targets p_target = q + β·a for the 23
policy joints (held joints target their default angle), held for ``decimation`` = 4 physics steps of
0.005 s, with the curriculum's upward pull on the torso when the pelvis is near upright; then state,
rewards (4 groups), terminations, curriculum trigger, resets and the next observation.

Terrain and posture (``cfg.terrain``, ``cfg.posture``; :mod:`upright.tasks.standup.terrains`): the scene
holds a row of sub-terrains, and every reset places the env on one drawn uniformly, in the terrain's
start pose. Wall and slope push the torso along -x during the unactuated phase
(``cfg.passive_push_force``); platform, wall and slope add height terminations.

The PD target is computed once per env step from the measured q and held while the motor-side PD
runs (MuJoCo ``position`` actuators), as on the real robot. HoST's Isaac Gym code recomputes
q + β·a at every physics substep instead; see the README's notes on HoST.
"""

from __future__ import annotations

import dataclasses

import mujoco
import torch

from upright.envs import ManagerBasedRlEnv
from upright.managers.episode import EpisodeStats
from upright.managers.observation import HistoryObservations, ObservationHistory
from upright.managers.reward import RewardManager
from upright.managers.termination import TerminationManager, TerminationTerm
from upright.managers.vlm_reward import with_vlm_reward
from upright.robots import g1
from upright.sim import make_sim
from upright.sim.options import PhysicsOptions
from upright.tasks.quat import quat_rotate_inverse
from upright.tasks.standup.actions import G1JointPositionAction
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.curriculum import StandupCurriculum
from upright.tasks.standup.events import actuation_randomization, pull_force_curriculum, torso_wrench
from upright.tasks.standup.foot_contact import FootContactReader
from upright.tasks.standup.observations import HISTORY_LENGTH, history_frame, observation_dims
from upright.tasks.standup.randomization import StandupRandomizer
from upright.tasks.standup.rewards import GROUPS, standup_reward_terms
from upright.tasks.standup.scene import standup_scene
from upright.tasks.standup.state import StandupState
from upright.tasks.standup.terminations import terrain_fall, velocity_explosion
from upright.tasks.standup.terrains import StartSampler, check_variant, terrain_layout
from upright.tasks.standup.terrains.settings import SUPINE_QUAT  # noqa: F401  (re-exported for benchmarks)


class StandupEnv(ManagerBasedRlEnv):
    """G1 standing up (HoST) on ``cfg.terrain`` from ``cfg.posture``, N envs in parallel.

    Args:
        cfg: env settings.
        sim_cfg: backend settings.
        device: torch device of observations, rewards and actions.
        seed: seed of the env's random generator (resets and noise).

    Raises:
        ModelNotFoundError: the G1 model cannot be found (set ``MENAGERIE_ROOT``).
        ValueError: a bad config value, e.g. an unknown terrain or posture (the message names it and the valid ones).
    """

    def __init__(self, cfg: StandupEnvCfg, sim_cfg: SimCfg | None = None, device: str = "cpu", seed: int = 0):
        sim_cfg = sim_cfg or SimCfg()
        if cfg.decimation < 1:
            raise ValueError(f"env.decimation must be >= 1, got {cfg.decimation}")
        self.action_term = G1JointPositionAction(cfg.action_mode, len(g1.POLICY_JOINT_NAMES))
        """Joint position targets, relative to the measured q or about the default pose (:mod:`.actions`)."""
        self.cfg = cfg
        self.sim_cfg = sim_cfg
        self.device = torch.device(device)
        self.rng = torch.Generator(device="cpu").manual_seed(seed)
        self.terrain = check_variant(cfg.terrain, cfg.posture)
        """HoST's settings of the terrain (:class:`~upright.tasks.standup.terrains.TerrainSpec`)."""
        self.terrain_layout = terrain_layout(cfg.terrain)
        """The sub-terrains in the model."""
        self.model = self._build_model(sim_cfg)
        self.sim = make_sim(sim_cfg.backend, self.model, cfg.num_envs, sim_cfg.num_threads, self.device)
        self.num_envs = cfg.num_envs
        self.step_dt = sim_cfg.timestep * cfg.decimation
        """Control period, s (0.02 s: 50 Hz)."""
        self.max_episode_length = round(cfg.episode_length_s / self.step_dt)
        self._init_indices()
        self.num_actions = len(g1.POLICY_JOINT_NAMES)
        self.num_obs_per_step = sum(observation_dims(self.num_actions))
        vlm = getattr(cfg, "vlm_reward", None)  # None: a config saved before the key existed
        terms, groups = with_vlm_reward(*self._reward_setup(), vlm, self.model, self.sim, self.device)
        self.reward_manager = RewardManager(terms, groups, dt=self.step_dt)
        self.reward_group_names = tuple(self.reward_manager.group_names)
        """Reward groups, in the column order of ``extras["reward_groups"]`` (one critic each)."""
        n, j, dev = self.num_envs, self.num_actions, self.device
        self.episode = EpisodeStats(n, dev)
        """Episode clock (:attr:`episode_length_buf`) and per-episode sums of the reward groups and terms."""
        self.truncated = torch.zeros(n, dtype=torch.bool, device=dev)
        """(N,) bool: episodes that ended at the last step at their time limit without a terminal state (set by
        :meth:`step`)."""
        self.curriculum = StandupCurriculum(cfg.curriculum, n, dev)
        """Per-env pull force and β (HoST curricula)."""
        self.beta = self.curriculum.beta
        """(N,) action bound β per env (the curriculum's tensor; evaluation and play fill it with a fixed β)."""
        self.pull_force = torch.zeros(n, device=dev)
        """(N,) upward pull on the torso applied during the last env step, N."""
        self.push_force = torch.zeros(n, device=dev)
        """(N,) push along world x on the torso applied during the last env step, N (wall/slope passive phase)."""
        self.actions = torch.zeros(n, j, device=dev)
        self.last_actions = torch.zeros(n, j, device=dev)
        self.last_last_actions = torch.zeros(n, j, device=dev)
        self.p_target = torch.zeros(n, j, device=dev)
        self.prev_dq = torch.zeros(n, j, device=dev)
        self.obs_history = ObservationHistory(n, self.num_obs_per_step, HISTORY_LENGTH, dev)
        """The last :data:`~upright.tasks.standup.observations.HISTORY_LENGTH` frames of each env, oldest first
        (``obs_history.buffer``: (N, 6, 76) float32)."""
        self.observation_manager = self._observation_manager()
        self.event_terms = (torso_wrench, actuation_randomization)
        self.termination_manager = TerminationManager(
            [
                TerminationTerm(
                    "velocity_explosion",
                    velocity_explosion,
                    {
                        "max_joint_vel": cfg.max_joint_vel,
                        "max_base_lin_vel": cfg.max_base_lin_vel,
                        "unactuated_steps": cfg.unactuated_steps,
                    },
                ),
                TerminationTerm(
                    "terrain_fall",
                    terrain_fall,
                    {"checks": self.terrain.termination, "unactuated_steps": cfg.unactuated_steps},
                ),
            ]
        )
        self.curriculum_terms = (pull_force_curriculum,)
        self.randomizer = StandupRandomizer(
            cfg.domain_rand,
            cfg.disturbance,
            self.sim,
            policy_actuators=self._policy_ids,
            root_body=int(self.model.body_rootid[self._torso_body]),
            torso_body=self._torso_body,
            decimation=cfg.decimation,
            step_dt=self.step_dt,
            seed=seed + 1_000_003,
        )
        """Domain randomisation and disturbances (creation-time fields are written here)."""
        self.reset_all()

    # ------------------------------------------------------------------ set-up
    def _build_model(self, sim_cfg: SimCfg) -> mujoco.MjModel:
        """The compiled scene of ``cfg.terrain`` (HoST's gains, with the terrain's Kp overrides)."""
        return standup_scene(PhysicsOptions(timestep=sim_cfg.timestep), self.cfg.terrain, self.terrain.kp_overrides)

    def _robot_info(self) -> g1.RobotInfo:
        """The G1's per-joint constants the env and the policy metadata use (HoST's gains)."""
        return g1.robot_info()

    def _reward_setup(self) -> tuple[list, tuple]:
        """(reward terms, reward groups) of HoST's recipe for the terrain and posture."""
        return standup_reward_terms(self.cfg.terrain, self.cfg.posture), GROUPS

    def _observation_manager(self):
        """Actor and critic: the same (N, 6·76) stacked history, oldest first (HoST)."""
        return HistoryObservations(history_frame, self.obs_history)

    def _init_indices(self) -> None:
        m = self.model
        info = self._robot_info()
        if self.terrain.kp_overrides:  # the compiled actuators' Kp (slope: hip 100, knee 150)
            info = dataclasses.replace(info, kp=m.actuator_gainprm[:, 0].astype(float).copy())
        self.robot = info
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name) for name in g1.JOINT_NAMES]
        if min(jids) < 0:
            raise ValueError("Scene lacks a G1 joint; the model file does not match upright.robots.g1")
        self._q_adr = torch.tensor(m.jnt_qposadr[jids], dtype=torch.long)
        self._v_adr = torch.tensor(m.jnt_dofadr[jids], dtype=torch.long)
        act_joint = m.actuator_trnid[:, 0]
        if list(act_joint) != jids:
            raise ValueError("Actuator order must follow upright.robots.g1.JOINT_NAMES")
        pol = torch.tensor(info.policy_joint_ids, dtype=torch.long)
        self._policy_ids = pol
        self._held_ids = torch.tensor(info.held_joint_ids, dtype=torch.long)
        self._pq_adr, self._pv_adr = self._q_adr[pol], self._v_adr[pol]
        dev = self.device
        self.default_pose = torch.tensor(info.default_pose, dtype=torch.float32, device=dev)
        self.reset_pose = self.default_pose.clone()
        """(29,) joint angles that resets scatter around, rad: the default pose with the terrain's overrides
        (platform/slope knees 1.0; wall hip pitch -1.5, knees 0, elbows 0)."""
        for name, angle in self.terrain.reset_joint_overrides:
            self.reset_pose[g1.JOINT_NAMES.index(name)] = angle
        self._starts = StartSampler(self.terrain_layout, self.terrain, self.cfg.posture, self.cfg.init_height, dev)
        """Draws each resetting env's sub-terrain and pelvis pose."""
        self.sub_terrain = torch.zeros(self.cfg.num_envs, dtype=torch.long, device=dev)
        """(N,) index of each env's current sub-terrain in :attr:`terrain_layout`."""
        rng = torch.tensor(m.jnt_range[jids], dtype=torch.float32, device=dev)
        self.joint_lower, self.joint_upper = rng[:, 0], rng[:, 1]
        soft_lower, soft_upper = g1.soft_position_limits(rng[:, 0], rng[:, 1])
        self.q_soft_lower, self.q_soft_upper = soft_lower[pol], soft_upper[pol]
        self.dq_limit = torch.tensor(info.velocity_limit, dtype=torch.float32, device=dev)[pol]

        def site(name: str) -> int:
            sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, name)
            if sid < 0:
                raise ValueError(f"Scene lacks site '{name}'")
            return sid

        sides = ("left", "right")
        self._torso_body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
        if self._torso_body < 0:
            raise ValueError("Scene lacks body 'torso_link' (the pull force acts on it)")
        self._head_site = site("head")
        self._feet_sites = [site(f"{s}_foot") for s in sides]
        self._knee_sites = [site(f"{s}_knee") for s in sides]
        self._hip_sites = [site(f"{s}_hip") for s in sides]
        self._ankle_sites = [site(f"{s}_ankle") for s in sides]
        npts = len(g1.ANKLE_POINTS_IN_FOOT)
        self._ankle_point_sites = [[site(f"{s}_ankle_point{k}") for k in range(npts)] for s in sides]

        def sensor(name: str) -> slice:
            sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, name)
            if sid < 0:
                raise ValueError(f"Scene lacks sensor '{name}'")
            adr = int(m.sensor_adr[sid])
            return slice(adr, adr + int(m.sensor_dim[sid]))

        self._gyro = sensor("imu_ang_vel")
        self._upvector = sensor("imu_upvector")
        self._foot_contact = FootContactReader(m)

    # ------------------------------------------------------------------ state
    def _read_state(self) -> StandupState:
        s = self.sim.state
        qpos, qvel, sites = s.qpos, s.qvel, s.site_xpos
        dq = qvel[:, self._pv_adr]
        quat = qpos[:, 3:7]
        return StandupState(
            q=qpos[:, self._pq_adr],
            dq=dq,
            ddq=(dq - self.prev_dq) / self.step_dt,
            tau=s.actuator_force[:, self._policy_ids],
            p_target=self.p_target.clone(),
            action=self.actions.clone(),
            last_action=self.last_actions.clone(),
            last_last_action=self.last_last_actions.clone(),
            q_soft_lower=self.q_soft_lower,
            q_soft_upper=self.q_soft_upper,
            dq_limit=self.dq_limit,
            base_pos=qpos[:, 0:3],
            base_quat=quat,
            base_lin_vel=quat_rotate_inverse(quat, qvel[:, 0:3]),
            base_ang_vel=s.sensordata[:, self._gyro],
            projected_gravity=-s.sensordata[:, self._upvector],
            head_pos=sites[:, self._head_site],
            feet_pos=sites[:, self._feet_sites],
            knee_pos=sites[:, self._knee_sites],
            hip_pos=sites[:, self._hip_sites],
            ankle_pos=sites[:, self._ankle_sites],
            ankle_points=sites[:, self._ankle_point_sites],
            feet_contact_force=self._foot_contact(s.sensordata),
            beta=self.beta.clone(),
            episode_step=self.episode_length_buf.clone(),
        )

    def _actuated(self) -> torch.Tensor:
        """(N,) bool: the envs whose action is applied this env step (past the unactuated start)."""
        return self.episode_length_buf >= self.cfg.unactuated_steps

    # ------------------------------------------------------------------ resets
    def reset_envs(self, env_ids: torch.Tensor) -> None:
        """Start new episodes in ``env_ids``: each on a random sub-terrain, in the terrain's start pose
        (``init_height`` above the surface, the posture's orientation) with randomised joint angles."""
        m = env_ids.numel()
        if m == 0:
            return
        cfg, dev = self.cfg, self.device
        (lo, hi), (olo, ohi) = self.randomizer.init_joint_ranges(cfg.init_joint_scale, cfg.init_joint_offset)
        scale = lo + (hi - lo) * torch.rand(m, self.robot.kp.size, generator=self.rng).to(dev)
        offset = olo + (ohi - olo) * torch.rand(m, self.robot.kp.size, generator=self.rng).to(dev)
        joints = (self.reset_pose * scale + offset).clamp(self.joint_lower, self.joint_upper)
        joints[:, self._held_ids] = self.default_pose[self._held_ids]
        qpos = torch.zeros(m, self.model.nq, device=dev)
        sub, qpos[:, 0:3], qpos[:, 3:7] = self._starts.sample(m, self.rng)
        qpos[:, self._q_adr] = joints
        qvel = torch.zeros(m, self.model.nv, device=dev)
        self.sub_terrain[env_ids] = sub
        self.sim.reset_envs(env_ids, qpos, qvel)
        self.randomizer.on_reset(env_ids, qpos[:, self._q_adr])
        self.episode.reset(env_ids)  # clock and reward sums to 0
        for buf in (self.actions, self.last_actions, self.last_last_actions, self.prev_dq):
            buf[env_ids] = 0.0
        self.obs_history.reset(env_ids)
        self.p_target[env_ids] = qpos[:, self._pq_adr]

    # ------------------------------------------------------------------ logging
    def _log_step(
        self, state: StandupState, group_rewards: torch.Tensor, dones: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Live metrics plus the per-step means of the finished episodes' reward sums and their outcomes."""
        log: dict[str, torch.Tensor] = {
            "Metrics/head_height": state.head_height,
            "Metrics/base_height": state.base_height,
            "Metrics/action_scale": state.beta,
            "Curriculum/pull_force_level": self.curriculum.force,
            "Curriculum/pull_force_applied": self.pull_force,
            "Curriculum/triggers": torch.tensor(float(self.curriculum.num_triggers)),
        }
        if dones.any():
            log |= self.episode.finished_means(dones)
            log["Metrics/final_head_height"] = state.head_height[dones]
            stood = (state.head_height > self.cfg.curriculum.threshold_height).float()
            log["Metrics/stood_from_posture"] = stood[dones]
            unaided = dones & (self.curriculum.force == 0)
            if unaided.any():
                log["Metrics/stood_from_posture_no_pull"] = stood[unaided]
        return log
