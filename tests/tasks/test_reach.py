"""The reach task (upright/tasks/reach) on real MuJoCo physics: its spec, env, terms, metadata and train.py."""

from __future__ import annotations

import pytest
import torch

from upright.tasks.reach.config import ReachEnvCfg
from upright.tasks.reach.env import ReachEnv
from upright.tasks.reach.observations import ROBOT_MEASURABLE_TERMS
from upright.tasks.registry import make_env, policy_metadata
from upright.tasks.standup.config import SimCfg


@pytest.fixture(scope="module")
def env():
    return ReachEnv(ReachEnvCfg(num_envs=4, obs_noise=False), SimCfg(num_threads=1), seed=0)


def test_built_by_the_registry_with_its_metadata(env):
    other = make_env("reach", ReachEnvCfg(num_envs=2), SimCfg(num_threads=1), "cpu", 1)
    assert isinstance(other, ReachEnv) and other.get_observations()["actor"].shape == (2, 32)
    meta = policy_metadata("reach", env)
    assert meta["task"] == "reach" and meta["action_mode"] == "delta" and len(meta["joint_names"]) == 8
    assert meta["privileged_inputs"] == [] and set(meta["observation_names"]) == set(ROBOT_MEASURABLE_TERMS)


def test_targets_lie_in_the_box_and_resets_start_near_home():
    env = ReachEnv(ReachEnvCfg(num_envs=256, obs_noise=False), SimCfg(num_threads=1), seed=2)
    box = torch.tensor([env.cfg.target_x, env.cfg.target_y, env.cfg.target_z])
    assert bool(((env.target_pos >= box[:, 0]) & (env.target_pos <= box[:, 1])).all())
    assert float(env.target_pos[:, 1].std()) > 0.05  # drawn, not fixed
    err = env.state.q[:, :7] - env.home_q[:7]
    assert float(err.abs().max()) <= env.cfg.init_joint_noise + 1e-5


def test_reward_is_highest_at_the_target_and_episodes_time_out(env):
    env.reset_all()
    env.target_pos[:] = env.state.gripper_pos  # commanded point = where the gripper is
    env.target_pos[2:] += torch.tensor([0.0, 0.0, 0.3])  # envs 2, 3: 0.3 m away
    env.state = env._read_state()
    _, reward, dones, extras = env.step(torch.zeros(4, 8))
    assert float(reward[:2].min()) > float(reward[2:].max())
    for _ in range(env.max_episode_length - 1):
        _, _, dones, extras = env.step(torch.zeros(4, 8))
    assert dones.tolist() == [1, 1, 1, 1] and extras["time_outs"].all()
    assert extras["episode"]["Metrics/success"].tolist() == [1.0, 1.0, 0.0, 0.0]


def test_bad_config_is_one_line(env):
    with pytest.raises(ValueError, match="env.action_mode must be 'delta' for task=reach"):
        ReachEnv(ReachEnvCfg(num_envs=1, action_mode="ee_delta"), SimCfg(num_threads=1))
    with pytest.raises(ValueError, match=r"env.target_z must be \[low, high\]"):
        ReachEnv(ReachEnvCfg(num_envs=1, target_z=[0.5, 0.1]), SimCfg(num_threads=1))


def test_validate_refuses_a_standup_group_for_reach():
    from upright.conf.validate import validate_overrides

    assert validate_overrides(["task=reach"]) is None
    msg = validate_overrides(["task=reach", "terrain=wall"])
    assert msg == "terrain=wall: terrain applies to task=standup only; drop it for task=reach."
    assert "is a task=lift recipe; for task=reach use no recipe" in validate_overrides(
        ["task=reach", "recipe=cartesian"]
    )
