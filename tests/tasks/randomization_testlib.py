"""Shared by the standup env's randomisation tests (``test_randomization.py``: domain randomisation, HoST spec §6)
and disturbance tests (``test_disturbances.py``: action delay, torque dropout, pushes, observation noise):
:func:`make_env`, a native standup env with observation noise off unless asked, one backend thread.
"""

from __future__ import annotations

from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv


def make_env(n: int, seed: int = 0, backend: str = "native", **kwargs) -> StandupEnv:
    kwargs.setdefault("obs_noise", False)
    return StandupEnv(StandupEnvCfg(num_envs=n, **kwargs), SimCfg(backend=backend, num_threads=1), seed=seed)
