"""The daemon's observation builder reproduces the training env's observation vectors, to 1e-6, on the same states."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from upright.deploy.metadata import load_policy_spec
from upright.deploy.observation import ObservationBuilder, projected_gravity
from upright.deploy.robot_config import g1_29dof
from upright.managers.observation import compute_frame
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.observations import OBS_CLIP, OBSERVATION_TERMS

UNACTUATED = 3
STEPS = 14


@pytest.fixture(scope="module")
def recorded(linear_policy):
    """Roll a 2-env standup env with random actions; keep every state, frame and stacked observation."""
    env = StandupEnv(StandupEnvCfg(num_envs=2, unactuated_steps=UNACTUATED, obs_noise=False), SimCfg(num_threads=1), seed=3)
    gen = torch.Generator().manual_seed(0)
    steps = []
    try:
        for _ in range(STEPS):
            actions = torch.randn(2, 23, generator=gen) * 0.5
            obs, _, dones, _ = env.step(actions)
            assert not dones.any()
            s = env.state
            steps.append({
                "q": s.q.clone(), "dq": s.dq.clone(), "gyro": s.base_ang_vel.clone(), "quat": s.base_quat.clone(),
                "action": s.action.clone(), "gravity": s.projected_gravity.clone(),
                "env_frame": compute_frame(OBSERVATION_TERMS, s, clip=OBS_CLIP),
                "history_last": env.obs_history.buffer[:, -1].clone(),
                "obs": obs["actor"].clone(), "episode_step": env.episode_length_buf.clone(),
            })  # fmt: skip
    finally:
        env.close()
    return steps, load_policy_spec(linear_policy, g1_29dof())


def test_projected_gravity_matches_the_imu_sensor(recorded):
    steps, _ = recorded
    for st in steps:
        for i in range(2):
            np.testing.assert_allclose(projected_gravity(st["quat"][i].numpy()), st["gravity"][i].numpy(), atol=1e-6)


def test_frames_match_the_env_to_1e6(recorded):
    steps, spec = recorded
    builder = ObservationBuilder(spec)
    worst = 0.0
    for st in steps:
        for i in range(2):
            frame = builder.frame(st["q"][i].numpy(), st["dq"][i].numpy(), st["gyro"][i].numpy(), st["quat"][i].numpy(),
                                  st["action"][i].numpy())  # fmt: skip
            worst = max(worst, float(np.abs(frame - st["env_frame"][i].numpy()).max()))
            if st["episode_step"][i] >= UNACTUATED:  # the env zeroes unactuated frames
                np.testing.assert_allclose(frame, st["history_last"][i].numpy(), atol=1e-6, rtol=0)
    assert frame.shape == (76,) and worst <= 1e-6, worst


def test_stacked_history_matches_the_env_from_the_first_actuated_step(recorded):
    """POLICY-mode semantics: reset at entry, then one push per tick == the env's (1, 6·76) input, oldest first."""
    steps, spec = recorded
    for i in range(2):
        builder = ObservationBuilder(spec)
        compared = 0
        for st in steps:
            if st["episode_step"][i] < UNACTUATED:
                continue
            if st["episode_step"][i] == UNACTUATED:
                builder.reset()
            frame = builder.frame(st["q"][i].numpy(), st["dq"][i].numpy(), st["gyro"][i].numpy(), st["quat"][i].numpy(),
                                  st["action"][i].numpy())  # fmt: skip
            flat = builder.push(frame)
            assert flat.shape == (1, 456) and flat.dtype == np.float32
            np.testing.assert_allclose(flat[0], st["obs"][i].numpy(), atol=1e-6, rtol=0)
            compared += 1
        assert compared == STEPS - UNACTUATED + 1
