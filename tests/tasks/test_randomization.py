"""Domain randomisation (HoST spec §6) of the standup env (its robustness disturbances: ``test_disturbances.py``).

Expected values come from the compiled model, ``upright.robots.g1.robot_info()`` (HoST's gains and the
torque limits) and the physics' own outputs (``actuator_force``, qpos), never from the randomiser's
code paths. The MJX test reuses ``tests/test_sim_mjx.py``'s N = 4 and scene so the compiled programs
are shared (and cached on disk).
"""

from __future__ import annotations

import copy
import math

import mujoco
import numpy as np
import pytest
import torch
from randomization_testlib import make_env

from upright.robots import g1
from upright.sim import PER_ENV_FIELDS, make_sim
from upright.tasks.standup.config import StandupEnvCfg
from upright.tasks.standup.env import StandupEnv
from upright.tasks.standup.randomization import (
    DisturbanceCfg,
    DomainRandCfg,
    contact_solref,
    restitution_to_damping_ratio,
    validate_disturbance,
    validate_domain_rand,
)

CREATION_FIELDS = ("geom_friction", "geom_solref", "body_mass", "body_inertia", "body_ipos")
RESET_FIELDS = ("actuator_gainprm", "actuator_biasprm")


def fields(env: StandupEnv, names=PER_ENV_FIELDS) -> dict[str, torch.Tensor]:
    return {k: env.sim.model_field(k).double().clone() for k in names}


def body(env: StandupEnv, name: str) -> int:
    return mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, name)


@pytest.fixture(scope="module")
def env16():
    return make_env(16, seed=5)


# ---------------------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("friction", (1.0, 0.1), r"env\.domain_rand\.friction .* inverted"),
        ("restitution", (0.0, 1.5), r"env\.domain_rand\.restitution .* <= 1"),
        ("link_mass_scale", (0.0, 1.2), r"env\.domain_rand\.link_mass_scale .* > 0"),
        ("action_delay_substeps", (-1, 4), r"env\.domain_rand\.action_delay_substeps .* >= 0"),
        ("action_delay_substeps", (0, 2.5), r"action_delay_substeps .*whole substeps"),
        ("torso_com_offset_axis_scale", (4.0, 4.0), r"torso_com_offset_axis_scale must have 3"),
    ],
)
def test_bad_domain_rand_values_name_the_key(key, value, match):
    cfg = DomainRandCfg(**{key: value})
    with pytest.raises(ValueError, match=match):
        validate_domain_rand(cfg)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("action_delay_substeps", -2, r"env\.disturbance\.action_delay_substeps .* >= 0"),
        ("torque_dropout", 1.5, r"env\.disturbance\.torque_dropout .* \[0, 1\]"),
        ("push_velocity", -1.0, r"env\.disturbance\.push_velocity"),
        ("push_interval_s", 0.0, r"env\.disturbance\.push_interval_s"),
        ("obs_noise_scale", -1.0, r"env\.disturbance\.obs_noise_scale"),
        ("friction", -0.1, r"env\.disturbance\.friction"),
    ],
)
def test_bad_disturbance_values_name_the_key(key, value, match):
    with pytest.raises(ValueError, match=match):
        validate_disturbance(DisturbanceCfg(**{key: value}))


def test_contact_coefficients_without_averaging_span_hosts_table():
    env = make_env(16, seed=2, domain_rand=DomainRandCfg(average_with_terrain=False))
    r = env.randomizer
    assert r.friction.min() >= 0.1 and r.friction.max() <= 1.0 and r.friction.max() - r.friction.min() > 0.4
    assert r.restitution.min() >= 0.0 and r.restitution.max() <= 1.0 and r.restitution.max() - r.restitution.min() > 0.4
    torch.testing.assert_close(env.sim.model_field("geom_friction")[:, 0, 0].float(), r.friction)


def test_env_rejects_an_inverted_range():
    with pytest.raises(ValueError, match=r"env\.domain_rand\.kp_factor"):
        make_env(2, domain_rand=DomainRandCfg(kp_factor=(1.15, 0.85)))


