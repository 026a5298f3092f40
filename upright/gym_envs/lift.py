"""``upright/PandaLift-v0``: the lift task (:class:`~upright.tasks.lift.env.LiftEnv`: a Franka Panda picks up a cube
and lifts it to a target, MuJoCo Playground's ``PandaPickCube``) for gymnasium.

``gymnasium.make("upright/PandaLift-v0")`` and ``gymnasium.make_vec("upright/PandaLift-v0", num_envs=N,
vectorization_mode="vector_entry_point")``. The MDP is the one ``python train.py task=lift`` trains on (curriculum and
domain randomisation on), unless ``overrides`` change it:

* observation: (49,) float32 in [-100, 100] (:data:`~upright.tasks.lift.observations.OBSERVATION_TERMS`);
* action: (8,) float32 in [-action_clip, action_clip] (1 by default): position-target increments of the 7 arm joints
  and the finger, ctrl ← clip(ctrl + 0.04·a, ctrl range);
* reward: the sum of the 3 reward groups (reach, lift, regularization), which are in ``info["reward_groups"]``;
* ``terminated``: the cube left the workspace, a joint left its range, or the simulation diverged; ``truncated``: the
  3 s time limit (150 steps of 0.02 s). Success does not end an episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from upright.gym_envs.core import BatchedTask, UprightEnv, UprightVectorEnv, check_overrides
from upright.gym_envs.standup import prepare_gl

RESERVED_OVERRIDES = ("num_envs",)


class LiftTask(BatchedTask):
    """N lift envs on one batched simulation (see :class:`~upright.gym_envs.standup.StandupTask` for the arguments;
    lift has no terrain or posture). A seeded reset rebuilds the env with that seed (the scene compiles in well under
    a second), so it is exactly ``LiftEnv(cfg, seed=seed)``.

    Raises:
        ValueError: bad N, an unknown override or backend (the message names the valid ones).
        ModelNotFoundError: the Panda model cannot be found (set ``MENAGERIE_ROOT``).
    """

    def __init__(
        self,
        num_envs: int,
        *,
        overrides: dict[str, Any] | None = None,
        backend: str = "native",
        device: str = "cpu",
        num_threads: int = 0,
    ):
        from upright.tasks.lift.config import LiftEnvCfg
        from upright.tasks.standup.config import SimCfg
        from upright.tasks.standup.terrains.settings import apply_overrides

        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        overrides = dict(overrides or {})
        check_overrides(LiftEnvCfg(), overrides, RESERVED_OVERRIDES)
        self.cfg = apply_overrides(LiftEnvCfg(num_envs=num_envs), overrides)
        self.sim_cfg = SimCfg(backend=backend, num_threads=int(num_threads))
        self._device = device
        self._final_rng = torch.Generator(device="cpu").manual_seed(0)
        self.env = self._build(0)
        self.reward_group_names = tuple(self.env.reward_group_names)
        self.step_dt = float(self.env.step_dt)

    def _build(self, seed: int):
        from upright.tasks.registry import make_env

        return make_env("lift", self.cfg, self.sim_cfg, device=self._device, seed=seed)

    def observation_bounds(self) -> tuple[float, float, int]:
        from upright.tasks.lift.observations import HISTORY_LENGTH, OBS_CLIP

        return -OBS_CLIP, OBS_CLIP, HISTORY_LENGTH * int(sum(self.env.observation_dims))

    def action_bounds(self) -> tuple[float, float, int]:
        clip = float(self.cfg.action_clip)
        return -clip, clip, int(self.env.num_actions)

    def reseed(self, seed: int) -> None:
        self._final_rng.manual_seed(seed)
        self.env.close()
        self.env = self._build(seed)

    def reset_all(self) -> None:
        self.env.reset_all()

    def final_observations(self, before: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """The previous observation's frames but the oldest, then the frame of ``env.last_state`` (noise, if on, from
        a generator of its own, as :meth:`upright.gym_envs.standup.StandupTask.final_observations`)."""
        from upright.managers.observation import compute_frame
        from upright.tasks.lift.observations import HISTORY_LENGTH, OBS_CLIP

        env = self.env
        frame = compute_frame(
            env.observation_terms, env.last_state, env.randomizer.obs_noise_scale, self._final_rng, OBS_CLIP
        )
        history = before.view(before.shape[0], HISTORY_LENGTH, -1)
        return torch.cat([history[done, 1:], frame[done].unsqueeze(1)], dim=1).flatten(1)

    def render_body(self) -> int:
        import mujoco

        return max(0, int(mujoco.mj_name2id(self.env.model, mujoco.mjtObj.mjOBJ_BODY, "link0")))


def make_env(
    *,
    overrides: dict[str, Any] | None = None,
    backend: str = "native",
    device: str = "cpu",
    num_threads: int = 1,
    render_mode: str | None = None,
    render_size: tuple[int, int] = (640, 480),
    reward_weights: Sequence[float] | None = None,
) -> UprightEnv:
    """``gymnasium.make("upright/PandaLift-v0", **kwargs)``: one env. Render modes: ``rgb_array``, ``human``."""
    prepare_gl(render_mode)
    task = LiftTask(1, overrides=overrides, backend=backend, device=device, num_threads=num_threads)
    return UprightEnv(task, render_mode=render_mode, render_size=render_size, reward_weights=reward_weights)


def make_vector_env(
    num_envs: int = 1,
    *,
    overrides: dict[str, Any] | None = None,
    backend: str = "native",
    device: str = "cpu",
    num_threads: int = 0,
    as_torch: bool = False,
    render_mode: str | None = None,
    render_env_ids: Sequence[int] = (0,),
    render_size: tuple[int, int] = (640, 480),
    reward_weights: Sequence[float] | None = None,
) -> UprightVectorEnv:
    """``gymnasium.make_vec("upright/PandaLift-v0", num_envs=N, vectorization_mode="vector_entry_point", **kwargs)``."""
    prepare_gl(render_mode)
    task = LiftTask(num_envs, overrides=overrides, backend=backend, device=device, num_threads=num_threads)
    return UprightVectorEnv(
        task,
        as_torch=as_torch,
        render_mode=render_mode,
        render_env_ids=render_env_ids,
        render_size=render_size,
        reward_weights=reward_weights,
    )
