"""What the viewers play: one env driven by a policy (:class:`PolicySession`) or a recording
(:class:`ReplaySession`), behind one small interface (:class:`Session`).

A session owns a display copy of the state (``model``, ``data``: an ``MjData`` with kinematics of env 0
computed) that renderers read, advances by one control period per :meth:`Session.step`, and reports
reward groups and head height for the plots.

Evaluation settings for policies: one env, β fixed (``beta=``, default the task's ``env.curriculum.beta_init``),
``env.action_mode`` the policy's (ONNX metadata or run config,
:func:`~upright.training.policy_loading.policy_action_mode`),
randomisation off (``randomize=false``: no observation noise and ``env.domain_rand.enabled=false``: the
nominal model, no action delay, resets at the exact default pose of the terrain's start posture).
``randomize=true`` keeps both, and the training reset distribution (joint angles scattered around the
default pose). ``env.disturbance.*`` overrides apply either way. A get-up episode ends only at its time-out (no
``env.getup.fall_termination``, a training device), so a fall after the rise stays on screen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
import yaml
from omegaconf import DictConfig, OmegaConf

from upright.viewer.trajectory import Trajectory, model_joint_names, save_trajectory
from upright.viewer.variants import Variant, apply_variant, find_variant, task_variants


class NonFiniteActionError(RuntimeError):
    """The policy returned NaN or inf; the message names the step (play stops there)."""


@dataclass
class StepInfo:
    """What one step produced (for plots and status)."""

    reward_groups: dict[str, float]
    """Per-step reward of each group (empty when a recording carries none)."""
    head_height: float
    """Head height above the feet, m (NaN when the model lacks the sites)."""
    done: bool
    """The episode ended at this step (the next frame starts a new one)."""


class TrajectoryRecorder:
    """Collects the played frames; :meth:`save` writes the ``upright-qpos-v1`` ``.npz``."""

    def __init__(self, model: mujoco.MjModel, dt: float, task: str, model_name: str, group_names: tuple[str, ...]):
        self.model, self.dt, self.task, self.model_name, self.group_names = model, dt, task, model_name, group_names
        self.qpos: list[np.ndarray] = []
        self.episode: list[int] = []
        self.time: list[float] = []
        self.head: list[float] = []
        self.groups: list[np.ndarray] = []

    def add(self, qpos: np.ndarray, episode: int, time: float, head: float, groups: dict[str, float]) -> None:
        self.qpos.append(np.array(qpos, np.float64))
        self.episode.append(episode)
        self.time.append(time)
        self.head.append(head)
        self.groups.append(np.array([groups.get(g, math.nan) for g in self.group_names], np.float64))

    def save(self, path: str, source: str = "") -> str:
        extras = {"head_height": np.array(self.head)}
        if self.group_names:
            extras["reward_groups"] = np.array(self.groups).reshape(len(self.groups), len(self.group_names))
            extras["reward_group_names"] = np.array(self.group_names, dtype=str)
        traj = Trajectory(
            np.array(self.qpos),
            self.dt,
            np.array(self.episode, np.int64),
            np.array(self.time),
            self.task,
            self.model_name,
            model_joint_names(self.model),
            extras,
        )
        return str(save_trajectory(path, traj, source))


class Session:
    """Common interface of what the viewers play."""

    model: mujoco.MjModel
    data: mujoco.MjData
    dt: float
    """Seconds per :meth:`step` (the control period)."""
    group_names: tuple[str, ...] = ()
    kind: str = "session"
    description: str = ""

    def __init__(self) -> None:
        self.episode = 0
        self.episode_time = 0.0
        self.total_time = 0.0
        self.steps = 0
        self.reset_count = 0
        self.episodes_done = 0
        self.finished = False
        """A recording reached its end (viewers stop or loop)."""
        self.last_info = StepInfo({}, math.nan, False)
        self.variants: tuple[Variant, ...] = ()
        self.variant_index = 0
        self.recorder: TrajectoryRecorder | None = None
        self._head_site = -1
        self._feet_sites: list[int] = []

    # ------------------------------------------------------------- display state
    def _init_display(self, model: mujoco.MjModel) -> None:
        self.model = model
        self.data = mujoco.MjData(model)
        site = lambda n: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, n)  # noqa: E731
        self._head_site = site("head")
        self._feet_sites = [s for s in (site("left_foot"), site("right_foot")) if s >= 0]
        free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        self.root_body = int(model.jnt_bodyid[free[0]]) if free else 1 if model.nbody > 1 else 0
        """Body the tracking camera follows (the free-floating base)."""

    def _show(self, qpos: np.ndarray, qvel: np.ndarray | None = None) -> None:
        self.data.qpos[:] = qpos
        self.data.qvel[:] = 0.0 if qvel is None else qvel
        mujoco.mj_forward(self.model, self.data)

    def display_head_height(self) -> float:
        """Head height above the mean foot height from the display state (NaN without the sites)."""
        if self._head_site < 0 or not self._feet_sites:
            return math.nan
        feet = np.mean([self.data.site_xpos[s, 2] for s in self._feet_sites])
        return float(self.data.site_xpos[self._head_site, 2] - feet)

    # ------------------------------------------------------------- interface
    def step(self) -> StepInfo:
        raise NotImplementedError

    def refresh_display(self) -> None:
        """Rewrite ``data`` from the session's state (after a window's own UI changed it)."""
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def set_variant(self, index: int) -> bool:
        """Switch posture/terrain variant; False when there is nothing to switch to."""
        return False

    @property
    def variant_name(self) -> str:
        return self.variants[self.variant_index].name if self.variants else ""

    def status(self) -> dict:
        """JSON-able snapshot: times, counters, qpos, last rewards and head height."""
        info = self.last_info
        return {
            "kind": self.kind,
            "description": self.description,
            "variant": self.variant_name,
            "episode": self.episode,
            "episode_time": round(self.episode_time, 6),
            "total_time": round(self.total_time, 6),
            "steps": self.steps,
            "reset_count": self.reset_count,
            "finished": self.finished,
            "qpos": [float(x) for x in self.data.qpos],
            "head_height": None if math.isnan(info.head_height) else info.head_height,
            "reward_groups": {k: (None if math.isnan(v) else v) for k, v in info.reward_groups.items()},
        }

    def start_recording(self, model_name: str, task: str) -> None:
        self.recorder = TrajectoryRecorder(self.model, self.dt, task, model_name, self.group_names)
        self._record()

    def _record(self) -> None:
        if self.recorder is not None:
            self.recorder.add(
                self.data.qpos,
                self.episode,
                self.episode_time,
                self.display_head_height(),
                self.last_info.reward_groups,
            )

    def close(self) -> None:
        pass


def _policy_recipe_env(mdp: str | None, cfg) -> dict:
    """The ``env.*`` values (keys without ``env.``) of the MDP ``mdp`` the policy was trained in, when the config runs
    the other one: a ``recipe=getup`` policy played with ``recipe=host`` gets the get-up recipe's env values; a HoST
    policy played with the default (``recipe=getup``) gets the task config's own values of every key a recipe sets.
    Empty when they agree or for tasks without ``env.mdp``."""
    from upright.conf import RECIPE_TASKS, recipe_env
    from upright.tasks.spec import task_spec

    running = OmegaConf.select(cfg, "env.mdp", default=None)
    if mdp is None or running is None or mdp == running:
        return {}
    if mdp == "getup":
        return recipe_env("getup")
    task = str(cfg.task_name)
    base = OmegaConf.structured(task_spec(task).env_config())
    keys = {key for r, t in RECIPE_TASKS.items() if t == task for key in recipe_env(r)}
    return {key: OmegaConf.select(base, key) for key in sorted(keys)}


def _play_env_cfg(env_cfg, variant: Variant, randomize: bool, recipe_env: dict | None = None):
    """One env of ``env_cfg`` in ``variant``, with ``recipe_env`` (``env.*`` values of the policy's MDP, keys without
    ``env.``) applied before play's own settings: no pull force, starts from the variant's posture, and (unless
    ``randomize``) no observation noise or domain randomisation."""
    cfg = apply_variant(env_cfg, variant)
    if isinstance(cfg, DictConfig):
        cfg = cfg.copy()
    for key, value in (recipe_env or {}).items():  # the policy's MDP, whatever the config says (either way round)
        OmegaConf.update(cfg, key, value, merge=False)
    cfg.num_envs = 1
    if "curriculum" in cfg:
        cfg.curriculum.enabled = False  # no pull force in play; β is held fixed by the session
    if "getup" in cfg:  # env.mdp=getup: from the variant's posture to the time-out, as evaluation (a fall stays shown)
        from upright.tasks.standup.getup.config import use_protocol_episodes

        use_protocol_episodes(cfg.getup)
    if not randomize:
        for key in ("obs_noise",):  # randomisation switches of the task config
            if key in cfg:
                setattr(cfg, key, False)
        if "domain_rand" in cfg:  # nominal model, no action delay, exact default start pose
            cfg.domain_rand.enabled = False
    return cfg


class PolicySession(Session):
    """One env of the task, stepped by a policy (evaluation settings, see the module doc).

    Args:
        cfg: the composed ``play`` config (task_name, env, sim, train, policy, beta, randomize, seed, device).

    Raises:
        PolicyLoadError: the policy cannot be loaded or does not fit the task (a policy of another task is refused
            before the env is built, naming its task: :func:`~upright.training.policy_loading.check_policy_task`).
        ValueError: unknown ``variant=``.
    """

    kind = "policy"

    def __init__(self, cfg: DictConfig):
        super().__init__()
        from upright.tasks.standup.rewards import REWARD_GROUPS
        from upright.training.policy_loading import (
            check_policy_task,
            policy_action_mode,
            policy_env_settings,
            policy_mdp,
        )
        from upright.viewer.policy import load_policy

        self.cfg = cfg
        self.task_name = str(cfg.task_name)
        check_policy_task(str(cfg.policy), self.task_name)  # a policy of another task, refused before any env
        self.variants = task_variants(self.task_name)
        self.variant_index = find_variant(self.task_name, cfg.get("variant"), cfg.env)
        self._keep_cfg_env = cfg.get("variant") is None
        """Until a switch, build the env from ``cfg.env`` as given (it already is the variant that
        ``terrain=``/``posture=`` chose, with any ``env.*`` overrides of the command line)."""
        beta = (
            cfg.beta if cfg.get("beta") is not None else OmegaConf.select(cfg, "env.curriculum.beta_init", default=None)
        )
        self.beta = None if beta is None else float(beta)
        """Fixed action scale β of tasks that have one (standup); None for tasks without (lift)."""
        self.randomize = bool(cfg.get("randomize", False))
        self.recipe_env = _policy_recipe_env(policy_mdp(str(cfg.policy)), cfg) | policy_env_settings(str(cfg.policy))
        """``env.*`` values of the recipe whose MDP the policy was trained in (``recipe=getup``) and the motor gains it
        was trained with and its actor history (:func:`~upright.training.policy_loading.policy_env_settings`), else
        empty."""
        if cfg.get("beta") is None and "curriculum.beta_init" in self.recipe_env:
            self.beta = float(self.recipe_env["curriculum.beta_init"])
        mdp = self.recipe_env.get("mdp", OmegaConf.select(cfg, "env.mdp", default=None))
        if mdp == "getup" and self.variants:  # the get-up MDP is written for flat ground only: switch among those
            current = self.variants[self.variant_index].name
            self.variants = [v for v in self.variants if v.terrain == "ground"] or self.variants
            self.variant_index = next((i for i, v in enumerate(self.variants) if v.name == current), 0)
        self.action_mode = policy_action_mode(str(cfg.policy))
        """The policy's ``env.action_mode`` (:func:`~upright.training.policy_loading.policy_action_mode`; None: the
        config's)."""
        configured = OmegaConf.select(cfg, "env.action_mode", default=None)  # None: a task without the setting (lift)
        if configured is None:
            self.action_mode = None
        if self.action_mode is not None and self.action_mode != configured:  # the task's default differs: say so
            print(f"info: env.action_mode={self.action_mode}, as the policy file says", flush=True)
        self.env = self._make_env()
        default_groups = tuple(REWARD_GROUPS) if self.task_name == "standup" else ()
        self.group_names = tuple(getattr(self.env, "reward_group_names", default_groups))
        self.policy = load_policy(
            str(cfg.policy),
            self.env,
            self.task_name,
            cfg.get("train"),
            str(cfg.device),
            int(cfg.seed),
            instruction=cfg.get("instruction"),
        )
        self.description = (
            f"policy={cfg.policy} task={self.task_name}"
            + (f" β={self.beta:g}" if self.beta is not None else "")
            + ("" if not self.randomize else " (randomisation on)")
        )
        exported = getattr(self.policy, "metadata", {}).get("action_scale")
        if (
            exported is not None
            and self.beta is not None
            and not math.isclose(float(exported), self.beta, abs_tol=1e-6)
        ):
            print(
                f"note: the policy was exported with action_scale {exported:g}; playing with β={self.beta:g} "
                "(beta=...)",
                flush=True,
            )
        self._init_display(self.env.model)
        self.dt = float(self.env.step_dt)
        self._sync_display()

    def _make_env(self):
        from upright.tasks.registry import make_env

        cfg = self.cfg
        variant = self.variants[self.variant_index]
        if self._keep_cfg_env:
            variant = Variant(variant.name, variant.posture, variant.terrain)  # no overrides
        env_cfg = _play_env_cfg(cfg.env, variant, self.randomize, self.recipe_env)
        if self.action_mode is not None:  # actions mean what they meant in training
            env_cfg.action_mode = self.action_mode
        if self.action_mode == "ee_delta":  # and the ee step and workspace floor too
            from upright.training.lift_evaluate import policy_action_overrides

            for override in policy_action_overrides(str(cfg.policy))[1:]:
                key, value = override.removeprefix("env.").split("=", 1)
                env_cfg[key] = yaml.safe_load(value)  # null, a float or a bool
        sim_cfg = cfg.sim.copy() if isinstance(cfg.sim, DictConfig) else OmegaConf.structured(cfg.sim)
        sim_cfg.num_threads = 1
        env = make_env(self.task_name, env_cfg, sim_cfg, device=str(cfg.device), seed=int(cfg.seed))
        self._fix_beta(env)
        return env

    def _fix_beta(self, env) -> None:
        """Hold the action scale β fixed (tasks with a β curriculum only)."""
        if self.beta is not None and hasattr(env, "beta"):
            env.beta.fill_(self.beta)

    def refresh_display(self) -> None:
        self._sync_display()

    def _sync_display(self) -> None:
        s = self.env.sim.state
        target = getattr(self.env, "target_pos", None)  # lift: draw the target marker (a mocap body) where it is
        if target is not None and self.model.nmocap > 0:
            self.data.mocap_pos[0] = target[0].detach().cpu().double().numpy()
        self._show(s.qpos[0].detach().cpu().double().numpy(), s.qvel[0].detach().cpu().double().numpy())

    def step(self) -> StepInfo:
        """One control step of the policy.

        Raises:
            NonFiniteActionError: the policy's action has NaN or inf (nothing is applied to the env).
        """
        env = self.env
        obs = env.get_observations()["actor"]
        with torch.no_grad():
            actions = self.policy(obs)
        if not bool(torch.isfinite(actions).all()):
            bad = int((~torch.isfinite(actions)).sum())
            raise NonFiniteActionError(
                f"the policy's action has NaN/inf ({bad} of {actions.numel()} values) at step {self.steps + 1} "
                f"(t = {self.total_time + self.dt:.2f} s, episode {self.episode}, "
                f"observation {'finite' if bool(torch.isfinite(obs).all()) else 'NaN/inf too'}); stopping"
            )
        self._fix_beta(env)
        _, _, dones, extras = env.step(actions)
        groups = {g: float(extras["reward_groups"][0, i]) for i, g in enumerate(self.group_names)}
        head = extras.get("episode", {}).get("Metrics/head_height")
        head = float(head[0]) if head is not None else math.nan
        done = bool(dones[0])
        self.steps += 1
        self.total_time += self.dt
        if done:
            self.episode += 1
            self.episodes_done += 1
            self.episode_time = 0.0
        else:
            self.episode_time += self.dt
        self.last_info = StepInfo(groups, head, done)
        self._sync_display()
        self._record()
        return self.last_info

    def reset(self) -> None:
        """Start a new episode now (the env's reset: supine, scattered joint angles)."""
        self.env.reset_all()
        self.episode += 1
        self.episode_time = 0.0
        self.reset_count += 1
        self.last_info = StepInfo({}, math.nan, False)
        self._sync_display()
        self._record()

    def set_variant(self, index: int) -> bool:
        index %= len(self.variants)
        if len(self.variants) < 2:
            return False
        self.variant_index = index
        self._keep_cfg_env = False
        old = self.env
        self.env = self._make_env()
        old.close()
        self._init_display(self.env.model)
        self.episode += 1
        self.episode_time = 0.0
        self._sync_display()
        return True

    def close(self) -> None:
        self.env.close()