def test_structured_config_overrides_select_each_knob():
    from omegaconf import OmegaConf

    cfg = OmegaConf.structured(StandupEnvCfg)
    dotlist = [
        "domain_rand.enabled=false",
        "disturbance.obs_noise_scale=2",
        "disturbance.action_delay_substeps=16",
        "disturbance.push_velocity=1.0",
        "disturbance.payload_kg=8",
        "disturbance.torque_dropout=0.1",
        "disturbance.friction=0.3",
    ]
    cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(dotlist))
    d = cfg.disturbance
    assert (cfg.domain_rand.enabled, d.obs_noise_scale, d.action_delay_substeps) == (False, 2.0, 16)
    assert (d.push_velocity, d.payload_kg, d.torque_dropout, d.friction) == (1.0, 8.0, 0.1, 0.3)


# ---------------------------------------------------------------------------------------- sampling


def test_samples_lie_in_hosts_ranges_differ_across_envs_and_reach_the_model(env16):
    env, r, m = env16, env16.randomizer, env16.model
    n, torso = 16, body(env16, "torso_link")
    info = g1.robot_info()
    limit = torch.tensor(info.torque_limit[info.policy_joint_ids], dtype=torch.float32)
    # contact coefficients: the robot's sample averaged with HoST's ground (0.8, 0.3), as PhysX combines them
    for values, lo, hi in (
        (r.friction, 0.45, 0.9),
        (r.restitution, 0.15, 0.65),
        (r.link_mass_scale, 0.8, 1.2),
        (r.kp_factor, 0.85, 1.15),
        (r.kd_factor, 0.85, 1.15),
        (r.motor_strength, 0.9, 1.1),
        (r.torque_offset / limit, -0.05, 0.05),
        (r.delay.delay.float(), 0, 4),
    ):
        assert values.min() >= lo and values.max() <= hi, (lo, hi, values)
        assert values.reshape(n, -1)[:, 0].unique().numel() > 1  # differ across envs
    half = torch.tensor([0.12, 0.12, 0.06])
    assert torch.all(r.com_offset.abs() <= half + 1e-6) and torch.all(r.com_offset.std(0) > 0.2 * half)
    assert r.kp_factor.std(1).min() > 0  # per joint, not per env
    assert set(r.delay.delay.tolist()) <= set(range(5))

    f = fields(env)
    torch.testing.assert_close(f["geom_friction"][..., 0], r.friction.double()[:, None].expand(n, m.ngeom))
    nominal_torso = float(m.body_mass[torso])
    col = int((r._robot_bodies == torso).nonzero()[0, 0])
    expected = nominal_torso * r.link_mass_scale[:, col].double() + r.payload.double()
    torch.testing.assert_close(f["body_mass"][:, torso], expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(
        f["body_ipos"][:, torso] - torch.tensor(m.body_ipos[torso]), r.com_offset.double(), rtol=0, atol=1e-6
    )
    pelvis = body(env, "pelvis")
    ratio = f["body_mass"][:, pelvis] / float(m.body_mass[pelvis])
    inertia_ratio = f["body_inertia"][:, pelvis] / torch.tensor(m.body_inertia[pelvis])
    torch.testing.assert_close(inertia_ratio, ratio[:, None].expand(n, 3))
    assert torch.all(f["body_mass"][:, 0] == 0)  # the world body is not a link
    # by default no payload (HoST never trained with one) and the compiled, critically damped contacts
    assert torch.all(r.payload == 0)
    torch.testing.assert_close(f["geom_solref"], torch.tensor(m.geom_solref).expand(n, -1, -1))


def test_published_payload_and_restitution_as_damping_reach_the_model_when_asked():
    n = 16
    env = make_env(n, seed=2, domain_rand=DomainRandCfg(torso_payload=(-2.0, 5.0), restitution_as_damping=True))
    r, m, f = env.randomizer, env.model, fields(env)
    assert r.payload.min() >= -2.0 and r.payload.max() <= 5.0 and r.payload.unique().numel() > 1
    torso = body(env, "torso_link")
    col = int((r._robot_bodies == torso).nonzero()[0, 0])
    expected = float(m.body_mass[torso]) * r.link_mass_scale[:, col].double() + r.payload.double()
    torch.testing.assert_close(f["body_mass"][:, torso], expected, rtol=1e-6, atol=1e-6)
    # damping of every contact: b = 2ζ·sqrt(k), k = 1/0.02² (the compiled solref (0.02, 1))
    zeta = -f["geom_solref"][:, :, 1] / (2 * 50.0)
    torch.testing.assert_close(f["geom_solref"][:, :, 0], torch.full((n, m.ngeom), -2500.0, dtype=torch.float64))
    e = torch.exp(-zeta * math.pi / torch.sqrt(1 - zeta**2))
    torch.testing.assert_close(e, r.restitution.double()[:, None].expand(n, m.ngeom), atol=1e-4, rtol=0)


def test_creation_fields_stay_on_reset_and_reset_fields_change_only_for_the_reset_envs(env16):
    env = env16
    before = fields(env)
    delay = env.randomizer.delay.delay.clone()
    ids = torch.tensor([1, 3, 10])
    others = torch.tensor([i for i in range(16) if i not in ids.tolist()])
    env.reset_envs(ids)
    after = fields(env)
    for name in CREATION_FIELDS:
        torch.testing.assert_close(after[name], before[name], rtol=0, atol=0)
    for name in RESET_FIELDS:
        torch.testing.assert_close(after[name][others], before[name][others], rtol=0, atol=0)
        assert torch.all((after[name][ids] - before[name][ids]).abs().flatten(1).amax(1) > 0), name
    assert torch.equal(env.randomizer.delay.delay[others], delay[others])
    held = torch.tensor(g1.robot_info().held_joint_ids)
    model = env.model
    nominal_gain = torch.tensor(model.actuator_gainprm[held]).expand(16, -1, -1)
    torch.testing.assert_close(after["actuator_gainprm"][:, held], nominal_gain)


# ---------------------------------------------------------------------------------------- actuators


def _hand_set_state(env: StandupEnv, seed: int):
    """A floating G1 (1 m up) with random joint angles and velocities, and PD targets, some far enough to saturate."""
    gen = torch.Generator().manual_seed(seed)
    n, m = env.num_envs, env.model
    info = g1.robot_info()
    q = torch.tensor(info.default_pose, dtype=torch.float32) + 0.2 * (torch.rand(n, m.nu, generator=gen) - 0.5)
    qd = 6.0 * (torch.rand(n, m.nu, generator=gen) - 0.5)
    qpos = torch.tensor(m.qpos0, dtype=torch.float32).repeat(n, 1)
    qpos[:, 2] = 1.0
    qpos[:, env._q_adr] = q
    qvel = torch.zeros(n, m.nv)
    qvel[:, env._v_adr] = qd
    ctrl = q + 0.6 * (torch.rand(n, m.nu, generator=gen) - 0.5)
    return qpos, qvel, q, qd, ctrl


def _check_actuator_law(env: StandupEnv, tol: float):
    """Measured actuator_force = clamp(s·(Kp·f_kp·(target - q) - Kd·f_kd·q̇) + offset, ± limit), policy joints."""
    info = g1.robot_info()
    n, r = env.num_envs, env.randomizer
    qpos, qvel, q, qd, ctrl = _hand_set_state(env, seed=7)
    env.sim.reset_envs(torch.arange(n), qpos, qvel)
    env.sim.step(ctrl, 1)
    force = env.sim.state.actuator_force.double().cpu()
    pol, held = info.policy_joint_ids, info.held_joint_ids
    kp, kd, limit = (torch.tensor(x[pol]) for x in (info.kp, info.kd, info.torque_limit))
    s, fkp, fkd, off = (x.double().cpu() for x in (r.motor_strength, r.kp_factor, r.kd_factor, r.torque_offset))
    pd = s * (kp * fkp * (ctrl[:, pol].double() - q[:, pol].double()) - kd * fkd * qd[:, pol].double())
    expected = torch.maximum(torch.minimum(pd + off, limit), -limit)
    torch.testing.assert_close(force[:, pol], expected, rtol=0, atol=tol)
    saturated = (pd + off).abs() > limit
    assert 0 < int(saturated.sum()) < saturated.numel()  # the clamp is exercised, and not everywhere
    # the randomisation matters: the nominal law is off by more than the tolerance
    nominal_pd = kp * (ctrl[:, pol].double() - q[:, pol].double()) - kd * qd[:, pol].double()
    nominal = torch.maximum(torch.minimum(nominal_pd, limit), -limit)
    assert (nominal - force[:, pol]).abs().max() > 100 * tol
    # held joints keep HoST's nominal PD
    kp_h, kd_h, lim_h = (torch.tensor(x[held]) for x in (info.kp, info.kd, info.torque_limit))
    held_pd = kp_h * (ctrl[:, held].double() - q[:, held].double()) - kd_h * qd[:, held].double()
    held_expected = torch.maximum(torch.minimum(held_pd, lim_h), -lim_h)
    torch.testing.assert_close(force[:, held], held_expected, rtol=0, atol=tol)


def test_actuator_force_follows_the_randomised_pd_law_native(env16):
    _check_actuator_law(env16, tol=1e-4)  # samples are float32: products agree to ~1e-6 N·m
    env16.reset_all()


def test_torque_offset_applies_before_the_clamp():
    env = make_env(2, domain_rand=DomainRandCfg(torque_offset=(0.05, 0.05)))
    info = g1.robot_info()
    pol = info.policy_joint_ids
    limit = torch.tensor(info.torque_limit[pol], dtype=torch.float64)
    qpos, qvel, q, qd, ctrl = _hand_set_state(env, seed=3)
    qvel.zero_()
    env.sim.reset_envs(torch.arange(2), qpos, qvel)
    big = q.clone()
    big[:, pol] += 5.0  # far beyond saturation: the offset cannot push past the limit
    env.sim.step(big, 1)
    torch.testing.assert_close(env.sim.state.actuator_force[:, pol].double(), limit.expand(2, -1))
    env.sim.reset_envs(torch.arange(2), qpos, qvel)
    env.sim.step(q, 1)  # zero PD error, zero velocity: only the offset acts
    force = env.sim.state.actuator_force[:, pol].double()
    torch.testing.assert_close(force, 0.05 * limit.expand(2, -1), rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------------------- masses, restitution


def test_fixed_payload_adds_to_the_torso_mass_only():
    env = make_env(2, domain_rand=DomainRandCfg(enabled=False), disturbance=DisturbanceCfg(payload_kg=8.0))
    m, torso = env.model, body(env, "torso_link")
    mass = env.sim.model_field("body_mass").double()
    expected = torch.tensor(m.body_mass).repeat(2, 1)
    expected[:, torso] += 8.0
    torch.testing.assert_close(mass, expected)
    total = torch.full((2,), float(m.body_mass.sum()) + 8.0, dtype=torch.float64)
    torch.testing.assert_close(env.randomizer.robot_mass.double(), total)


def test_randomised_masses_carry_their_subtree_masses_and_centre_of_mass(env16):
    """Each env's ``body_subtreemass`` is what ``mj_setConst`` computes for its randomised masses, and with the
    env's two fields MuJoCo's whole-body centre of mass (``subtree_com`` of the pelvis) is the mass-weighted mean
    of the bodies' centres of mass (a stale subtree mass scales it)."""
    m = env16.model
    mass = env16.sim.model_field("body_mass").double()
    sub = env16.sim.model_field("body_subtreemass").double()
    assert (mass - torch.tensor(m.body_mass)).abs().max() > 1e-3, "masses were not randomised"
    pelvis = body(env16, "pelvis")
    for i in (0, 7):
        reference = copy.copy(m)
        reference.body_mass[:] = mass[i].numpy()
        mujoco.mj_setConst(reference, mujoco.MjData(reference))
        np.testing.assert_allclose(sub[i].numpy(), reference.body_subtreemass, rtol=1e-6)
        env_model = copy.copy(m)
        env_model.body_mass[:] = mass[i].numpy()
        env_model.body_subtreemass[:] = sub[i].numpy()
        data = mujoco.MjData(env_model)
        data.qpos[:] = env16.sim.state.qpos[i].double().numpy()
        mujoco.mj_forward(env_model, data)
        w = env_model.body_mass[pelvis:, None]
        np.testing.assert_allclose(data.subtree_com[pelvis], (w * data.xipos[pelvis:]).sum(0) / w.sum(), atol=1e-9)


def _ball_model() -> mujoco.MjModel:
    xml = """<mujoco><option timestep="0.005" integrator="implicitfast"/><worldbody>
    <geom type="plane" size="0 0 1"/><body pos="0 0 0.5"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body>
    </worldbody></mujoco>"""
    return mujoco.MjModel.from_xml_string(xml)


@pytest.mark.parametrize("backend", ["native", pytest.param("mjx", marks=pytest.mark.slow)])
def test_restitution_sets_how_high_a_dropped_ball_bounces(backend):
    """A ball dropped from 0.4 m above contact rebounds to about e²·0.4 m; e = 0 is the compiled contact."""
    if backend == "mjx":
        pytest.importorskip("jax")
    model = _ball_model()
    e = torch.tensor([0.0, 0.5, 0.9, 0.0])
    sim = make_sim(backend, model, 4, num_threads=1)
    solref = contact_solref(torch.tensor(model.geom_solref), restitution_to_damping_ratio(e.double()), 0.005)
    sim.set_model_field("geom_solref", torch.arange(3), solref[:3])  # env 3 keeps the compiled solref
    z = []
    for _ in range(300):
        sim.step(torch.zeros(4, 0), 1)
        z.append(sim.state.qpos[:, 2].double().clone())
    z = torch.stack(z)
    first_contact = int((z[:, 0] < 0.1).float().argmax())
    rebound = z[first_contact + 5 :].amax(0) - 0.1
    assert rebound[0] < 0.01 and rebound[2] > 0.25  # e=0 barely leaves the floor; e=0.9 bounces high
    np.testing.assert_allclose(rebound[1:3].numpy(), (e[1:3] ** 2 * 0.4).numpy(), rtol=0.15)
    tol = 1e-9 if backend == "native" else 1e-5  # MJX runs in float32
    torch.testing.assert_close(z[:, 0], z[:, 3], rtol=0, atol=tol)  # e = 0 reproduces the compiled contact


# ---------------------------------------------------------------------------------------- switch off


def test_disabled_randomisation_leaves_the_model_and_the_reset_pose_untouched():
    env = make_env(3, unactuated_steps=0, domain_rand=DomainRandCfg(enabled=False))
    m = env.model
    received = []
    step = env.sim.step
    env.sim.step = lambda ctrl, n: (received.append(ctrl.shape), step(ctrl, n))[1]
    torch.testing.assert_close(
        env.sim.state.qpos[:, env._q_adr].double(),
        torch.tensor(g1.robot_info().default_pose).expand(3, -1),
        rtol=0,
        atol=1e-6,
    )
    for _ in range(3):
        env.step(0.2 * torch.randn(3, 23))
    env.reset_envs(torch.tensor([0, 2]))
    for name, value in fields(env).items():
        torch.testing.assert_close(value, torch.tensor(getattr(m, name)).double().expand_as(value), rtol=0, atol=0)
    assert all(shape == (3, m.nu) for shape in received)  # the held-control hot path
    assert torch.all(env.randomizer.delay.delay == 0)


# ---------------------------------------------------------------------------------------- MJX


@pytest.mark.slow
def test_mjx_backend_gets_the_same_samples_and_pd_law():
    """Same seed on both backends: the same samples, the same per-env model fields, and MJX's measured
    actuator force follows the randomised PD law (float32)."""
    pytest.importorskip("jax")
    n = 4  # tests/test_sim_mjx.py's N: the compiled programs are shared
    native = make_env(n, seed=11)
    mjx = make_env(n, seed=11, backend="mjx")
    for name in ("friction", "restitution", "payload", "kp_factor", "torque_offset"):
        torch.testing.assert_close(getattr(mjx.randomizer, name), getattr(native.randomizer, name))
    assert torch.equal(mjx.randomizer.delay.delay, native.randomizer.delay.delay)
    for name in CREATION_FIELDS + RESET_FIELDS:
        torch.testing.assert_close(
            mjx.sim.model_field(name).double(), native.sim.model_field(name).double(), rtol=1e-6, atol=1e-5
        )
    _check_actuator_law(mjx, tol=2e-3)
    mjx.reset_all()
    mjx.randomizer.delay.delay[:] = torch.tensor([0, 1, 3, 4])
    obs, *_ = mjx.step(0.2 * torch.ones(n, 23))  # the delayed (per-substep) path runs on MJX
    assert torch.isfinite(obs["actor"]).all()
