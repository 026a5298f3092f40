"""Fixtures of the viewer tests: the Menagerie path, a one-env standup env, small policy files."""

from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("MENAGERIE_ROOT", str((ROOT / ".." / "shared" / "menagerie").resolve()))


@pytest.fixture(scope="module")
def standup_env():
    """A one-env standup env (play settings: no observation noise, no domain randomisation)."""
    from upright.tasks.registry import make_env
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg
    from upright.tasks.standup.randomization import DomainRandCfg

    cfg = StandupEnvCfg(num_envs=1, obs_noise=False, domain_rand=DomainRandCfg(enabled=False))
    env = make_env("standup", cfg, SimCfg(num_threads=1), device="cpu", seed=0)
    yield env
    env.close()


@pytest.fixture(scope="module")
def standup_meta(standup_env):
    """The metadata train.py writes into a standup policy."""
    from upright.tasks.registry import policy_metadata

    return policy_metadata("standup", standup_env)