class ReplaySession(Session):
    """Plays a :class:`~upright.viewer.trajectory.Trajectory` frame by frame (no physics, no policy)."""

    kind = "replay"

    def __init__(self, traj: Trajectory, model: mujoco.MjModel, description: str = ""):
        super().__init__()
        self.traj = traj
        self.dt = float(traj.dt)
        self.description = description or f"replay ({len(traj)} frames)"
        names = traj.extras.get("reward_group_names")
        self.group_names = tuple(str(n) for n in names) if names is not None else ()
        self._init_display(model)
        self.index = 0
        self._show_frame()

    def refresh_display(self) -> None:
        self._show(self.traj.qpos[self.index])

    def _show_frame(self) -> None:
        t = self.traj
        self._show(t.qpos[self.index])
        self.episode = int(t.episode[self.index])
        self.episode_time = float(t.time[self.index])

    def step(self) -> StepInfo:
        t = self.traj
        if self.index + 1 >= len(t):
            self.finished = True
            return self.last_info
        self.index += 1
        self.steps += 1
        self.total_time += self.dt
        self._show_frame()
        done = self.index + 1 < len(t) and t.episode[self.index + 1] != t.episode[self.index]
        if done:
            self.episodes_done += 1
        groups = {}
        if self.group_names and "reward_groups" in t.extras:
            row = t.extras["reward_groups"][self.index]
            groups = {g: float(row[i]) for i, g in enumerate(self.group_names)}
        head = float(t.extras["head_height"][self.index]) if "head_height" in t.extras else self.display_head_height()
        self.last_info = StepInfo(groups, head, bool(done) or self.index + 1 >= len(t))
        self._record()
        return self.last_info

    def reset(self) -> None:
        """Back to the first frame."""
        self.index = 0
        self.finished = False
        self.reset_count += 1
        self.last_info = StepInfo({}, math.nan, False)
        self._show_frame()
        self._record()


