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
    env = StandupEnv(
        StandupEnvCfg(num_envs=2, unactuated_steps=UNACTUATED, obs_noise=False), SimCfg(num_threads=1), seed=3
    )
    gen = torch.Generator().manual_seed(0)
    steps = []
    try:
        for _ in range(STEPS):
            actions = torch.randn(2, 23, generator=gen) * 0.5
            obs, _, dones, _ = env.step(actions)
            assert not dones.any()
            s = env.state
            steps.append(
                {
                    "q": s.q.clone(),
                    "dq": s.dq.clone(),
                    "gyro": s.base_ang_vel.clone(),
                    "quat": s.base_quat.clone(),
                    "action": s.action.clone(),
                    "gravity": s.projected_gravity.clone(),
                    "env_frame": compute_frame(OBSERVATION_TERMS, s, clip=OBS_CLIP),
                    "history_last": env.obs_history.buffer[:, -1].clone(),
                    "obs": obs["actor"].clone(),
                    "episode_step": env.episode_length_buf.clone(),
                }
            )
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
            frame = builder.frame(
                st["q"][i].numpy(),
                st["dq"][i].numpy(),
                st["gyro"][i].numpy(),
                st["quat"][i].numpy(),
                st["action"][i].numpy(),
            )
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
            frame = builder.frame(
                st["q"][i].numpy(),
                st["dq"][i].numpy(),
                st["gyro"][i].numpy(),
                st["quat"][i].numpy(),
                st["action"][i].numpy(),
            )
            flat = builder.push(frame)
            assert flat.shape == (1, 456) and flat.dtype == np.float32
            np.testing.assert_allclose(flat[0], st["obs"][i].numpy(), atol=1e-6, rtol=0)
            compared += 1
        assert compared == STEPS - UNACTUATED + 1


def test_a_getup_policy_file_gives_the_daemon_the_getup_actors_observation(tmp_path):
    """``recipe=getup``: the daemon reads the file's terms and scales (one frame, scale 1) and rebuilds the get-up
    env's actor observation from the robot's readings (encoder joint positions, pelvis IMU), to 1e-6."""
    from deploy_testlib import write_linear_policy

    from upright.tasks.registry import policy_metadata
    from upright.tasks.standup.getup.env import GetupEnv
    from upright.tasks.standup.randomization import DomainRandCfg

    cfg = StandupEnvCfg(num_envs=2, mdp="getup", obs_noise=False, domain_rand=DomainRandCfg(enabled=False))
    cfg.curriculum.enabled, cfg.curriculum.beta_init = False, 0.6
    cfg.getup.stand_fraction, cfg.getup.fall_fraction = 0.5, 0.5
    env = GetupEnv(cfg, SimCfg(num_threads=1), seed=3)
    try:
        path = write_linear_policy(tmp_path / "getup.onnx", 75, 23, policy_metadata("standup", env), gain=0.003)
        spec = load_policy_spec(path, g1_29dof())
        assert spec.history_length == 1 and spec.action_scale == pytest.approx(0.6)
        builder = ObservationBuilder(spec)
        gen = torch.Generator().manual_seed(0)
        for _ in range(8):
            obs, _, _, _ = env.step(torch.randn(2, 23, generator=gen) * 0.5)
            s = env.state
            for i in range(2):
                frame = builder.frame(
                    s.q[i].numpy(),
                    s.dq[i].numpy(),
                    s.base_ang_vel[i].numpy(),
                    s.base_quat[i].numpy(),
                    s.action[i].numpy(),
                )
                np.testing.assert_allclose(frame, obs["actor"][i].numpy(), atol=1e-6, rtol=0)
    finally:
        env.close()


def test_a_getup_policy_with_history_gives_the_daemon_the_stacked_actor_input(tmp_path):
    """``env.getup.actor_history=3``: the file says 3 frames and ``first_frame``; the daemon, reset at the episode's
    start and pushed once per tick, rebuilds the env's (1, 3·75) actor input to 1e-6, the first frame filling every
    slot and later frames shifting in oldest first."""
    from deploy_testlib import write_linear_policy

    from upright.tasks.registry import policy_metadata
    from upright.tasks.standup.getup.env import GetupEnv
    from upright.tasks.standup.randomization import DomainRandCfg

    cfg = StandupEnvCfg(num_envs=2, mdp="getup", obs_noise=False, domain_rand=DomainRandCfg(enabled=False))
    cfg.curriculum.enabled, cfg.curriculum.beta_init = False, 0.6
    cfg.getup.stand_fraction, cfg.getup.fall_fraction, cfg.getup.actor_history = 0.5, 0.5, 3
    env = GetupEnv(cfg, SimCfg(num_threads=1), seed=3)
    try:
        meta = policy_metadata("standup", env)
        assert meta["observation_history_length"] == 3 and meta["observation_history_start"] == "first_frame"
        path = write_linear_policy(tmp_path / "getup_h3.onnx", 3 * 75, 23, meta, gain=0.003)
        spec = load_policy_spec(path, g1_29dof())
        assert spec.history_length == 3 and spec.obs_dim == 225
        builders = [ObservationBuilder(spec) for _ in range(2)]
        obs, _ = env.reset()
        gen = torch.Generator().manual_seed(0)
        frames: list[list[np.ndarray]] = [[], []]
        for step in range(7):
            s = env.state
            for i, builder in enumerate(builders):
                if step == 0:
                    builder.reset()
                args = (s.q[i], s.dq[i], s.base_ang_vel[i], s.base_quat[i], s.action[i])
                frame = builder.frame(*(a.numpy() for a in args))
                frames[i].append(frame)
                flat = builder.push(frame)
                np.testing.assert_allclose(flat[0], obs["actor"][i].numpy(), atol=1e-6, rtol=0)
                expected = [frames[i][max(0, len(frames[i]) - 3 + k)] for k in range(3)]
                np.testing.assert_array_equal(flat[0], np.concatenate(expected))
            obs, _, dones, _ = env.step(torch.randn(2, 23, generator=gen) * 0.5)
            assert not dones.any()
    finally:
        env.close()
