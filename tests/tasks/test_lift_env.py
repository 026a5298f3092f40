"""The lift env in real MuJoCo physics (native backend, 1 thread): resets, delta actions, floor contact, success and
the curriculum's per-env update, the randomisation switch, observation layout = metadata."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from upright.robots import panda
from upright.tasks.lift.config import LiftEnvCfg
from upright.tasks.lift.env import LiftEnv
from upright.tasks.lift.metadata import lift_policy_metadata
from upright.tasks.standup.config import SimCfg


def make(num_envs=8, dr=False, curriculum=True, **env):
    far = env.pop("far_edge_fraction", 0.0)
    cfg = LiftEnvCfg(num_envs=num_envs, **env)
    cfg.domain_rand.enabled = dr
    cfg.curriculum.enabled = curriculum
    cfg.curriculum.far_edge_fraction = far
    return LiftEnv(cfg, SimCfg(num_threads=1, timestep=0.005), seed=3)


@pytest.fixture(scope="module")
def env():
    e = make(num_envs=64)
    yield e
    e.close()


def test_reset_draws_cube_and_target_in_the_level_ranges(env):
    env.curriculum.level[:] = torch.linspace(0, 1, 64)
    env.reset_all()
    cube, target, level = env.cube_start, env.target_pos, env.curriculum.level
    r_cube = 0.05 + 0.15 * level
    assert ((cube[:, :2] - torch.tensor([0.7, 0.0])).abs() <= r_cube.unsqueeze(-1) + 1e-6).all()
    torch.testing.assert_close(cube[:, 2], torch.full((64,), 0.03))
    height = target[:, 2] - cube[:, 2]
    assert (height >= 0.2 - 1e-6).all() and (height <= 0.25 + 0.15 * level + 1e-6).all()
    assert (cube[32:, :2] - torch.tensor([0.7, 0.0])).abs().max() > 0.1  # the wide levels do use their range
    np.testing.assert_allclose(env.state.q[0].numpy(), panda.HOME_QPOS, atol=1e-6)
    torch.testing.assert_close(env.ctrl[0], torch.tensor(panda.HOME_CTRL))


def test_far_edge_fraction_draws_that_share_of_starts_from_the_outer_band():
    """``env.curriculum.far_edge_fraction``: about that share of cube and of target x lie in the outer band of the
    env's current range (0.05 m wide at the full range: x in [0.85, 0.9] m, 1/8 of a uniform draw), the rest stay
    uniform in the range; evaluation (curriculum off) never oversamples; a fraction outside [0, 1] is refused."""
    e = make(num_envs=2000, far_edge_fraction=0.5)
    try:
        e.curriculum.level[:] = 1.0
        cube, target = e.sample_reset(torch.arange(2000))
        for pos in (cube, target):
            x = pos[:, 0]
            assert (x <= 0.9 + 1e-6).all() and (x >= 0.5 - 1e-6).all()
            band = float((x >= 0.85 - 1e-6).float().mean())
            assert 0.5 + 0.5 / 8 - 0.05 < band < 0.5 + 0.5 / 8 + 0.05, band  # 0.5625 expected
        e.curriculum.level[:] = 0.0  # level 0: the band is the edge of the 0.05 m half-range
        cube, _ = e.sample_reset(torch.arange(2000))
        assert (cube[:, 0] <= 0.75 + 1e-6).all() and float((cube[:, 0] >= 0.70 - 1e-6).float().mean()) > 0.7
    finally:
        e.close()
    e = make(num_envs=2000, curriculum=False, far_edge_fraction=0.5)
    try:
        cube, _ = e.sample_reset(torch.arange(2000))
        assert abs(float((cube[:, 0] >= 0.85).float().mean()) - 1 / 8) < 0.04
    finally:
        e.close()
    with pytest.raises(ValueError, match="far_edge_fraction"):
        make(num_envs=2, far_edge_fraction=1.5)


def test_actions_are_deltas_on_the_targets_clipped_to_the_ctrl_range():
    e = make(num_envs=2, curriculum=False)
    a = torch.zeros(2, 8)
    a[:, 0] = 2.0  # clipped to 1: +0.04 rad per env step
    a[:, 7] = -1.0  # close the gripper: -0.04 m, floor 0
    e.step(a)
    assert e.ctrl[0, 0].item() == pytest.approx(0.04, abs=1e-6)
    assert e.ctrl[0, 7].item() == 0.0
    for _ in range(100):
        e.step(a)
    assert e.ctrl[0, 0].item() == pytest.approx(2.8973, abs=1e-5)  # joint1 ctrl range
    assert e.state.q[0, 0].item() > 2.5  # the arm followed its targets
    assert e.state.q[0, 7].item() < 0.005  # fingers closed
    e.close()


def test_floor_contact_is_detected_and_penalised():
    e = make(num_envs=2, curriculum=False)
    ids = torch.tensor([1])
    qpos = e._home_qpos.clone().unsqueeze(0)
    qpos[0, 1], qpos[0, 3] = 1.2, -1.0  # shoulder forward, elbow open: hand pushed into the floor
    e.sim.reset_envs(ids, qpos, torch.zeros(1, e.model.nv))
    e.ctrl[1] = qpos[0, :8]
    data = mujoco.MjData(e.model)
    data.qpos[:] = qpos[0].numpy()
    mujoco.mj_forward(e.model, data)
    assert data.site_xpos[e._gripper_site][2] < 0.0  # the set-up really is below the floor
    _, _, _, extras = e.step(torch.zeros(2, 8))
    assert e.last_state.floor_contact.tolist() == [False, True]
    terms = extras["reward_groups"]
    assert terms[1, 2] < terms[0, 2]  # the regularization group lost no_floor_collision's 0.25·dt
    e.close()


def test_success_and_curriculum_update_per_env():
    e = make(num_envs=4, episode_length_s=0.1)  # 5 env steps
    ids = torch.arange(4)
    cube = torch.tensor([[0.7, 0.0, 0.03]]).expand(4, 3)
    target = cube.clone()
    target[2:, 2] += 0.3  # envs 2, 3: target 0.3 m up, unreachable in 5 steps
    e.curriculum.level[:] = 0.5
    e.reset_envs(ids, cube_pos=cube, target_pos=target)
    logs = []
    for _ in range(5):
        _, _, dones, extras = e.step(torch.zeros(4, 8))
        logs.append(extras["episode"])
    assert dones.tolist() == [1, 1, 1, 1]
    assert logs[-1]["Metrics/success"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert logs[-1]["Metrics/time_to_success_s"].tolist() == pytest.approx([0.02, 0.02])
    torch.testing.assert_close(e.curriculum.level, torch.tensor([0.52, 0.52, 0.42, 0.42]))
    e.close()


def test_domain_randomisation_switch():
    on, off = make(num_envs=16, dr=True), make(num_envs=16, dr=False)
    cube = on.model.body(panda.CUBE_BODY).id
    mass_on, mass_off = on.sim.model_field("body_mass")[:, cube], off.sim.model_field("body_mass")[:, cube]
    nominal = float(on.model.body_mass[cube])
    assert mass_on.std() > 0 and ((mass_on >= 0.5 * nominal - 1e-9) & (mass_on <= 2.0 * nominal + 1e-9)).all()
    assert (mass_off == nominal).all()
    kp = on.sim.model_field("actuator_gainprm")[:, :, 0]
    torch.testing.assert_close(kp, -on.sim.model_field("actuator_biasprm")[:, :, 1])
    assert kp.std(dim=0).min() > 0
    assert off.randomizer.obs_noise_scale == 0.0 and on.randomizer.obs_noise_scale == 1.0
    on.close()
    off.close()


def test_cube_size_randomisation_keeps_the_cube_resting_and_its_inertia_consistent():
    e = make(num_envs=16, dr=True)
    m = e.model
    cube, geom = m.body(panda.CUBE_BODY).id, m.geom(panda.CUBE_BODY).id
    size = e.sim.model_field("geom_size")[:, geom].double()
    factor = size / torch.tensor(panda.CUBE_HALF_SIZE, dtype=torch.float64)
    assert factor.std() > 0 and ((factor >= 0.85 - 1e-9) & (factor <= 1.15 + 1e-9)).all()
    torch.testing.assert_close(factor, factor[:, :1].expand(-1, 3))  # one factor on all three axes
    torch.testing.assert_close(e.sim.model_field("geom_rbound")[:, geom].double(), size.norm(dim=-1))
    torch.testing.assert_close(e.sim.model_field("geom_aabb")[:, geom, 3:].double(), size)
    # a box's inertia about its centre: I_x = m/3 (b² + c²) with half sizes (a, b, c)
    mass = e.sim.model_field("body_mass")[:, cube].double()
    a, b, c = size.unbind(-1)
    expect = torch.stack([b**2 + c**2, a**2 + c**2, a**2 + b**2], -1) * mass.unsqueeze(-1) / 3.0
    torch.testing.assert_close(e.sim.model_field("body_inertia")[:, cube].double(), expect, rtol=1e-3, atol=1e-9)
    torch.testing.assert_close(e.cube_start[:, 2], size[:, 2].float())  # resting on the floor at its own half height
    z0 = e.state.cube_pos[:, 2].clone()
    for _ in range(10):  # 0.2 s with the arm holding home: the cube neither sinks nor jumps
        e.step(torch.zeros(16, e.num_actions))
    assert (e.state.cube_pos[:, 2] - z0).abs().max() < 2e-3
    e.close()


def test_observation_matches_metadata(env):
    meta = lift_policy_metadata(env)
    obs = env.get_observations()
    assert obs["actor"].shape == (64, meta["observation_dim"]) == (64, 49)
    assert len(meta["joint_names"]) == len(meta["kp"]) == env.num_actions == 8
    assert meta["control_dt"] == pytest.approx(0.02) and meta["action_scale"] == 0.04
    assert set(meta["privileged_inputs"]) == {"gripper_to_cube", "cube_to_target", "cube_orientation"}
    assert env.max_episode_length == 150
