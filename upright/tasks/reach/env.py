"""The reach env on the env core (:class:`upright.envs.ManagerBasedRlEnv`): a Franka Panda, N envs in parallel on any
:mod:`upright.sim` backend.

One env step (0.02 s): the action a ∈ [-1, 1]^8 moves the 8 position targets (7 arm joints, the finger) by
``action_scale``·a (:class:`~upright.tasks.lift.actions.PandaTargetAction`, the lift task's action term), held for 4
physics steps of 0.005 s; then the state, one reward group, the divergence check and the time limit, resets, and the
next observation. A reset puts the arm at the home pose + U(±``init_joint_noise``) rad with its targets there, and
draws the target uniformly in the config's box.
"""

from __future__ import annotations

import mujoco
import torch

from upright.envs import ManagerBasedRlEnv
from upright.managers.episode import EpisodeStats
from upright.managers.observation import HistoryObservations, ObservationHistory, compute_frame, term_dims
from upright.managers.reward import RewardManager
from upright.managers.termination import TerminationManager, TerminationTerm
from upright.robots import panda
from upright.sim import make_sim
from upright.tasks.lift.actions import PandaTargetAction
from upright.tasks.reach.config import ReachEnvCfg
from upright.tasks.reach.observations import OBS_CLIP, OBSERVATION_TERMS
from upright.tasks.reach.rewards import GROUP, reach_reward_terms
from upright.tasks.reach.scene import reach_scene
from upright.tasks.reach.state import ReachState
from upright.tasks.reach.terminations import non_finite


