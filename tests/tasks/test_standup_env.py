"""StandupEnv on real MuJoCo physics: observation layout, passive start, relative PD targets, episodes."""

from __future__ import annotations

import math

import pytest
import torch

from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.observations import HISTORY_LENGTH


@pytest.fixture(scope="module")
def env():
    return StandupEnv(StandupEnvCfg(num_envs=4, obs_noise=False), SimCfg(num_threads=1), seed=0)


def test_observation_is_six_frames_of_76(env):
    obs = env.get_observations()
    assert obs["actor"].shape == (4, HISTORY_LENGTH * 76) == (4, 456)
    torch.testing.assert_close(obs["actor"], obs["critic"])


def test_reset_is_supine_and_passive_phase_zeroes_obs_and_actions():
    env = StandupEnv(StandupEnvCfg(num_envs=3, obs_noise=False), SimCfg(num_threads=1), seed=1)
    g = env.state.projected_gravity
    # lying on the back: gravity points along the body's -x... i.e. out of the chest, |g_x| ~ 1
    assert torch.all(g[:, 0].abs() > 0.99), g
    q0 = env.state.q.clone()
    for _ in range(env.cfg.unactuated_steps - 1):
        obs, *_ = env.step(torch.ones(3, 23))
        assert torch.count_nonzero(obs["actor"]) == 0
        assert torch.count_nonzero(env.actions) == 0  # actions ignored while unactuated
    obs, *_ = env.step(torch.ones(3, 23))  # the 30th step: the next action is actuated
    assert torch.count_nonzero(obs["actor"][:, -76:]) > 0 and torch.count_nonzero(obs["actor"][:, :-76]) == 0
    assert not torch.equal(env.state.q, q0)  # the robot fell and settled


def test_pd_target_is_current_q_plus_beta_times_action():
    env = StandupEnv(StandupEnvCfg(num_envs=2, obs_noise=False, unactuated_steps=0), SimCfg(num_threads=1), seed=2)
    env.beta[:] = torch.tensor([1.0, 0.25])
    q_before = env.state.q.clone()
    a = torch.full((2, 23), 0.1)
    env.step(a)
    torch.testing.assert_close(env.p_target, q_before + env.beta[:, None] * a)


def test_observation_frame_layout_and_scales():
    env = StandupEnv(StandupEnvCfg(num_envs=2, obs_noise=False, unactuated_steps=0), SimCfg(num_threads=1), seed=3)
    a = torch.rand(2, 23) * 0.2
    obs, *_ = env.step(a)
    frame, s = obs["actor"][:, -76:], env.state
    torch.testing.assert_close(frame[:, 0:3], 0.25 * s.base_ang_vel)
    torch.testing.assert_close(frame[:, 3:6], s.projected_gravity)
    torch.testing.assert_close(frame[:, 6:29], s.q)
    torch.testing.assert_close(frame[:, 29:52], 0.05 * s.dq)
    torch.testing.assert_close(frame[:, 52:75], a)
    torch.testing.assert_close(frame[:, 75], env.beta)
    assert torch.allclose(s.projected_gravity.norm(dim=1), torch.ones(2), atol=1e-5)


def test_episode_times_out_after_10_s_and_resets():
    cfg = StandupEnvCfg(num_envs=2, obs_noise=False, episode_length_s=0.2)  # 10 env steps
    env = StandupEnv(cfg, SimCfg(num_threads=1), seed=4)
    assert env.max_episode_length == 10 and math.isclose(env.step_dt, 0.02)
    assert StandupEnv.__init__  # default episode: 500 steps
    for _ in range(10):
        _, _, dones, extras = env.step(torch.zeros(2, 23))
    assert dones.tolist() == [1, 1] and extras["time_outs"].all()
    assert env.episode_length_buf.tolist() == [0, 0]
    assert env.state.base_height.min() > 0.45  # back at the reset height
    assert "Episode_Reward/group/task" in extras["episode"]


def test_default_episode_is_500_steps(env):
    assert env.max_episode_length == 500


def test_reward_groups_and_time_outs_in_extras(env):
    _, rewards, dones, extras = env.step(torch.zeros(4, 23))
    assert extras["reward_groups"].shape == (4, 4)
    torch.testing.assert_close(rewards, extras["reward_groups"].sum(1))
    assert extras["time_outs"].dtype == torch.bool and dones.shape == (4,)
