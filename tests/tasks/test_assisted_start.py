"""Assisted starts (not HoST): upright crouched starts on the real G1 scene, the curriculum ignoring them, and the
evaluation protocol never using them."""

import math

import pytest
import torch

from upright.tasks.standup.assisted_start import AssistedStartCfg, crouch_joints, validate
from upright.tasks.standup.config import StandupEnvCfg
from upright.tasks.standup.env import StandupEnv


def _env(num_envs=64, **assisted) -> StandupEnv:
    cfg = StandupEnvCfg(num_envs=num_envs)
    cfg.assisted_start = AssistedStartCfg(**assisted)
    return StandupEnv(cfg, seed=3)


def test_assisted_starts_are_upright_with_both_soles_just_above_the_ground():
    env = _env(fraction=0.5, max_crouch=1.2, clearance=0.01)
    a = env.assisted
    assert 0 < int(a.sum()) < env.num_envs  # both kinds present at fraction 0.5
    s = env.state
    sole_z = s.ankle_points[..., 2].amin(dim=(1, 2))
    assert torch.allclose(sole_z[a], torch.full_like(sole_z[a], 0.01), atol=2e-3)
    assert (s.projected_gravity[a, 2] < -0.85).all()  # pelvis upright or leaning forward by at most ~0.55 rad
    assert (s.head_height[a] > 0.7).all() and (s.head_height[~a] < 0.3).all()  # lying starts are on the ground
    # crouch depth varies: pelvis from ~0.45 m (θ = 1.2 rad) to ~0.79 m (standing)
    z = s.base_pos[a, 2]
    assert z.min() < 0.6 and z.max() > 0.7
    # assisted episodes skip the unactuated phase: they act (and observe) from their first step
    assert (env.episode_length_buf[a] == env.cfg.unactuated_steps).all()
    assert (env.episode_length_buf[~a] == 0).all()
    last = env.obs_history.buffer[:, -1]
    assert (last[a].abs().sum(dim=1) > 0).all() and (last[~a] == 0).all()


def test_crouch_keeps_the_soles_flat_and_the_fraction_is_respected():
    env = _env(num_envs=256, fraction=0.25, max_crouch=1.2, joint_noise=0.0)
    a = env.assisted
    assert abs(a.float().mean().item() - 0.25) < 0.08
    pts = env.state.ankle_points[a]  # (M, 2, 5, 3): the four sole corners share one height when the sole is flat
    corners_z = pts[:, :, 1:, 2]
    assert (corners_z.amax(dim=2) - corners_z.amin(dim=2)).max() < 2e-3


def test_crouches_are_balanced_under_a_pd_hold():
    """The centre of mass is over the feet: holding the start pose with PD alone (no pull force, nominal model),
    every crouch depth stays up for 0.8 s: the pelvis drops < 8 cm (measured ≤ 5.2 cm). With the pelvis pitch
    forced to 0 (hips behind the feet) the deep crouches drop 22-25 cm and tip back in that time."""
    cfg = StandupEnvCfg(num_envs=7)
    cfg.assisted_start = AssistedStartCfg(fraction=0.5, max_crouch=1.2, joint_noise=0.0)
    cfg.domain_rand.enabled, cfg.obs_noise, cfg.curriculum.force_init = False, False, 0.0
    env = StandupEnv(cfg, seed=0)
    theta = torch.linspace(0.0, 1.2, 7)
    pitch = env._assisted_starts.pitch(theta)
    joints = crouch_joints(env.default_pose, theta, pitch)
    z = torch.tensor(
        [
            -env._assisted_starts.kin.pose(
                torch.tensor([torch.cos(p / 2), 0, torch.sin(p / 2), 0]).double().numpy(), j.double().numpy()
            )[1]
            + 0.01
            for p, j in zip(pitch, joints)
        ]
    )
    qpos = torch.zeros(7, env.model.nq)
    qpos[:, 2], qpos[:, 3], qpos[:, 5], qpos[:, env._q_adr] = z, torch.cos(pitch / 2), torch.sin(pitch / 2), joints
    env.sim.reset_envs(torch.arange(7), qpos, torch.zeros(7, env.model.nv))
    env.state = env._read_state()
    env.episode_length_buf[:] = env.cfg.unactuated_steps
    z0, target = env.state.base_pos[:, 2].clone(), joints[:, env._policy_ids]
    for _ in range(40):
        env.step((target - env.state.q) / env.beta.unsqueeze(-1))
    s = env.last_state
    assert ((s.base_pos[:, 2] - z0).abs() < 0.08).all(), (z0, s.base_pos[:, 2])
    assert (s.projected_gravity[:, 2] < -0.75).all(), s.projected_gravity[:, 2]