class ReachEnv(ManagerBasedRlEnv):
    """Panda reach, N envs.

    Args:
        cfg: env settings (:class:`~upright.tasks.reach.config.ReachEnvCfg`).
        sim_cfg: backend settings (``backend``, ``num_threads``, ``timestep``).
        device: torch device of observations, rewards and actions.
        seed: seed of the env's random generator (resets, targets, noise).

    Raises:
        ModelNotFoundError: the Panda model cannot be found (set ``MENAGERIE_ROOT``).
        ValueError: a bad config value (the message names the key and the fix).
    """

    def __init__(self, cfg: ReachEnvCfg, sim_cfg, device: str = "cpu", seed: int = 0):
        if cfg.decimation < 1 or cfg.num_envs < 1:
            raise ValueError(f"env.decimation and env.num_envs must be >= 1, got {cfg.decimation}, {cfg.num_envs}")
        if cfg.action_mode != "delta":
            raise ValueError(f"env.action_mode must be 'delta' for task=reach, got {cfg.action_mode!r}")
        for key in ("target_x", "target_y", "target_z"):
            lo, hi = getattr(cfg, key)
            if not lo <= hi:
                raise ValueError(f"env.{key} must be [low, high] with low <= high, got {list(getattr(cfg, key))}")
        self.cfg = cfg
        self.sim_cfg = sim_cfg
        self.device = torch.device(device)
        self.rng = torch.Generator(device="cpu").manual_seed(seed)
        self.model = reach_scene(sim_cfg.timestep)
        self.sim = make_sim(sim_cfg.backend, self.model, cfg.num_envs, sim_cfg.num_threads, self.device)
        self.num_envs = cfg.num_envs
        self.step_dt = sim_cfg.timestep * cfg.decimation
        """Control period, s (0.02)."""
        self.max_episode_length = int(round(cfg.episode_length_s / self.step_dt))
        self.action_term = PandaTargetAction(cfg, self.model, self.device)
        self.num_actions = self.action_term.num_actions
        self._init_indices()
        n, dev = self.num_envs, self.device
        self.reward_manager = RewardManager(reach_reward_terms(cfg.rewards), (GROUP,), dt=self.step_dt)
        self.reward_group_names = tuple(self.reward_manager.group_names)
        self.episode = EpisodeStats(n, dev)
        self.ctrl = self.home_ctrl.expand(n, -1).clone()
        """(N, 8) position targets in force, rad / m."""
        self.actions = torch.zeros(n, self.num_actions, device=dev)
        self.last_actions = torch.zeros(n, self.num_actions, device=dev)
        self.target_pos = torch.zeros(n, 3, device=dev)
        """(N, 3) the commanded point of each env's episode, world frame, m."""
        self.success_once = torch.zeros(n, dtype=torch.bool, device=dev)
        """(N,) the gripper site has been within ``success_threshold`` of the target at some env step."""
        self.state = self._read_state()
        self.observation_terms = OBSERVATION_TERMS
        self.observation_dims = term_dims(OBSERVATION_TERMS, self.state)
        self.obs_history = ObservationHistory(n, sum(self.observation_dims), 1, dev)
        self.observation_manager = HistoryObservations(reach_frame, self.obs_history)
        self.termination_manager = TerminationManager([TerminationTerm("non_finite", non_finite)])
        self.reset_all()

    def _init_indices(self) -> None:
        m = self.model
        jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in panda.JOINT_NAMES]
        site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, panda.GRIPPER_SITE)
        if min(jids) < 0 or site < 0:
            raise ValueError("Reach scene lacks a Panda joint or the gripper site; the Menagerie file does not match")
        self._q_adr = torch.tensor(m.jnt_qposadr[jids], dtype=torch.long)
        self._v_adr = torch.tensor(m.jnt_dofadr[jids], dtype=torch.long)
        self._gripper_site = site
        dev = self.device
        self.home_q = torch.tensor(panda.HOME_QPOS, dtype=torch.float32, device=dev)
        self.home_ctrl = torch.tensor(panda.HOME_CTRL, dtype=torch.float32, device=dev)
        jrange = torch.tensor(m.jnt_range[jids], dtype=torch.float32, device=dev)
        self.joint_lower, self.joint_upper = jrange[:, 0], jrange[:, 1]
        rng = torch.tensor(m.actuator_ctrlrange, dtype=torch.float32, device=dev)
        self.ctrl_lower, self.ctrl_upper = rng[:, 0], rng[:, 1]

    def _read_state(self) -> ReachState:
        s = self.sim.state
        return ReachState(
            q=s.qpos[:, self._q_adr],
            dq=s.qvel[:, self._v_adr],
            home_q=self.home_q,
            gripper_pos=s.site_xpos[:, self._gripper_site],
            target_pos=self.target_pos.clone(),
            action=self.actions.clone(),
            last_action=self.last_actions.clone(),
        )

    def reset_envs(self, env_ids: torch.Tensor) -> None:
        """Start new episodes in ``env_ids`` (M,): arm near home, a new target."""
        m = int(env_ids.numel())
        if m == 0:
            return
        cfg, dev = self.cfg, self.device
        noise = (2.0 * torch.rand(m, 7, generator=self.rng) - 1.0).to(dev) * float(cfg.init_joint_noise)
        qpos = torch.zeros(m, self.model.nq, device=dev)
        q = self.home_q.expand(m, -1).clone()
        q[:, :7] = (q[:, :7] + noise).clamp(self.joint_lower[:7], self.joint_upper[:7])
        qpos[:, self._q_adr] = q
        box = torch.tensor([cfg.target_x, cfg.target_y, cfg.target_z], dtype=torch.float32)
        target = box[:, 0] + (box[:, 1] - box[:, 0]) * torch.rand(m, 3, generator=self.rng)
        self.sim.reset_envs(env_ids, qpos, torch.zeros(m, self.model.nv, device=dev))
        ctrl = self.home_ctrl.expand(m, -1).clone()
        ctrl[:, :7] = q[:, :7]
        self.ctrl[env_ids] = ctrl
        self.target_pos[env_ids] = target.to(dev)
        self.actions[env_ids] = 0.0
        self.last_actions[env_ids] = 0.0
        self.success_once[env_ids] = False
        self.episode.reset(env_ids)
        self.obs_history.reset(env_ids)

    def _log_step(self, state: ReachState, group_rewards: torch.Tensor, dones: torch.Tensor) -> dict[str, torch.Tensor]:
        """The finished episodes' reward means, success (within ``success_threshold`` at some step) and final
        distance, and the live distance."""
        succ = state.position_error < self.cfg.success_threshold
        self.success_once |= succ
        log = self.episode.finished_means(dones)
        log["Metrics/position_error"] = state.position_error
        if bool(dones.any()):
            log["Metrics/success"] = self.success_once[dones].float()
            log["Metrics/final_position_error"] = state.position_error[dones]
        return log


def reach_frame(env: ReachEnv) -> torch.Tensor:
    """The env's current (N, 32) frame, noised (with ``env.obs_noise``) from the env's generator, clipped."""
    return compute_frame(OBSERVATION_TERMS, env.state, 1.0 if env.cfg.obs_noise else 0.0, env.rng, OBS_CLIP)
