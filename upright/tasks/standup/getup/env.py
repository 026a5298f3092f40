"""The get-up env (``env.mdp=getup``, set by ``recipe=getup``): the standup env's scene, step, domain randomisation,
evaluation and export, with the get-up MDP's gains, resets, observations and rewards.

What it changes in :class:`~upright.tasks.standup.env.StandupEnv` (the terms live in this package's files):

- **gains** (:mod:`.actions`): each policy joint's Kp/Kd from its motor's reflected inertia at
  ``env.getup.natural_freq_hz`` (10.8 Hz in ``recipe=getup``; mjlab_playground's 5 Hz is the config default), ζ = 2;
- **resets** (:mod:`.events`): standing (40 %, acting at once) or dropped from 0.8 m with a random orientation
  (60 %, then the ``env.unactuated_steps`` settle), or the HoST posture (the remainder; the evaluation's start);
- **observations** (:mod:`.observations`): pelvis gyro, projected gravity, joint positions (with an encoder bias),
  joint velocities and the last action, one frame or the last ``env.getup.actor_history`` frames; the critic gets
  one frame with the torso's gravity and the pelvis velocity;
- **rewards** (:mod:`.rewards`): one group, torso uprightness, torso and pelvis height, gated posture and
  regularisation;
- **terminations** (:mod:`.terminations`): optionally (``env.getup.fall_termination``) a fall below 0.5 m after the
  pelvis passed 0.7 m ends the episode.

The pull-force curriculum is off and β fixed (``recipe=getup`` sets ``env.curriculum``).
"""

from __future__ import annotations

import dataclasses

import mujoco
import torch

from upright.managers.observation import FrameObservations, compute_frame
from upright.managers.termination import TerminationManager, TerminationTerm
from upright.robots import g1
from upright.sim.options import PhysicsOptions
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.getup import events
from upright.tasks.standup.getup.actions import getup_robot_info, set_actuator_gains
from upright.tasks.standup.getup.config import validate_getup
from upright.tasks.standup.getup.observations import ACTOR_TERMS, CRITIC_TERMS, OBS_CLIP, GetupState
from upright.tasks.standup.getup.rewards import GROUP, getup_reward_terms
from upright.tasks.standup.getup.terminations import fell_after_rise
from upright.tasks.standup.scene import standup_spec

STOOD_HEIGHT_MARGIN = 0.02
"""``Metrics/stood``: the pelvis within this of its standing height, m (mjlab_playground ``getup_success``)."""