def test_default_is_off_as_in_host():
    env = StandupEnv(StandupEnvCfg(num_envs=8), seed=3)
    assert env.cfg.assisted_start.fraction == 0.0
    assert env._assisted_starts is None and not env.assisted.any()


def _stand_all_and_time_out(env: StandupEnv, assisted: bool) -> bool:
    """Put every env standing, mark them assisted or not, and step once at the time limit; returns whether the
    curriculum stepped the force down."""
    n = env.num_envs
    z, quat, joints = env._assisted_starts.sample(n, env.rng, env.joint_lower, env.joint_upper)
    qpos = torch.zeros(n, env.model.nq)
    qpos[:, 2], qpos[:, 3:7], qpos[:, env._q_adr] = z, quat, joints
    env.sim.reset_envs(torch.arange(n), qpos, torch.zeros(n, env.model.nv))
    env.state = env._read_state()
    env.assisted[:] = assisted
    env.episode_length_buf[:] = env.max_episode_length - 1
    before = env.curriculum.force.clone()
    target = env.default_pose[env._policy_ids]
    env.step((target - env.state.q) / env.beta.unsqueeze(-1))
    assert (env.last_state.head_height > 0.9).all()  # every resetting env ended standing
    return bool((env.curriculum.force < before).any())


def test_curriculum_trigger_ignores_assisted_episodes():
    env = _env(num_envs=8, fraction=0.5, max_crouch=0.0, joint_noise=0.0)
    assert not _stand_all_and_time_out(env, assisted=True)
    assert env.curriculum.num_triggers == 0
    assert _stand_all_and_time_out(env, assisted=False)  # the same standing finish from the posture does trigger
    assert env.curriculum.num_triggers == 1


@pytest.mark.parametrize(
    "kwargs, terrain, match",
    [
        (dict(fraction=1.0), "ground", "fraction must be in"),
        (dict(fraction=-0.1), "ground", "fraction must be in"),
        (dict(fraction=0.2, max_crouch=1.5), "ground", "max_crouch"),
        (dict(fraction=0.2, joint_noise=-1.0), "ground", "joint_noise"),
        (dict(fraction=0.2), "platform", "needs terrain=ground"),
    ],
)
def test_bad_settings_name_the_field_and_the_fix(kwargs, terrain, match):
    with pytest.raises(ValueError, match=match):
        validate(AssistedStartCfg(**kwargs), terrain)
    validate(AssistedStartCfg(fraction=0.0), terrain)  # off is valid everywhere


def test_evaluation_never_uses_assisted_starts():
    from upright.training.evaluate import make_eval_env

    env, _, _, cfg = make_eval_env("zero", overrides=["env.assisted_start.fraction=0.5"], num_envs=4)
    assert cfg.env.assisted_start.fraction == 0.0 and env._assisted_starts is None
    assert not env.assisted.any()
    assert math.isclose(float(env.state.projected_gravity[:, 2].abs().max()), 0.0, abs_tol=0.2)  # lying (supine)


def test_episode_reward_logs_divide_by_the_steps_each_episode_ran():
    """Assisted episodes skip the unactuated phase; their per-step reward means count only the steps they ran."""
    cfg = StandupEnvCfg(num_envs=16, episode_length_s=1.0)  # 50 env steps; assisted episodes run 50 - 30 = 20
    cfg.assisted_start = AssistedStartCfg(fraction=0.5)
    env = StandupEnv(cfg, seed=5)
    assisted = env.assisted.clone()
    assert 0 < int(assisted.sum()) < 16
    total = torch.zeros(16)
    steps = torch.zeros(16)
    checked = 0
    for _ in range(50):
        _, _, dones, extras = env.step(torch.zeros(16, env.num_actions))
        total += extras["reward_groups"][:, 0]
        steps += 1
        done = dones.bool()
        if done.any():
            expected = total[done] / steps[done]
            assert torch.allclose(extras["episode"]["Episode_Reward/group/task"], expected, atol=1e-5)
            checked += int(done.sum())
            total[done], steps[done] = 0.0, 0.0
    assert checked >= 16  # every env finished its first episode (assisted ones after 20 steps)
