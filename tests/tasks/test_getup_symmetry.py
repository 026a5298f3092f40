"""Left/right mirror of the get-up MDP (``train.symmetry=true``), checked against the simulator itself.

The expected mirror image of an observation is not computed by the code under test: the test puts a G1 in the
mirror image of another G1's state (the sagittal plane of the world: y -> -y, quaternion (w, -x, y, -z), the free
joint's body-frame angular velocity (-wx, wy, -wz), left and right joints swapped with roll/yaw negated) and reads
what the robot's sensors and the env report there.
"""

from __future__ import annotations

import pytest
import torch

from upright.robots import g1
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.getup.config import GetupCfg
from upright.tasks.standup.getup.env import GetupEnv
from upright.tasks.standup.getup.symmetry import joint_mirror, layout_mirror, mirror
from upright.tasks.standup.randomization import DomainRandCfg
from upright.training.symmetry import augment, check_env


@pytest.fixture(scope="module")
def env() -> GetupEnv:
    cfg = StandupEnvCfg(num_envs=2, mdp="getup", episode_length_s=6.0, obs_noise=False)
    cfg.curriculum.enabled, cfg.curriculum.beta_init = False, 0.6
    cfg.getup = GetupCfg(stand_fraction=0.0, fall_fraction=1.0)
    cfg.domain_rand = DomainRandCfg(enabled=False)
    env = GetupEnv(cfg, SimCfg(num_threads=1), seed=3)
    env.reset_all()
    gen = torch.Generator().manual_seed(0)
    for _ in range(40):  # past the settle: a generic state, moving, in contact
        env.step(torch.randn(2, env.num_actions, generator=gen))
    return env


def mirror_state_into_env_1(env: GetupEnv) -> None:
    """Put env 1 in the mirror image of env 0's state, with env 0's last action mirrored."""
    s = env.sim.state
    qpos, qvel = s.qpos[0:1].clone(), s.qvel[0:1].clone()
    index, sign = joint_mirror(g1.JOINT_NAMES)
    mq, mv = qpos.clone(), qvel.clone()
    mq[:, 1] = -qpos[:, 1]
    mq[:, 3:7] = qpos[:, 3:7] * torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=qpos.dtype)
    mv[:, 0:3] = qvel[:, 0:3] * torch.tensor([1.0, -1.0, 1.0], dtype=qvel.dtype)
    mv[:, 3:6] = qvel[:, 3:6] * torch.tensor([-1.0, 1.0, -1.0], dtype=qvel.dtype)
    mq[:, env._q_adr] = qpos[:, env._q_adr][:, index] * sign.to(qpos.dtype)
    mv[:, env._v_adr] = qvel[:, env._v_adr][:, index] * sign.to(qvel.dtype)
    env.sim.reset_envs(torch.tensor([1]), mq, mv)
    env.actions[1] = env.mirror_actions(env.actions[0:1])[0]
    env.state = env._read_state()
    env._update_history()


def test_the_observation_of_the_mirrored_state_is_the_mirrored_observation(env):
    mirror_state_into_env_1(env)
    obs = env.get_observations()
    assert obs["actor"][0].abs().max() > 0.1  # a generic state: every term moves
    mirrored = env.mirror_observations(obs[0:1])
    for key in ("actor", "critic"):
        torch.testing.assert_close(mirrored[key][0], obs[key][1], atol=1e-4, rtol=1e-4, msg=key)
    # and the other way round: the mirror is an involution
    torch.testing.assert_close(env.mirror_observations(mirrored)["actor"], obs["actor"][0:1])


def test_mirrored_actions_move_the_mirrored_robot_as_its_twin(env):
    """One env step from mirrored states with mirrored actions keeps the two robots mirror images (the physics and
    the G1's model are left/right symmetric; contacts make it approximate)."""
    mirror_state_into_env_1(env)
    a0 = torch.randn(1, env.num_actions, generator=torch.Generator().manual_seed(1))
    obs, *_ = env.step(torch.cat([a0, env.mirror_actions(a0)]))
    mirrored = env.mirror_observations(obs[0:1])
    err = (mirrored["actor"][0] - obs["actor"][1]).abs()
    swapped = (env.mirror_actions(a0) - a0).abs().max()
    assert swapped > 0.5  # the mirror changed the action: a wrong mirror would show below
    assert err.max() < 0.05, f"largest mismatch {err.max():.3g} at actor entry {int(err.argmax())}"


def test_layout_and_joint_mirror_by_hand():
    index, sign = joint_mirror(("left_hip_roll_joint", "right_hip_roll_joint", "left_knee_joint",
                                "right_knee_joint", "waist_yaw_joint"))  # fmt: skip
    assert index.tolist() == [1, 0, 3, 2, 4] and sign.tolist() == [-1, -1, 1, 1, -1]
    i, s = layout_mirror((("base_ang_vel", 3), ("projected_gravity", 3)))
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
    assert mirror(x, i, s).tolist() == [[-1.0, 2.0, -3.0, 4.0, -5.0, 6.0]]
    with pytest.raises(ValueError, match="no mirror known"):
        layout_mirror((("cube_pos", 3),))
    with pytest.raises(ValueError, match="no twin"):
        joint_mirror(("left_knee_joint",))


def test_augment_appends_the_mirror_images_and_check_env_names_the_fix(env):
    obs = env.get_observations()
    actions = torch.randn(2, env.num_actions)
    obs_aug, act_aug = augment(env, obs, actions)
    assert obs_aug["actor"].shape == (4, 75) and act_aug.shape == (4, 23)
    torch.testing.assert_close(act_aug[2:], env.mirror_actions(actions))
    assert augment(env, None, None) == (None, None)
    with pytest.raises(ValueError, match="train.symmetry=false"):
        check_env(object())
