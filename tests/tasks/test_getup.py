"""The get-up MDP (``recipe=getup``, :mod:`upright.tasks.standup.getup`) on the real G1 scene and physics.

Expected values are computed by hand from the formulas' sources (mjlab_playground ``g1-getup``, mjlab's reflected
inertia), from the compiled model, or from MuJoCo itself, never from the code under test.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from upright.robots import g1
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.getup import events
from upright.tasks.standup.getup.actions import reflected_inertia_gains
from upright.tasks.standup.getup.config import GetupCfg
from upright.tasks.standup.getup.env import GetupEnv
from upright.tasks.standup.getup.observations import GetupState
from upright.tasks.standup.getup.rewards import (
    gated_posture,
    height_reward,
    joint_vel_hinge,
    posture_sigma,
    self_collision,
    torso_orientation,
)
from upright.tasks.standup.randomization import DomainRandCfg


def getup_cfg(n: int, **getup) -> StandupEnvCfg:
    cfg = StandupEnvCfg(num_envs=n, mdp="getup", episode_length_s=6.0, obs_noise=False)
    cfg.curriculum.enabled, cfg.curriculum.beta_init = False, 0.6
    cfg.getup = GetupCfg(**getup)
    return cfg


def make(n: int, seed: int = 0, dr: bool = True, **getup) -> GetupEnv:
    cfg = getup_cfg(n, **getup)
    cfg.domain_rand = DomainRandCfg(enabled=dr)
    return GetupEnv(cfg, SimCfg(num_threads=1), seed=seed)


def state(n: int = 2) -> GetupState:
    base = g1.robot_info()
    s = torch.zeros
    default_q = torch.tensor(base.default_pose[base.policy_joint_ids], dtype=torch.float32)
    from upright.tasks.standup.state import StandupState

    b = StandupState.zeros(n)
    return GetupState(
        **{k: getattr(b, k) for k in b.field_names()},
        torso_pos=s(n, 3),
        torso_projected_gravity=torch.tensor([[0.0, 0.0, -1.0]]).repeat(n, 1),
        q_encoder=s(n, 23),
        default_q=default_q,
        self_collision_force=s(n),
    )


# ---------------------------------------------------------------------------------------- gains


def test_gains_are_the_reflected_inertia_at_5_hz_with_damping_ratio_2_in_the_compiled_model():
    env = make(2, dr=False)
    w = 2 * math.pi * 5.0
    knee = g1.JOINT_NAMES.index("left_knee_joint")
    # 7520-22 reflected inertia (mjlab g1_constants.py): 0.489e-4 * (4.5*5)^2 + 0.109e-4 * 5^2 + 0.738e-4
    inertia = 0.489e-4 * 22.5**2 + 0.109e-4 * 25 + 0.738e-4
    assert float(env.model.actuator_gainprm[knee, 0]) == pytest.approx(inertia * w * w, rel=1e-9)
    assert float(env.model.actuator_biasprm[knee, 2]) == pytest.approx(-2 * 2.0 * inertia * w, rel=1e-9)
    assert float(env.model.actuator_gainprm[knee, 0]) == pytest.approx(24.7746, abs=1e-3)  # mjlab_playground's table
    held = g1.JOINT_NAMES.index("waist_pitch_joint")  # held joints keep HoST's 100 / 4
    assert float(env.model.actuator_gainprm[held, 0]) == 100.0 and float(env.model.actuator_biasprm[held, 2]) == -4.0
    kp, kd = reflected_inertia_gains(np.array([1.0]), 1.0 / (2 * math.pi), 0.5)
    assert kp[0] == pytest.approx(1.0) and kd[0] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------- rewards


def test_height_reward_is_0_on_the_floor_1_at_and_above_the_target_and_convex_between():
    h = torch.tensor([0.0, 0.4, 0.78, 1.2])
    r = height_reward(h, 0.78)
    assert r[0] == 0.0 and r[2] == pytest.approx(1.0) and r[3] == pytest.approx(1.0)
    assert r[1] == pytest.approx((math.exp(0.4) - 1) / (math.exp(0.78) - 1))
    assert r[1] < 0.4 / 0.78  # below the straight line: the last centimetres pay most


def test_orientation_and_gated_posture_by_hand():
    s = state(3)
    s.torso_projected_gravity = torch.tensor([[0.0, 0.0, -1.0], [1.0, 0.0, 0.0], [0.05, 0.0, -math.sqrt(1 - 0.0025)]])
    r = torso_orientation(s)
    assert r[0] == pytest.approx(1.0) and r[1] == pytest.approx(math.exp(-2 * 2.0))
    sigma = posture_sigma()
    s.q = s.default_q.repeat(3, 1)
    knee = g1.POLICY_JOINT_NAMES.index("left_knee_joint")
    s.q[2, knee] += 0.15  # one σ on one knee: exp(-1/23)
    p = gated_posture(s, sigma, gate=0.01)
    assert p[0] == pytest.approx(1.0)
    assert p[1] == 0.0  # lying: gated off
    # tilt error of row 2: 0.05² + (1 - sqrt(1 - 0.0025))² = 0.0025 < 0.01: counted
    assert p[2] == pytest.approx(math.exp(-1.0 / 23))
    assert sigma[g1.POLICY_JOINT_NAMES.index("left_hip_roll_joint")] == pytest.approx(0.08)
    assert sigma[g1.POLICY_JOINT_NAMES.index("left_elbow_joint")] == pytest.approx(0.5)


def test_joint_velocity_hinge_and_self_collision_threshold():
    s = state(2)
    s.dq[0, 0], s.dq[0, 1], s.dq[1, 2] = 3.0, -1.5, -5.0
    torch.testing.assert_close(joint_vel_hinge(s, 2.0), torch.tensor([1.0, 9.0]))
    s.self_collision_force = torch.tensor([9.9, 10.1])
    torch.testing.assert_close(self_collision(s, 10.0), torch.tensor([0.0, 1.0]))


def test_a_straight_knee_standing_costs_no_joint_limit_penalty():
    env = make(1, dr=False, stand_fraction=1.0, fall_fraction=0.0)
    s = env.state
    q = s.q.clone()
    q[:, [g1.POLICY_JOINT_NAMES.index(j) for j in ("left_knee_joint", "right_knee_joint")]] = 0.0
    from upright.tasks.standup.rewards.regularization import joint_pos_limits

    s.q = q
    assert float(joint_pos_limits(s)) == 0.0


# ---------------------------------------------------------------------------------------- resets


def test_standing_starts_stand_upright_at_the_standing_height_and_act_at_once():
    env = make(4, dr=False, stand_fraction=1.0, fall_fraction=0.0)
    s = env.state
    assert torch.all(env.start_kind == events.STAND)
    upright = torch.tensor([[0.0, 0.0, -1.0]]).expand(4, 3)
    torch.testing.assert_close(s.torso_projected_gravity, upright, atol=1e-4, rtol=0)
    assert torch.all((s.base_pos[:, 2] - env.pelvis_target - 0.02).abs() < 1e-5)
    assert torch.all(env._actuated())
    a = torch.full((4, 23), 0.1)
    env.step(a)
    torch.testing.assert_close(env.actions, a)  # applied at once: no settle for a standing start
    env.reset_all()
    # the standing height is where the soles touch: one env step later the pelvis has dropped the 2 cm, no more
    env.step(torch.zeros(4, 23))
    z = env.last_state.base_pos[:, 2]
    assert torch.all(z < env.pelvis_target + 0.02) and torch.all(z > env.pelvis_target - 0.03)


def test_dropped_starts_have_random_orientations_central_joints_and_settle_first():
    env = make(64, seed=3, dr=False, stand_fraction=0.0, fall_fraction=1.0)
    s = env.state
    assert torch.all(env.start_kind == events.FALL)
    assert torch.all((s.base_pos[:, 2] - 0.8).abs() < 1e-3)
    up = -s.projected_gravity[:, 2]  # cos of the pelvis tilt: uniform on SO(3) spreads it over [-1, 1]
    assert float(up.min()) < -0.5 and float(up.max()) > 0.5
    lo, hi = env.joint_lower[env._policy_ids], env.joint_upper[env._policy_ids]
    mid, half = 0.5 * (lo + hi), 0.225 * (hi - lo)
    assert torch.all((s.q - mid).abs() <= half + 1e-5)
    assert torch.all(env.episode_length_buf == 0)
    env.step(torch.ones(64, 23))  # ignored during the settle: the PD target is the measured q
    torch.testing.assert_close(env.actions, torch.zeros(64, 23))


def test_no_standing_or_dropped_fraction_starts_from_the_host_posture():
    env = make(8, dr=False, stand_fraction=0.0, fall_fraction=0.0)
    assert torch.all(env.start_kind == events.POSTURE)
    g = env.state.projected_gravity  # supine: gravity along the pelvis's -x... lying on the back
    assert torch.all(g[:, 2].abs() < 0.3)


def test_fall_termination_ends_only_episodes_whose_pelvis_fell_below_0_5_m_after_passing_0_7_m():
    lying = make(4, dr=False, stand_fraction=0.0, fall_fraction=0.0, fall_termination=True)  # pelvis ~0.1 m
    lying.host_above[:] = torch.tensor([True, False, True, True])  # as if the pelvis had passed 0.7 m earlier
    lying.clock_set[3] = True  # rsl-rl's random episode clock: a start of unknown kind never ends here
    lying.episode.length[:2] = lying.max_episode_length - 1  # envs 0 and 1 reach their time limit at this step
    _, _, dones, extras = lying.step(torch.zeros(4, 23))
    assert dones.tolist() == [1, 1, 1, 0]
    assert extras["time_outs"].tolist() == [False, True, False, False]  # a terminal last step is not bootstrapped
    assert extras["episode"]["Episode_Termination/fell_after_rise"].tolist() == [1.0, 0.0, 1.0]
    assert lying.host_above.tolist() == [False, False, False, True]  # reset with its episode: the term reads it live
    standing = make(2, dr=False, stand_fraction=1.0, fall_fraction=0.0, fall_termination=True)
    standing.host_above[:] = True
    assert not standing.step(torch.zeros(2, 23))[2].any()  # risen and still up
    off = make(3, dr=False, stand_fraction=0.0, fall_fraction=0.0)  # the default: episodes end on time-out only
    off.host_above[:] = True
    assert not off.step(torch.zeros(3, 23))[2].any()


def test_standing_heights_match_a_mujoco_drop_of_the_model():
    env = make(1, dr=False)
    m = env.model
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0
    d.qpos[env._q_adr.numpy()] = env.default_pose.numpy()
    d.qpos[2] = env.pelvis_target - 0.002
    mujoco.mj_forward(m, d)
    assert d.ncon > 0 and min(c.dist for c in d.contact[: d.ncon]) == pytest.approx(-0.002, abs=1e-4)  # 2 mm sunk
    d.qpos[2] = env.pelvis_target + 0.001
    mujoco.mj_forward(m, d)
    assert d.ncon == 0  # 1 mm up: in the air


# ---------------------------------------------------------------------------------------- observations, sensors


def test_actor_observation_is_gyro_gravity_biased_joints_velocities_action():
    env = make(4, seed=1, dr=True, stand_fraction=1.0, fall_fraction=0.0)
    obs = env.get_observations()
    assert obs["actor"].shape == (4, 75) and obs["critic"].shape == (4, 78)
    s = env.state
    a = obs["actor"]
    torch.testing.assert_close(a[:, 0:3], s.base_ang_vel)
    torch.testing.assert_close(a[:, 3:6], s.projected_gravity)
    torch.testing.assert_close(a[:, 6:29], s.q + env.encoder_bias)
    torch.testing.assert_close(obs["critic"][:, 3:6], s.torso_projected_gravity)
    torch.testing.assert_close(obs["critic"][:, 6:29], s.q - s.default_q)
    assert 0 < float(env.encoder_bias.abs().max()) <= 0.015
    torch.testing.assert_close(obs["critic"][:, 75:78], s.base_lin_vel)


def test_torso_gravity_follows_the_waist_not_the_pelvis():
    env = make(1, dr=False, stand_fraction=1.0, fall_fraction=0.0)
    m = env.model
    qpos = env.sim.state.qpos.clone()
    qpos[0, 2] = 1.5
    qpos[0, env._q_adr[g1.JOINT_NAMES.index("waist_yaw_joint")]] = 0.0
    # lean the torso 0.5 rad forward with the waist pitch; the pelvis stays upright
    ctrl = env.default_pose.clone()
    ctrl[g1.JOINT_NAMES.index("waist_pitch_joint")] = 0.5
    qpos[0, env._q_adr[g1.JOINT_NAMES.index("waist_pitch_joint")]] = 0.5
    env.sim.reset_envs(torch.tensor([0]), qpos, torch.zeros(1, m.nv))
    env.sim.step(ctrl.expand(1, -1), 1)
    s = env._read_state()
    assert float(s.torso_projected_gravity[0, 0]) == pytest.approx(math.sin(0.5), abs=0.03)  # leaning forward: +x
    assert float(s.projected_gravity[0, 0]) == pytest.approx(0.0, abs=0.03)


def test_self_collision_sensor_reads_crossed_legs_and_not_a_standing_pose():
    env = make(2, dr=False, stand_fraction=1.0, fall_fraction=0.0)
    m = env.model
    qpos = env.sim.state.qpos.clone()
    qpos[:, 2] = 2.0  # in the air: no floor contact
    ctrl = env.default_pose.expand(2, -1).clone()
    for side, sign in (("left", -1.0), ("right", 1.0)):  # hip roll inwards: the thighs cross
        j = g1.JOINT_NAMES.index(f"{side}_hip_roll_joint")
        qpos[1, env._q_adr[j]] = sign * 0.5
        ctrl[1, j] = sign * 0.5
    env.sim.reset_envs(torch.arange(2), qpos, torch.zeros(2, m.nv))
    env.sim.step(ctrl, 1)
    force = env._read_state().self_collision_force
    assert float(force[0]) == 0.0 and float(force[1]) > 10.0


# ---------------------------------------------------------------------------------------- config, metadata


def test_recipe_getup_composes_the_getup_env_and_one_reward_group():
    from hydra import compose, initialize

    from upright.conf import register_configs
    from upright.tasks.registry import make_env, policy_metadata

    register_configs()
    with initialize(version_base=None, config_path=None):
        cfg = compose(
            "config", overrides=["task=standup", "recipe=getup", "posture=prone", "env.num_envs=2", "sim.num_threads=1"]
        )
    assert cfg.env.mdp == "getup" and list(cfg.train.group_weights) == [1.0] and cfg.train.actor_tanh is False
    env = make_env("standup", cfg.env, cfg.sim, "cpu", 0)
    assert isinstance(env, GetupEnv) and env.reward_group_names == ("getup",)
    meta = policy_metadata("standup", env)
    # the recipe's actor reads its last 6 frames of 75 values (upright.tasks.standup.spec.GETUP)
    assert meta["mdp"] == "getup" and meta["privileged_inputs"] == [] and meta["observation_dim"] == 6 * 75
    assert meta["observation_history_length"] == 6 and meta["action_scale"] == pytest.approx(0.6)
    np.testing.assert_allclose(meta["kp"], env.model.actuator_gainprm[env.robot.policy_joint_ids, 0])
    assert meta["observation_names"] == ["base_ang_vel", "projected_gravity", "joint_pos", "joint_vel", "last_action"]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"stand_fraction": 0.7, "fall_fraction": 0.6}, r"env\.getup\.stand_fraction \+ env\.getup\.fall_fraction"),
        ({"fall_joint_fraction": 1.5}, r"env\.getup\.fall_joint_fraction must lie in \[0, 1\]"),
        ({"natural_freq_hz": 0.0}, r"env\.getup\.natural_freq_hz must be > 0"),
        ({"actor_history": 0}, r"env\.getup\.actor_history must be an integer >= 1"),
    ],
)
def test_bad_getup_settings_are_refused_in_one_line(change, match):
    with pytest.raises(ValueError, match=match):
        make(1, **change)


def test_getup_refuses_other_terrains():
    cfg = getup_cfg(1)
    cfg.terrain = "platform"
    with pytest.raises(ValueError, match="terrain=ground"):
        GetupEnv(cfg, SimCfg(num_threads=1))


def test_indicators_leave_out_episodes_whose_clock_was_set_from_outside():
    """rsl-rl's ``init_at_random_ep_len`` writes the episode clock; those episodes' starts are unknown (a robot can be
    mid-drop at 0.8 m), so they stay out of ``Metrics/pelvis_passed_0.5``; the next episodes count again."""
    env = make(4, dr=False, stand_fraction=0.0, fall_fraction=1.0)
    env.episode_length_buf = torch.full((4,), env.max_episode_length - 2, dtype=torch.long)
    assert torch.all(env.clock_set)
    logged = []
    for _ in range(2 + env.max_episode_length):
        _, _, dones, extras = env.step(torch.zeros(4, 23))
        if dones.any():
            logged.append("Metrics/pelvis_passed_0.5" in extras["episode"])
    assert logged == [False, True]  # the set clocks' episodes ended first, unlogged; the next ones are logged
    assert not env.clock_set.any()


def test_standing_starts_log_how_long_the_pelvis_stayed_up():
    """``Metrics/standing_start_time_up``: with zero actions (PD targets = measured q: no holding torque) a standing
    G1 sinks; the logged time is when its pelvis first went below 0.5 m, less than the episode."""
    cfg = getup_cfg(4, stand_fraction=1.0, fall_fraction=0.0)
    cfg.domain_rand = DomainRandCfg(enabled=False)
    cfg.episode_length_s = 3.0
    env = GetupEnv(cfg, SimCfg(num_threads=1), seed=0)
    logged = None
    for _ in range(env.max_episode_length):
        _, _, dones, extras = env.step(torch.zeros(4, 23))
        if dones.any():
            logged = extras["episode"].get("Metrics/standing_start_time_up")
            break
    assert logged is not None and logged.shape == (4,)
    assert torch.all(logged > 0.05) and torch.all(logged < 3.0 - 0.02)
