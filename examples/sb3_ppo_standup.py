"""Train Stable-Baselines3's PPO on ``upright/G1Standup-v0`` through gymnasium's vector API (a third-party consumer).

Everything upright-specific is the ``gymnasium.make_vec`` call; the training code is Stable-Baselines3's. SB3 has its
own ``VecEnv`` interface, so :class:`GymnasiumToSB3VecEnv` (about 40 lines) maps a ``gymnasium.vector.VectorEnv``
whose autoreset mode is ``SAME_STEP`` onto it: SB3 also resets an env inside the step that ends its episode and
expects the observation it ended on in ``infos[i]["terminal_observation"]``, with ``infos[i]["TimeLimit.truncated"]``
for time limits (SB3 then bootstraps the value of the truncated state).

    pip install stable-baselines3
    python examples/sb3_ppo_standup.py --num-envs 64 --iterations 10

This is a demonstration of the API, not upright's recipe: ``train.py`` trains the multi-critic PPO of HoST (one critic
per reward group, ``info["reward_groups"]`` here); SB3's PPO sees the summed reward only. A few iterations do not
teach the robot to stand.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecEnv, VecMonitor

import upright  # noqa: F401  (registers the upright/* ids)


class GymnasiumToSB3VecEnv(VecEnv):
    """A gymnasium ``VectorEnv`` in ``SAME_STEP`` autoreset mode as an SB3 ``VecEnv``.

    Raises:
        ValueError: the vector env uses another autoreset mode.
    """

    def __init__(self, venv: gymnasium.vector.VectorEnv):
        if venv.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError(f"needs autoreset_mode SAME_STEP, got {venv.metadata.get('autoreset_mode')!r}")
        self.venv = venv
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        seed = self._seeds[0]
        obs, _ = self.venv.reset(seed=seed)
        self._reset_seeds()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        obs, rewards, terminated, truncated, infos = self.venv.step(self._actions)
        dones = terminated | truncated
        out: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            out[i]["terminal_observation"] = infos["final_obs"][i]
            out[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return obs, rewards.astype(np.float32), dones, out

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return [getattr(self.venv, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        raise NotImplementedError("one batched simulation: call methods on .venv")

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False] * len(self._get_indices(indices))


def train(
    num_envs: int = 16,
    iterations: int = 2,
    n_steps: int = 32,
    seed: int = 0,
    overrides: dict[str, Any] | None = None,
    log=print,
) -> PPO:
    """Train SB3 PPO for ``iterations`` rollouts of ``n_steps`` steps per env; returns the model
    (``model.ep_info_buffer`` holds the finished episodes' returns and lengths, recorded by SB3's ``VecMonitor``)."""
    venv = gymnasium.make_vec(
        "upright/G1Standup-v0",
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        overrides=overrides or {},
        num_threads=1,
    )
    env = VecMonitor(GymnasiumToSB3VecEnv(venv))
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=n_steps,
        batch_size=min(256, num_envs * n_steps),
        n_epochs=2,
        learning_rate=3e-4,
        seed=seed,
        device="cpu",
        verbose=0,
    )
    t0 = time.perf_counter()
    model.learn(total_timesteps=iterations * n_steps * num_envs)
    wall = time.perf_counter() - t0
    episodes = list(model.ep_info_buffer)
    mean_len = np.mean([e["l"] for e in episodes]) if episodes else float("nan")
    log(
        f"{model.num_timesteps} env steps in {wall:.1f} s; {len(episodes)} finished episodes, "
        f"mean length {mean_len:.1f}"
    )
    env.close()
    return model


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--n-steps", type=int, default=32, help="steps per env per PPO rollout")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    train(a.num_envs, a.iterations, a.n_steps, a.seed)


if __name__ == "__main__":
    main()
