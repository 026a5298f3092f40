"""``upright/G1Standup-v0``: the G1 standup task (:class:`~upright.tasks.standup.env.StandupEnv`) for gymnasium.

``gymnasium.make("upright/G1Standup-v0", terrain="ground", posture="supine")`` and
``gymnasium.make_vec("upright/G1Standup-v0", num_envs=N, vectorization_mode="vector_entry_point")``.

The MDP is the one ``python train.py task=standup recipe=host terrain=... posture=...`` trains on (HoST's: curricula,
domain randomisation and observation noise on), unless ``recipe=`` or ``overrides`` change it (``recipe="getup"``: the
get-up MDP, ``train.py``'s default since 2026-11-27):

* observation: (456,) float32 in [-100, 100]: 6 frames of 76 values, oldest first (HoST's actor observation,
  :mod:`upright.tasks.standup.observations`); the frames of the unactuated start (0.6 s; 1 s on wall and slope) are 0;
* action: (23,) float32 in [-action_clip, action_clip] (100 by default): PD targets q + β·a of the 23 policy joints;
  the actions of the unactuated start are ignored;
* reward: the sum of the 4 reward groups (task, regularization, style, post-task), which are in
  ``info["reward_groups"]``; ``train.py`` instead trains one critic per group and weights their normalised advantages;
* ``terminated``: a fall the terrain ends episodes on, or a diverged simulation; ``truncated``: the 10 s time limit
  (500 steps of 0.02 s).

``recipe="getup"`` gives the get-up MDP of ``train.py recipe=getup`` (:mod:`upright.tasks.standup.getup`): a (450,)
observation of the recipe's 6 frames of 75 values, oldest first (H·75 with ``overrides={"getup.actor_history": H}``),
actions PD targets q + 0.6·a, one reward group (``getup``), 6 s episodes that start standing or dropped (or, with
``overrides={"getup.stand_fraction": 0, "getup.fall_fraction": 0}``, from the posture) and are ``terminated`` at a
fall below 0.5 m after the pelvis passed 0.7 m (``getup.fall_termination``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch

from upright.gym_envs.core import BatchedTask, UprightEnv, UprightVectorEnv, check_overrides

RANDOMIZER_SEED_OFFSET = 1_000_003
"""``StandupEnv`` seeds its domain randomiser with ``seed + 1_000_003`` (``upright/tasks/standup/env.py``);
:meth:`reseed`
does the same (a test compares a reseeded env with a freshly built one)."""

RESERVED_OVERRIDES = ("num_envs", "terrain", "posture")
"""``overrides`` keys that are make kwargs of their own."""


class StandupTask(BatchedTask):
    """N standup envs on one batched simulation, and what the gymnasium wrappers need from them.

    Args:
        num_envs: N (>= 1).
        terrain: ground | platform | wall | slope (HoST's variants; sets the terrain's HoST values, as
            ``train.py terrain=...``).
        posture: supine | prone (wall: supine only).
        overrides: dotted ``env.*`` keys of :class:`~upright.tasks.standup.config.StandupEnvCfg`, e.g.
            ``{"curriculum.enabled": False, "domain_rand.enabled": False, "action_clip": 1.0}``.
        backend: ``native`` (MuJoCo on CPU threads) or ``mjx`` (MJX on JAX, GPUs).
        device: torch device of the env's tensors (``cuda:0`` with mjx on a GPU).
        num_threads: threads of the native backend (0: every CPU).

    Raises:
        ValueError: bad N, unknown terrain/posture/override/backend (the message names the valid ones).
        ModelNotFoundError: the G1 model cannot be found (set ``MENAGERIE_ROOT``).
    """

    def __init__(
        self,
        num_envs: int,
        *,
        terrain: str = "ground",
        posture: str = "supine",
        overrides: dict[str, Any] | None = None,
        backend: str = "native",
        device: str = "cpu",
        num_threads: int = 0,
        recipe: str | None = None,
    ):
        from upright.tasks.registry import make_env
        from upright.tasks.standup.config import SimCfg
        from upright.tasks.standup.rewards import REWARD_GROUPS
        from upright.tasks.standup.terrains import standup_env_cfg

        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        from upright.tasks.standup.config import StandupEnvCfg

        overrides = recipe_env_overrides(recipe) | dict(overrides or {})
        check_overrides(StandupEnvCfg(), overrides, RESERVED_OVERRIDES)
        self.cfg = standup_env_cfg(terrain, posture, num_envs=num_envs, **overrides)
        self.sim_cfg = SimCfg(backend=backend, num_threads=int(num_threads))
        self.env = make_env("standup", self.cfg, self.sim_cfg, device=device, seed=0)
        self._initial_state = _clone(self.env.state_dict())
        self.reward_group_names = tuple(getattr(self.env, "reward_group_names", REWARD_GROUPS))
        self.step_dt = float(self.env.step_dt)
        self._final_rng = torch.Generator(device="cpu").manual_seed(0)
        obs = self.env.get_observations()["actor"]
        _, _, d = self.observation_bounds()
        if tuple(obs.shape) != (num_envs, d):
            raise RuntimeError(
                f"StandupEnv returned observations of shape {tuple(obs.shape)}, expected {(num_envs, d)}"
                "; upright.gym_envs.standup is out of date with upright/tasks/standup"
            )

    @property
    def getup(self) -> bool:
        """Whether the env runs the get-up MDP (``recipe="getup"`` or ``overrides={"mdp": "getup", ...}``)."""
        return str(self.cfg.mdp) == "getup"

    def observation_bounds(self) -> tuple[float, float, int]:
        if self.getup:
            from upright.tasks.standup.getup import observations as gobs

            frame = sum(gobs.observation_dims(int(self.env.num_actions)))
            return -gobs.OBS_CLIP, gobs.OBS_CLIP, int(self.cfg.getup.actor_history) * frame
        from upright.tasks.standup.observations import HISTORY_LENGTH, OBS_CLIP

        return -OBS_CLIP, OBS_CLIP, HISTORY_LENGTH * int(self.env.num_obs_per_step)

    def action_bounds(self) -> tuple[float, float, int]:
        clip = float(self.cfg.action_clip)
        return -clip, clip, int(self.env.num_actions)

    def reseed(self, seed: int) -> None:
        """Make the env what ``StandupEnv(cfg, seed=seed)`` is right after construction, without recompiling the
        scene: both generators reseeded, the creation-time domain randomisation redrawn, curricula back to their
        initial state, every env reset."""
        env = self.env
        self._final_rng.manual_seed(seed)
        env.rng.manual_seed(seed)
        env.randomizer.reseed(seed + RANDOMIZER_SEED_OFFSET)  # creation-time fields: friction, restitution, masses, COM
        if self.getup:
            env.draw_encoder_bias(seed)
        env.load_state_dict(_clone(self._initial_state))
        env.pull_force = torch.zeros_like(env.pull_force)
        env.push_force = torch.zeros_like(env.push_force)
        env.reset_all()

    def reset_all(self) -> None:
        self.env.reset_all()

    def final_observations(self, before: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """The history the env would have shown after the last step, had it not reset: the previous observation's
        last 5 frames and the frame of ``env.last_state`` (zero during the unactuated start). Observation noise, if
        on, is drawn from a generator of its own (seeded by :meth:`reseed`), so the env's random streams are the
        same whether or not anyone reads final observations."""
        from upright.tasks.standup.observations import HISTORY_LENGTH, observation_frame

        env = self.env
        state = env.last_state
        scale = env.randomizer.obs_noise_scale(bool(env.cfg.obs_noise))
        if self.getup:  # the actor's terms on the state before the reset
            from upright.managers.observation import compute_frame
            from upright.tasks.standup.getup import observations as gobs

            frame = compute_frame(gobs.ACTOR_TERMS, state.as_measured(), scale, self._final_rng, gobs.OBS_CLIP)
            frames = int(self.cfg.getup.actor_history)
        else:
            frame = observation_frame(state, state.episode_step < env.cfg.unactuated_steps, scale, self._final_rng)
            frames = HISTORY_LENGTH
        history = before.view(before.shape[0], frames, -1)  # the previous H - 1 frames, then this one
        return torch.cat([history[done, 1:], frame[done].unsqueeze(1)], dim=1).flatten(1)

    def render_body(self) -> int:
        import mujoco

        return int(mujoco.mj_name2id(self.env.model, mujoco.mjtObj.mjOBJ_BODY, "pelvis"))


def _clone(state: Any) -> Any:
    if isinstance(state, torch.Tensor):
        return state.clone()
    if isinstance(state, dict):
        return {k: _clone(v) for k, v in state.items()}
    return state


def prepare_gl(render_mode: str | None) -> None:
    """Choose EGL/OSMesa for offscreen frames when this is the first import of MuJoCo (it reads ``MUJOCO_GL`` once)."""
    if render_mode == "rgb_array" and "mujoco" not in sys.modules:
        from upright.gl import choose_offscreen_gl

        choose_offscreen_gl()


def recipe_env_overrides(recipe: str | None) -> dict[str, Any]:
    """The ``env.*`` values (keys without ``env.``) of ``train.py``'s ``recipe=<name>`` for the standup task, e.g.
    ``recipe="getup"``: the get-up MDP. None: none.

    Raises:
        ValueError: an unknown recipe or another task's (the message lists the standup recipes).
    """
    if recipe is None:
        return {}
    from upright.conf import RECIPE_TASKS, recipe_env

    valid = sorted(name for name, task in RECIPE_TASKS.items() if task == "standup")
    if recipe not in valid:
        raise ValueError(f"recipe={recipe!r} is not a standup recipe; valid: {', '.join(valid)}")
    return recipe_env(recipe)  # without the recipe's env.num_envs: make(num_envs=) sets the gym env's


def make_env(
    *,
    terrain: str = "ground",
    posture: str = "supine",
    overrides: dict[str, Any] | None = None,
    backend: str = "native",
    device: str = "cpu",
    num_threads: int = 1,
    render_mode: str | None = None,
    render_size: tuple[int, int] = (640, 480),
    reward_weights: Sequence[float] | None = None,
    recipe: str | None = None,
) -> UprightEnv:
    """``gymnasium.make("upright/G1Standup-v0", **kwargs)``: one env (see the module doc and :class:`StandupTask`;
    ``num_threads`` defaults to 1 here). Render modes: ``rgb_array``, ``human``."""
    prepare_gl(render_mode)
    task = StandupTask(
        1,
        terrain=terrain,
        posture=posture,
        overrides=overrides,
        backend=backend,
        device=device,
        num_threads=num_threads,
        recipe=recipe,
    )
    return UprightEnv(task, render_mode=render_mode, render_size=render_size, reward_weights=reward_weights)


def make_vector_env(
    num_envs: int = 1,
    *,
    terrain: str = "ground",
    posture: str = "supine",
    overrides: dict[str, Any] | None = None,
    backend: str = "native",
    device: str = "cpu",
    num_threads: int = 0,
    as_torch: bool = False,
    render_mode: str | None = None,
    render_env_ids: Sequence[int] = (0,),
    render_size: tuple[int, int] = (640, 480),
    reward_weights: Sequence[float] | None = None,
    recipe: str | None = None,
) -> UprightVectorEnv:
    """``gymnasium.make_vec("upright/G1Standup-v0", num_envs=N, vectorization_mode="vector_entry_point", **kwargs)``:
    N envs on one batched simulation (see the module doc, :class:`StandupTask` and
    :class:`~upright.gym_envs.core.UprightVectorEnv`; ``as_torch=True`` returns torch tensors)."""
    prepare_gl(render_mode)
    task = StandupTask(
        num_envs,
        terrain=terrain,
        posture=posture,
        overrides=overrides,
        backend=backend,
        device=device,
        num_threads=num_threads,
        recipe=recipe,
    )
    return UprightVectorEnv(
        task,
        as_torch=as_torch,
        render_mode=render_mode,
        render_env_ids=render_env_ids,
        render_size=render_size,
        reward_weights=reward_weights,
    )