def add_getup_sensors(spec: mujoco.MjSpec) -> None:
    """Add the sensors the get-up terms read: ``torso_pos`` (framepos of body torso_link, world, m),
    ``torso_upvector`` (world z axis in the ``imu_in_torso`` site frame) and ``self_collision`` (``contact``
    sensor, the pelvis subtree against itself, strongest contact's force; native MuJoCo, MuJoCo Warp)."""
    s = spec.add_sensor(name="torso_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objname="torso_link")
    s.objtype = mujoco.mjtObj.mjOBJ_BODY
    s = spec.add_sensor(
        name="torso_upvector", type=mujoco.mjtSensor.mjSENS_FRAMEZAXIS, objname="world", refname="imu_in_torso"
    )
    s.objtype, s.reftype = mujoco.mjtObj.mjOBJ_BODY, mujoco.mjtObj.mjOBJ_SITE
    s = spec.add_sensor(name="self_collision", type=mujoco.mjtSensor.mjSENS_CONTACT, objname="pelvis", refname="pelvis")
    s.objtype, s.reftype = mujoco.mjtObj.mjOBJ_XBODY, mujoco.mjtObj.mjOBJ_XBODY
    s.intprm = [(1 << 0) | (1 << 1), 2, 1]  # data: found, force (contact frame); reduce maxforce; one contact


class GetupEnv(StandupEnv):
    """G1 getting up (``env.mdp=getup``), N envs in parallel; arguments, returns and errors as
    :class:`~upright.tasks.standup.env.StandupEnv`, plus a ValueError for bad ``env.getup.*`` settings."""

    def __init__(self, cfg: StandupEnvCfg, sim_cfg: SimCfg | None = None, device: str = "cpu", seed: int = 0):
        validate_getup(cfg.getup, cfg.terrain)
        gcfg = cfg.getup
        self._getup_info = getup_robot_info(gcfg.natural_freq_hz, gcfg.damping_ratio)
        n = cfg.num_envs
        self.encoder_bias = torch.zeros(n, len(g1.POLICY_JOINT_NAMES), device=device)
        """(N, J) constant encoder offset per env and policy joint, rad (0 with ``env.domain_rand.enabled=false``)."""
        self._cfg_for_bias = cfg
        self.draw_encoder_bias(seed)
        self.start_kind = torch.full((n,), events.POSTURE, dtype=torch.long, device=device)
        """(N,) start kind of each env's episode (:data:`~upright.tasks.standup.getup.events.STAND` etc.)."""
        self.peak_pelvis = torch.zeros(n, device=device)
        """(N,) highest pelvis z of the episode's actuated steps, m."""
        self.stood = torch.zeros(n, dtype=torch.bool, device=device)
        """(N,) the episode has reached ``Metrics/stood`` (torso upright, pelvis at its standing height)."""
        self.clock_set = torch.zeros(n, dtype=torch.bool, device=device)
        """(N,) the episode clock was set from outside (rsl-rl's ``init_at_random_ep_len``) since the last reset: the
        episode's start is unknown, so it stays out of the indicators."""
        self.stand_time = torch.zeros(n, device=device)
        """(N,) seconds a standing start has kept its pelvis above 0.5 m so far (frozen at its first fall)."""
        self.stand_fell = torch.zeros(n, dtype=torch.bool, device=device)
        self.host_above = torch.zeros(n, dtype=torch.bool, device=device)
        self.host_fell = torch.zeros(n, dtype=torch.bool, device=device)
        super().__init__(cfg, sim_cfg, device, seed)
        self.crit = self.terrain.success
        """HoST's success criterion of the terrain (ground: pelvis above 0.7 m, then never below 0.5 m)."""
        if gcfg.fall_termination:  # both buffers are updated in place (_log_step, reset_envs): the term reads them live
            params = {"rose": self.host_above, "unknown_start": self.clock_set, "fall_height": self.crit.fall_height}
            term = TerminationTerm("fell_after_rise", fell_after_rise, params)
            self.termination_manager = TerminationManager([*self.termination_manager.terms, term])

    def draw_encoder_bias(self, seed: int) -> None:
        """Draw :attr:`encoder_bias` from U(±``env.getup.encoder_bias``) with a generator seeded from ``seed`` (as at
        construction; zeros when domain randomisation is off)."""
        cfg = self._cfg_for_bias
        rng = torch.Generator().manual_seed(int(seed) + 2_000_003)
        bias = (2.0 * torch.rand(self.encoder_bias.shape, generator=rng) - 1.0) * float(cfg.getup.encoder_bias)
        self.encoder_bias.copy_(bias if cfg.domain_rand.enabled else torch.zeros_like(bias))

    # ------------------------------------------------------------------ set-up hooks
    def _build_model(self, sim_cfg: SimCfg) -> mujoco.MjModel:
        spec = standup_spec(PhysicsOptions(timestep=sim_cfg.timestep), self.cfg.terrain)
        set_actuator_gains(spec, self._getup_info.kp, self._getup_info.kd)
        add_getup_sensors(spec)
        return spec.compile()

    def _robot_info(self) -> g1.RobotInfo:
        return self._getup_info

    def _reward_setup(self) -> tuple[list, tuple]:
        return getup_reward_terms(self.cfg.getup, self.torso_target, self.pelvis_target), (GROUP,)

    def _init_indices(self) -> None:
        super()._init_indices()
        m = self.model

        def sensor(name: str) -> slice:
            sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, name)
            adr = int(m.sensor_adr[sid])
            return slice(adr, adr + int(m.sensor_dim[sid]))

        self._torso_pos, self._torso_up = sensor("torso_pos"), sensor("torso_upvector")
        sc = sensor("self_collision")
        self._self_force = slice(sc.start + 1, sc.start + 4)
        pose = {int(a): float(q) for a, q in zip(self._q_adr, self.default_pose.cpu())}
        self.pelvis_target, self.torso_target = events.standing_heights(m, pose, self._torso_body)
        """Heights of the pelvis and the torso_link origin standing in the default pose, m (the rewards' h*)."""
        self._default_q = self.default_pose[self._policy_ids]

    # ------------------------------------------------------------------ state and observations
    def _read_state(self) -> GetupState:
        base = super()._read_state()
        data = self.sim.state.sensordata
        return GetupState(
            **{f.name: getattr(base, f.name) for f in dataclasses.fields(base)},
            torso_pos=data[:, self._torso_pos],
            torso_projected_gravity=-data[:, self._torso_up],
            q_encoder=base.q + self.encoder_bias,
            default_q=self._default_q,
            self_collision_force=data[:, self._self_force].norm(dim=1),
        )

    def _observation_manager(self) -> FrameObservations:
        """Actor (N, H·75) and critic (N, 78) observations (:mod:`.observations`): the actor's last H =
        ``env.getup.actor_history`` frames, oldest first; the critic's current frame."""
        return FrameObservations(
            {"actor": actor_frame, "critic": critic_frame},
            history={"actor": int(self.cfg.getup.actor_history)},
            num_envs=self.num_envs,
            device=self.device,
        )

    # ------------------------------------------------------------------ resets
    def reset_envs(self, env_ids: torch.Tensor) -> None:
        """Start new episodes in ``env_ids``: standing, dropped or from the HoST posture (:mod:`.events`)."""
        m = env_ids.numel()
        if m == 0:
            return
        cfg, g, dev = self.cfg, self.cfg.getup, self.device
        kind = events.choose_start_kind(m, g.stand_fraction, g.fall_fraction, self.rng).to(dev)
        (lo, hi), (olo, ohi) = self.randomizer.init_joint_ranges(cfg.init_joint_scale, cfg.init_joint_offset)
        scale = lo + (hi - lo) * torch.rand(m, self.robot.kp.size, generator=self.rng).to(dev)
        offset = olo + (ohi - olo) * torch.rand(m, self.robot.kp.size, generator=self.rng).to(dev)
        joints = (self.reset_pose * scale + offset).clamp(self.joint_lower, self.joint_upper)
        qpos = torch.zeros(m, self.model.nq, device=dev)
        qvel = torch.zeros(m, self.model.nv, device=dev)
        sub, qpos[:, 0:3], qpos[:, 3:7] = self._starts.sample(m, self.rng)
        fall, stand = kind == events.FALL, kind == events.STAND
        k = int(fall.sum())
        if k:
            joints[fall] = events.fallen_joints(k, self.joint_lower, self.joint_upper, g.fall_joint_fraction, self.rng)
            qpos[fall, 2] = float(g.fall_height)
            qpos[fall, 3:7] = events.random_quaternions(k, self.rng).to(dev)
            qvel[fall, 0:6] = events.uniform_velocities(k, 6, g.fall_velocity, self.rng).to(dev)
            qvel[fall.nonzero().flatten()[:, None], self._v_adr] = events.uniform_velocities(
                k, self._v_adr.numel(), g.fall_velocity, self.rng
            ).to(dev)
        k = int(stand.sum())
        if k:
            joints[stand] = self.default_pose
            qpos[stand, 2] = self.pelvis_target + STOOD_HEIGHT_MARGIN
            qpos[stand, 3:7] = torch.tensor([1.0, 0.0, 0.0, 0.0], device=dev)
        joints[:, self._held_ids] = self.default_pose[self._held_ids]
        qpos[:, self._q_adr] = joints
        self.sub_terrain[env_ids] = sub
        self.sim.reset_envs(env_ids, qpos, qvel)
        self.randomizer.on_reset(env_ids, qpos[:, self._q_adr])
        self.episode.reset(env_ids)
        if getattr(self, "observation_manager", None) is not None:
            self.observation_manager.restart(env_ids)
        self.start_kind[env_ids] = kind
        for buf in (self.actions, self.last_actions, self.last_last_actions, self.prev_dq):
            buf[env_ids] = 0.0
        self.p_target[env_ids] = qpos[:, self._pq_adr]
        for buf in (
            self.peak_pelvis,
            self.stood,
            self.host_above,
            self.host_fell,
            self.clock_set,
            self.stand_time,
            self.stand_fell,
        ):
            buf[env_ids] = 0

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """(N,) int64 env steps of each env's current episode (setting it marks every env's episode as of unknown
        start, :attr:`clock_set`)."""
        return self.episode.length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.episode.length = value.to(self.device, torch.long)
        self.clock_set[:] = True

    def _actuated(self) -> torch.Tensor:
        """Standing starts act from their first step; the others after the ``env.unactuated_steps`` settle."""
        return (self.episode_length_buf >= self.cfg.unactuated_steps) | (self.start_kind == events.STAND)

    # ------------------------------------------------------------------ logging
    def _log_step(self, state, group_rewards, dones) -> dict[str, torch.Tensor]:
        """The standup env's log plus the get-up indicators over finished episodes that did not start standing (and
        whose clock was not set from outside, :attr:`clock_set`):
        ``Metrics/pelvis_passed_0.5`` (the pelvis rose above 0.5 m), ``Metrics/stood`` (torso upright and pelvis at
        its standing height at some step) and ``Metrics/host_success`` (HoST's ground criterion: pelvis above 0.7 m,
        then never below 0.5 m); over those that started standing, ``Metrics/standing_start_time_up`` (s until the
        pelvis first fell below 0.5 m, the episode's length if never)."""
        actuated = self._actuated()
        z = state.base_pos[:, 2]
        self.peak_pelvis = torch.where(actuated, torch.maximum(self.peak_pelvis, z), self.peak_pelvis)
        upright = state.torso_tilt_error < self.cfg.getup.success_tilt
        self.stood |= actuated & upright & (z > self.pelvis_target - STOOD_HEIGHT_MARGIN)
        self.host_fell |= self.host_above & (z < self.crit.fall_height)
        self.host_above |= actuated & (z > self.crit.stand_height)
        self.stand_fell |= z < 0.5
        up = (self.start_kind == events.STAND) & ~self.stand_fell
        self.stand_time = torch.where(up, self.episode_length_buf.float() * self.step_dt, self.stand_time)
        log = super()._log_step(state, group_rewards, dones)
        stand_done = dones & (self.start_kind == events.STAND) & ~self.clock_set
        if stand_done.any():
            log["Metrics/standing_start_time_up"] = self.stand_time[stand_done]
        done = dones & (self.start_kind != events.STAND) & ~self.clock_set
        if done.any():
            log["Metrics/pelvis_passed_0.5"] = (self.peak_pelvis[done] > 0.5).float()
            log["Metrics/stood"] = self.stood[done].float()
            log["Metrics/host_success"] = (self.host_above & ~self.host_fell)[done].float()
            log["Metrics/peak_pelvis_height"] = self.peak_pelvis[done]
        return log


def actor_frame(env: GetupEnv) -> torch.Tensor:
    """(N, 75) actor frame: the state as the robot measures it (encoder bias), noised from the env's generator."""
    scale = env.randomizer.obs_noise_scale(bool(env.cfg.obs_noise))
    return compute_frame(ACTOR_TERMS, env.state.as_measured(), scale, env.rng, OBS_CLIP)


def critic_frame(env: GetupEnv) -> torch.Tensor:
    """(N, 78) critic frame: the simulator's state, no noise."""
    return compute_frame(CRITIC_TERMS, env.state, 0.0, None, OBS_CLIP)
