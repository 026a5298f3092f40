"""Rise-path starts (``env.rise_path``) and the absolute action mode (``env.action_mode``) of the standup env."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from upright.robots import g1
from upright.tasks.standup.config import SimCfg, StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.rise_path import (
    RisePathCfg,
    RisePathStarts,
    interpolate,
    keyframes,
    validate,
)
from upright.tasks.standup.scene import standup_scene


@pytest.fixture(scope="module")
def scene() -> mujoco.MjModel:
    return standup_scene()


@pytest.fixture(scope="module")
def bank(scene) -> RisePathStarts:
    info = g1.robot_info()
    return RisePathStarts(
        RisePathCfg(fraction=0.5, bank_size=96), scene, info.default_pose, info.policy_joint_ids, seed=3
    )


def test_keyframes_run_from_supine_to_the_default_standing_pose(scene):
    info = g1.robot_info()
    frames = keyframes(scene, info.default_pose)
    us = [f[0] for f in frames]
    assert us[0] == 0.0 and us[-1] == 1.0 and us == sorted(us)
    assert frames[0][1] == pytest.approx(-math.pi / 2)  # supine
    # θ = 0: the default pose, with the hips turned by the balanced pelvis pitch (the soles stay flat)
    stand_pitch, stand = frames[-1][1], frames[-1][2].copy()
    hips = [g1.JOINT_NAMES.index(f"{s}_hip_pitch_joint") for s in ("left", "right")]
    np.testing.assert_allclose(stand[hips], info.default_pose[hips] - stand_pitch, atol=1e-9)
    stand[hips] = info.default_pose[hips]
    np.testing.assert_allclose(stand, info.default_pose, atol=1e-9)
    assert abs(stand_pitch) < 0.2
    pitch, q = interpolate(frames, 0.1)  # halfway between the first two frames
    assert pitch == pytest.approx(0.5 * (frames[0][1] + frames[1][1]))
    np.testing.assert_allclose(q, 0.5 * (frames[0][2] + frames[1][2]))


def test_bank_states_are_settled_physics_states_whose_head_rises_along_the_path(scene, bank):
    assert torch.isfinite(bank.qpos).all() and torch.isfinite(bank.qvel).all()
    quat_norm = bank.qpos[:, 3:7].norm(dim=1)
    torch.testing.assert_close(quat_norm, torch.ones_like(quat_norm), atol=1e-4, rtol=0)
    u, h = torch.tensor(bank.u, dtype=torch.float32), bank.head_height
    assert torch.corrcoef(torch.stack([u, h]))[0, 1] > 0.8
    assert h[u < 0.1].mean() < 0.35 and h[u > 0.9].mean() > 1.0
    # No start sinks into the floor: the deepest robot-floor contact stays within MuJoCo's soft-contact range.
    d = mujoco.MjData(scene)
    for k in range(0, len(bank.u), 8):
        d.qpos[:] = bank.qpos[k].double().numpy()
        mujoco.mj_forward(scene, d)
        floor = [c.dist for c in d.contact[: d.ncon] if 0 in (scene.geom_bodyid[c.geom1], scene.geom_bodyid[c.geom2])]
        assert min(floor, default=0.0) > -0.02


def test_sample_moves_the_start_to_the_envs_position_and_copies(bank):
    g = torch.Generator().manual_seed(0)
    xy = torch.tensor([[3.0, -2.0], [0.5, 0.5]])
    qpos, qvel, u = bank.sample(2, g, xy)
    assert qpos.shape == (2, bank.qpos.shape[1]) and qvel.shape == (2, bank.qvel.shape[1])
    assert ((qpos[:, 0:2] - xy).abs() < 0.3).all()  # the bank's pelvis sits near x = y = 0
    qpos[:] = 0.0
    assert bank.qpos.abs().sum() > 0  # the bank is not a view of the draw


def test_validate_names_the_key():
    with pytest.raises(ValueError, match="env.rise_path.fraction"):
        validate(RisePathCfg(fraction=1.0), "ground")
    with pytest.raises(ValueError, match="terrain=ground"):
        validate(RisePathCfg(fraction=0.3), "slope")
    with pytest.raises(ValueError, match="u_min"):
        validate(RisePathCfg(u_min=0.8, u_max=0.2), "ground")


def _env(**kw) -> StandupEnv:
    cfg = StandupEnvCfg(num_envs=32, **kw)
    cfg.rise_path.bank_size = 48
    cfg.domain_rand.enabled = False
    return StandupEnv(cfg, SimCfg(num_threads=1), seed=5)


def test_env_starts_a_fraction_on_the_path_acting_at_once():
    env = _env(rise_path=RisePathCfg(fraction=0.6, bank_size=48))
    on = env.assisted
    assert 5 < int(on.sum()) < 30
    assert (env.episode_length_buf[on] == env.cfg.unactuated_steps).all()
    assert (env.episode_length_buf[~on] == 0).all()
    assert env.state.head_height[on].mean() > env.state.head_height[~on].mean() + 0.2
    off = _env()
    assert not off.assisted.any()


def test_absolute_action_mode_targets_the_default_pose_and_stays_limp_while_unactuated():
    env = _env(action_mode="absolute")
    env.beta[:] = 0.5
    default = env.default_pose[env._policy_ids]
    q_before = env.state.q.clone()
    env.step(torch.ones(32, 23))  # still in the unactuated phase: targets at the measured angles
    torch.testing.assert_close(env.p_target, q_before)
    env.episode_length_buf[:] = env.cfg.unactuated_steps
    a = torch.randn(32, 23)
    env.step(a)
    torch.testing.assert_close(env.p_target, default + 0.5 * a)


def test_unknown_action_mode_is_refused():
    with pytest.raises(ValueError, match="env.action_mode"):
        _env(action_mode="torque")


def test_rise_path_episodes_end_on_a_fall_or_their_own_time_limit():
    env = _env(rise_path=RisePathCfg(fraction=0.6, bank_size=48, episode_length_s=0.2, fall_drop=0.25))
    on = env.on_path.clone()
    assert on.any() and (on == env.assisted).all()
    torch.testing.assert_close(env.start_head_height, env.state.head_height)
    ended = torch.zeros_like(on)
    for _ in range(10):  # 0.2 s = 10 env steps
        _, _, dones, extras = env.step(torch.zeros(32, 23))
        ended |= dones.bool()
        if "Metrics/path_head_gain" in extras["episode"]:
            assert extras["episode"]["Metrics/path_head_gain"].numel() > 0
    assert ended[on].all()  # every rise-path episode ended (time limit or fall) within 0.2 s
    assert not ended[~on].any()  # lying starts run the env's 10 s episode
    # A fall: knock the head of one rise-path env 0.3 m below its start, the env terminates (not a time-out).
    env2 = _env(rise_path=RisePathCfg(fraction=0.6, bank_size=48, fall_drop=0.25))
    i = int(env2.on_path.nonzero()[0])
    env2.start_head_height[i] = env2.state.head_height[i] + 0.3
    _, _, dones, extras = env2.step(torch.zeros(32, 23))
    assert dones[i] == 1 and not extras["time_outs"][i]


def test_teacher_get_up_reaches_standing_height_on_the_ground(scene):
    from upright.tasks.standup.teacher import DEFAULT_PARAMS, PARAMS, KeyframeGetUp

    info = g1.robot_info()
    teacher = KeyframeGetUp(scene, info.default_pose, info.policy_joint_ids)
    p = np.array([DEFAULT_PARAMS[k] for k in PARAMS])
    score, trace, _ = teacher.rollout(p, grounded=True, yaw=1.0)
    assert trace[0] < 0.15  # starts lying
    assert score > 1.1  # head above 1.1 m with a foot down, pelvis below 0.85 m, |vz| < 0.5 m/s


def test_teacher_source_fills_the_bank_with_moving_states_along_the_get_up(scene):
    info = g1.robot_info()
    cfg = RisePathCfg(fraction=0.5, bank_size=200, source="teacher", joint_noise=0.0)
    bank = RisePathStarts(cfg, scene, info.default_pose, info.policy_joint_ids, seed=1)
    assert bank.qpos.shape == (200, scene.nq) and torch.isfinite(bank.qpos).all()
    assert bank.head_height.min() < 0.15 and bank.head_height.max() > 1.0
    assert bank.qvel.abs().max() > 1.0  # dynamic states, not settled poses
    with pytest.raises(ValueError, match="env.rise_path.source"):
        validate(RisePathCfg(source="mocap"), "ground")


# ------------------------------------------------------------------ reverse curriculum


@pytest.fixture(scope="module")
def curriculum_bank(scene) -> RisePathStarts:
    info = g1.robot_info()
    cfg = RisePathCfg(
        fraction=0.5,
        bank_size=200,
        settle_max=0.05,
        reverse_curriculum=True,
        curriculum_u_start=0.8,
        curriculum_step=0.1,
        curriculum_band=0.1,
        curriculum_frontier_share=0.5,
        curriculum_success=0.5,
        curriculum_min_episodes=10,
    )
    return RisePathStarts(cfg, scene, info.default_pose, info.policy_joint_ids, seed=4)


def test_reverse_curriculum_draws_above_its_lowest_coordinate_half_from_the_frontier(curriculum_bank):
    bank = curriculum_bank
    bank.load_state_dict({"u_low": 0.8, "advances": 0})
    g = torch.Generator().manual_seed(1)
    _, _, u = bank.sample(2000, g, torch.zeros(2000, 2))
    assert (u >= 0.8 - 1e-6).all()
    frontier = float((u < 0.9).float().mean())
    # half from the band [0.8, 0.9), half uniform over the bank's starts in [0.8, 1]
    bank_u = torch.tensor(bank.u)
    in_band = float(((bank_u >= 0.8) & (bank_u < 0.9)).sum() / (bank_u >= 0.8).sum())
    assert frontier == pytest.approx(0.5 + 0.5 * in_band, abs=0.04)


def test_reverse_curriculum_advances_only_on_frontier_success_and_stops_at_u_min(curriculum_bank):
    bank = curriculum_bank
    bank.load_state_dict({"u_low": 0.8, "advances": 0})
    frontier_u, easy_u = torch.full((10,), 0.85), torch.full((10,), 0.95)
    bank.record(easy_u, torch.ones(10, dtype=torch.bool))  # easy starts do not count
    assert bank.u_low == pytest.approx(0.8) and math.isnan(bank.last_frontier_rate)
    bank.record(frontier_u, torch.arange(10) < 4)  # 40 % < 50 %: stays
    assert bank.u_low == pytest.approx(0.8) and bank.last_frontier_rate == pytest.approx(0.4)
    bank.record(frontier_u, torch.arange(10) < 6)  # 60 %: one step down
    assert bank.u_low == pytest.approx(0.7) and bank.advances == 1
    for _ in range(20):
        bank.record(torch.full((10,), bank.u_low), torch.ones(10, dtype=torch.bool))
    assert bank.u_low == pytest.approx(0.0) and bank.advances == 8
    assert bank.state_dict() == {"u_low": pytest.approx(0.0), "advances": 8}


def test_reverse_curriculum_settings_are_checked():
    with pytest.raises(ValueError, match="source=keyframes"):
        validate(RisePathCfg(reverse_curriculum=True, source="teacher"), "ground")
    with pytest.raises(ValueError, match="curriculum_u_start"):
        validate(RisePathCfg(reverse_curriculum=True, u_max=0.8, curriculum_u_start=0.9), "ground")
    with pytest.raises(ValueError, match="curriculum_step"):
        validate(RisePathCfg(reverse_curriculum=True, curriculum_step=0.0), "ground")


def test_env_keeps_the_reverse_curriculum_in_its_checkpoint_state_and_logs_it():
    cfg = RisePathCfg(
        fraction=0.6,
        bank_size=48,
        episode_length_s=0.1,
        reverse_curriculum=True,
        curriculum_u_start=0.7,
        curriculum_min_episodes=1,
        curriculum_success=0.01,
    )
    env = _env(rise_path=cfg)
    on = env.on_path
    assert (env.path_u[on] >= 0.7 - 1e-6).all() and env.path_u[~on].isnan().all()
    logged = {}
    for _ in range(6):
        _, _, _, extras = env.step(torch.zeros(32, 23))
        logged |= extras["episode"]
    assert float(logged["Curriculum/rise_path_u_low"]) <= 0.7
    state = env.state_dict()["rise_path"]
    fresh = _env(rise_path=cfg)
    fresh.load_state_dict({"rise_path": {"u_low": 0.25, "advances": 3}})
    assert fresh._rise_path.u_low == 0.25 and state["u_low"] == env._rise_path.u_low


def test_settled_starts_name_the_kinds_on_a_typo():
    from upright.tasks.standup.rise_path import settled_starts
    from upright.tasks.standup.scene import standup_scene

    with pytest.raises(ValueError, match="'stand' or 'supine'"):
        settled_starts(standup_scene(), "standing", 1, seed=0)