def make_session(cfg: DictConfig) -> Session:
    """The session ``play.py``'s config asks for: replay if ``replay=`` is set, else the policy.

    Raises:
        ValueError: neither or both of ``policy=`` and ``replay=``; PolicyLoadError / TrajectoryError as raised.
    """
    from upright.viewer.trajectory import load_replay

    if cfg.get("policy") and cfg.get("replay"):
        raise ValueError("give either policy=... or replay=..., not both")
    if cfg.get("replay"):
        model, default = _task_model(cfg)
        traj = load_replay(str(cfg.replay), model, default).select_episode(cfg.get("replay_episode"))
        desc = f"replay={cfg.replay}" + (f" ({traj.note})" if traj.note else "")
        return ReplaySession(traj, model, desc)
    if not cfg.get("policy"):
        raise ValueError(
            "nothing to play: give policy=<run dir | checkpoint .pt | .onnx | zero | random> "
            "or replay=<.npz | dataset folder>"
        )
    return PolicySession(cfg)


def _task_model(cfg: DictConfig) -> tuple[mujoco.MjModel, np.ndarray]:
    """The task's compiled model and its default qpos (robot default pose), from a one-env instance."""
    from upright.tasks.registry import make_env

    variant = task_variants(str(cfg.task_name))[find_variant(str(cfg.task_name), cfg.get("variant"), cfg.env)]
    env_cfg = _play_env_cfg(cfg.env, variant, randomize=False)
    sim_cfg = cfg.sim.copy()
    sim_cfg.num_threads = 1
    env = make_env(str(cfg.task_name), env_cfg, sim_cfg, device="cpu", seed=int(cfg.seed))
    try:
        default = env.model.qpos0.copy()
        q_adr, pose = getattr(env, "_q_adr", None), getattr(env, "default_pose", None)
        if q_adr is not None and pose is not None:
            default[q_adr.numpy()] = pose.cpu().numpy()
        return env.model, default
    finally:
        env.close()
