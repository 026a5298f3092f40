"""MuJoCo Warp backend (``sim.backend=warp``) on Warp's CPU device: parity with the native backend on the G1 scene,
resets, per-env (domain-randomised) model fields, contact counts, buffer overflows, zero-copy views, both launch paths.

Parity (N = 4 G1 envs, 50 control steps of decimation 4 = 1 s, the same start states and controls on both backends;
max over all steps and entries; measured 2026-11-26, mujoco-warp 4.0.0, warp-lang 1.19.0, CPU):

- :data:`QPOS_TOL_LYING` = 0.05 for the robot lying supine on the floor with ±0.1 / ±0.3 rad sinusoidal PD targets
  (measured 0.0081 / 0.028; MJX measures 0.008 / 0.028 on the same scenario). Pyramidal friction cones follow the
  contact frame, which MuJoCo Warp orients differently from C MuJoCo for capsule-plane contacts (as MJX does), so
  lying contacts push slightly differently and the chaotic lying motion drifts;
- :data:`QPOS_TOL_STANDING` = 1e-3 standing, PD holding the default pose or tracking ±0.02 rad (measured 1.5e-4 /
  7.8e-5), with qvel, sites, position/velocity sensors, actuator forces and the net foot contact forces (acceleration-
  stage contact sensors) within the tolerances of :func:`test_all_state_fields_match_native_when_standing`;
- domain-randomised fields (friction, masses with their subtree masses, inertia, COM, Kp/Kd, damping, armature,
  friction loss), different in each env and the same on both backends: :data:`QPOS_TOL_DR` = 2e-3 (measured in the
  test's print), while the randomisation itself moves the robot by more than 30x that;
- contact and constraint-row counts per env: equal to native's at every step for standing envs, and at >= 90 % of the
  (env, step) entries for lying ones (a contact at the edge of its margin may be in one engine's list only).

Warp compiles the G1 kernels once per machine (about 25 s on 2 loaded CPU cores; ``~/.cache/warp``), so the sims here
are module-scoped. ``UPRIGHT_WARP_TEST_DEVICE=cuda`` runs the same tests with the Warp sim on a GPU.
"""

from __future__ import annotations

import math
import os
import sys
import warnings

import mujoco
import numpy as np
import pytest
import torch

pytest.importorskip("mujoco_warp")  # CI installs the [warp] extra; without it this module skips

from sim_parity_testlib import (
    DECIMATION,
    STEPS,
    N,
    check_state_is_current,
    check_trajectories,
    initial_states,
    on_floor,
    posvel_sensor_columns,
    rollout,
)

from upright.robots import g1
from upright.sim import BACKENDS, PER_ENV_FIELDS, make_sim
from upright.sim.base import subtree_masses
from upright.sim.warp import WarpOverflowError, WarpOverflowWarning, WarpSim
from upright.tasks.standup.foot_contact import FootContactReader
from upright.tasks.standup.scene import standup_scene

DEVICE = os.environ.get("UPRIGHT_WARP_TEST_DEVICE", "cpu")
QPOS_TOL_LYING = 0.05
QPOS_TOL_STANDING = 1e-3
QPOS_TOL_DR = 2e-4


@pytest.fixture(scope="module")
def model():
    return standup_scene()


@pytest.fixture(scope="module")
def warp_sim(model):
    return WarpSim(model, N, device=DEVICE)


def _native(model):
    return make_sim("native", model, N, num_threads=1)


def _counts(sim) -> tuple[np.ndarray, np.ndarray]:
    """(ncon, nefc) per env of either backend."""
    if isinstance(sim, WarpSim):
        return sim.contact_counts().cpu().numpy(), sim.constraint_rows().cpu().numpy()
    return sim._batch.bind("ncon").copy(), sim._batch.bind("nefc").copy()


def _rollout(sim, qpos, qvel, ctrl) -> dict[str, np.ndarray]:
    """:func:`sim_parity_testlib.rollout` with the contact and constraint-row counts of every step."""
    return rollout(sim, qpos, qvel, ctrl, extra=lambda sim: dict(zip(("ncon", "nefc"), _counts(sim))))


@pytest.fixture(scope="module")
def rollouts(model, warp_sim):
    qpos, qvel, ctrl = initial_states(model)
    return _rollout(_native(model), qpos, qvel, ctrl), _rollout(warp_sim, qpos, qvel, ctrl)


def test_trajectories_match_native_lying_and_standing(rollouts):
    check_trajectories(*rollouts, QPOS_TOL_LYING, QPOS_TOL_STANDING)


def test_all_state_fields_match_native_when_standing(rollouts, model):
    native, warp = rollouts
    posvel = posvel_sensor_columns(model)
    feet = FootContactReader(model)
    for env in (2, 3):
        diffs = {
            "qvel": np.abs(warp["qvel"][:, env] - native["qvel"][:, env]).max(),
            "site_xpos": np.abs(warp["site_xpos"][:, env] - native["site_xpos"][:, env]).max(),
            "sensors": np.abs(warp["sensordata"][:, env, posvel] - native["sensordata"][:, env, posvel]).max(),
            "actuator_force": np.abs(warp["actuator_force"][:, env] - native["actuator_force"][:, env]).max(),
            "foot_force": (
                feet(torch.tensor(warp["sensordata"][:, env])) - feet(torch.tensor(native["sensordata"][:, env]))
            )
            .abs()
            .max()
            .item(),
        }
        print(f"env {env}: max |Δ| {diffs}")
        assert diffs["qvel"] < 0.1 and diffs["site_xpos"] < 5e-4 and diffs["sensors"] < 0.1, diffs
        assert diffs["actuator_force"] < 0.5 and diffs["foot_force"] < 25.0, diffs
    total = [feet(torch.tensor(r["sensordata"][:, 2]))[..., 2].sum(dim=1) for r in (warp, native)]
    print(f"env 2: max |Δ| of the feet's total vertical force {(total[0] - total[1]).abs().max().item():.3g} N")
    torch.testing.assert_close(total[0], total[1], atol=10.0, rtol=0)  # N, of ~300 N
    assert total[1].min() > 200


def _warp_contacts(sim: WarpSim, env: int, depth: float) -> list[tuple[int, int]]:
    """Sorted (geom1, geom2) of env ``env``'s contacts that penetrate deeper than ``depth`` m (Warp)."""
    d = sim._d
    n = int(d.nacon.numpy()[0])
    world, geom, dist = d.contact.worldid.numpy()[:n], d.contact.geom.numpy()[:n], d.contact.dist.numpy()[:n]
    return sorted((int(g[0]), int(g[1])) for g, w, x in zip(geom, world, dist) if w == env and x < -depth)


def test_contact_and_constraint_counts_match_native(model, rollouts, warp_sim):
    """At the same states (every native state of the rollouts, written into the Warp sim) both backends find the
    same contacts: the same geom pairs for every contact deeper than 10 µm (MuJoCo in float64 at that state), and
    counts (contacts, constraint rows) that differ at most by one contact, at < 3 % of the states: a contact at
    |dist| < 1 µm, on the margin in float32 (measured: 2 of 200). The free-running rollouts drift apart by sub-mm
    amounts, enough for a heel to touch in one and not in the other, so counts are compared on identical states."""
    native, _ = rollouts
    counts = {"ncon": [], "nefc": []}
    d = mujoco.MjData(model)
    for k in range(STEPS):
        warp_sim.reset_envs(torch.arange(N), torch.tensor(native["qpos"][k]), torch.tensor(native["qvel"][k]))
        ncon, nefc = _counts(warp_sim)
        counts["ncon"].append(ncon)
        counts["nefc"].append(nefc)
        for env in range(N):
            d.qpos[:] = native["qpos"][k, env]
            mujoco.mj_forward(model, d)
            deep = sorted((int(c.geom1), int(c.geom2)) for c in d.contact[: d.ncon] if c.dist < -1e-5)
            assert _warp_contacts(warp_sim, env, 1e-5) == deep, (k, env)
    for key, values in counts.items():
        delta = np.abs(native[key] - np.stack(values))  # (steps, N)
        print(f"{key}: equal at {(delta == 0).mean(axis=0)} of the states per env; native max {native[key].max()}")
        assert (delta == 0).mean() >= 0.97 and delta.max() <= (1 if key == "ncon" else 4), (key, delta.max())
    assert native["ncon"][:, :2].min() > 0 and native["ncon"][0, 2:].min() >= 20  # lying and standing contacts


def test_state_is_current_at_the_new_state(rollouts, model):
    """Sites and position/velocity sensors are those of the returned qpos/qvel, not of the step's start."""
    check_state_is_current(rollouts[1], model)


def test_graph_and_plain_launches_agree(model, rollouts):
    """The captured-graph path and one-by-one kernel launches compute the same trajectory."""
    _, graph = rollouts
    qpos, qvel, ctrl = initial_states(model)
    plain = WarpSim(model, N, device=DEVICE, graph=False)
    assert not plain.use_graph and WarpSim(model, 1, device=DEVICE, graph=True).use_graph
    out = _rollout(plain, qpos, qvel, ctrl[:10])
    for key in ("qpos", "qvel", "sensordata"):
        np.testing.assert_allclose(out[key], graph[key][:10], atol=1e-5, rtol=0)


def test_state_tensors_are_snapshots_and_fields_are_zero_copy(warp_sim, model):
    s0 = warp_sim.state
    assert s0.qpos.dtype == torch.float32 and s0.qpos.shape == (N, model.nq) and s0.qpos.device.type == DEVICE[:4]
    assert s0.site_xpos.shape == (N, model.nsite, 3) and s0.actuator_force.shape == (N, model.nu)
    kept = s0.qpos.clone()
    warp_sim.step(torch.zeros(N, model.nu, device=warp_sim.device), DECIMATION)
    torch.testing.assert_close(s0.qpos, kept)  # a state read before a step keeps its values
    assert not torch.equal(warp_sim.state.qpos, kept)
    mass = warp_sim.model_field("body_mass")
    assert mass.data_ptr() == warp_sim._m.body_mass.ptr  # the Warp array itself
    native = _native(model)
    for name in PER_ENV_FIELDS:  # same per-env shape as the native backend's (MjModel's) field
        assert warp_sim.model_field(name).shape == native.model_field(name).shape, name
        np.testing.assert_allclose(
            warp_sim.model_field(name).cpu().numpy(), native.model_field(name).numpy(), rtol=1e-6, atol=1e-6
        )


def test_reset_any_subset_touches_only_its_rows(warp_sim, model):
    dev = warp_sim.device
    q = torch.tensor(model.qpos0, dtype=torch.float32).repeat(N, 1).to(dev)
    q[:, 2] = 0.3
    q[:, 3:7] = torch.tensor([math.sqrt(0.5), 0, -math.sqrt(0.5), 0])
    warp_sim.reset_envs(torch.arange(N), q, torch.zeros(N, model.nv))
    warp_sim.set_body_wrench([1], torch.ones(N, 1, 6, device=dev))
    warp_sim.step(torch.ones(N, model.nu, device=dev), DECIMATION)
    graphs = len(warp_sim._graphs)
    before = warp_sim.state
    for ids in (torch.tensor([2]), torch.tensor([0, 3]), torch.tensor([0, 1, 3])):
        warp_sim.set_body_wrench([1], torch.ones(N, 1, 6, device=dev))
        q2 = q[: len(ids)].clone()
        q2[:, 0] = 5.0
        warp_sim.reset_envs(ids, q2, torch.zeros(len(ids), model.nv))
        after = warp_sim.state
        rest = [i for i in range(N) if i not in ids.tolist()]
        assert torch.all(after.qpos[ids, 0] == 5.0) and torch.all(after.qvel[ids] == 0)
        assert torch.all(after.actuator_force[ids] == 0) and torch.all(after.site_xpos[ids, :, 0] > 4.0)
        torch.testing.assert_close(after.qpos[rest], before.qpos[rest])
        torch.testing.assert_close(after.qvel[rest], before.qvel[rest])
        assert torch.all(warp_sim._ctrl[ids] == 0) and torch.all(warp_sim._xfrc[ids] == 0)  # mj_resetData
        assert torch.all(warp_sim._xfrc[rest, 1] == 1)
        before = after
    assert len(warp_sim._graphs) == graphs  # one reset graph for every subset
    warp_sim.set_body_wrench([1], torch.zeros(N, 1, 6, device=dev))


def _randomise(sim, rng: np.random.Generator, model) -> None:
    """Different values of every PER_ENV_FIELDS field in each env, written with set_model_field."""
    ids = torch.arange(N)
    scale = {
        "geom_friction": (0.5, 1.5),
        "geom_solref": (0.8, 1.2),
        "body_inertia": (0.8, 1.2),
        "actuator_gainprm": (0.8, 1.2),
        "dof_damping": (0.5, 2.0),
        "dof_armature": (0.5, 2.0),
    }
    base = {f: np.broadcast_to(getattr(model, f), (N, *getattr(model, f).shape)) for f in PER_ENV_FIELDS}
    for name, (lo, hi) in scale.items():
        sim.set_model_field(name, ids, torch.tensor(base[name] * rng.uniform(lo, hi, base[name].shape)))
    bias = base["actuator_biasprm"].copy()
    bias[..., 1] *= rng.uniform(0.8, 1.2, (N, model.nu))  # -Kp
    bias[..., 2] *= rng.uniform(0.8, 1.2, (N, model.nu))  # -Kd
    sim.set_model_field("actuator_biasprm", ids, torch.tensor(bias))
    mass = torch.tensor(base["body_mass"] * rng.uniform(0.8, 1.2, base["body_mass"].shape))
    sim.set_model_field("body_mass", ids, mass)
    sim.set_model_field("body_subtreemass", ids, subtree_masses(mass, model.body_parentid))
    ipos = base["body_ipos"].copy()
    ipos[:, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")] += rng.uniform(-0.05, 0.05, (N, 3))
    sim.set_model_field("body_ipos", ids, torch.tensor(ipos))  # the torso's COM (HoST); see docs/backends.md
    sim.set_model_field("dof_frictionloss", ids, torch.tensor(rng.uniform(0.0, 0.3, (N, model.nv))))


def test_domain_randomised_fields_match_native(model, warp_sim):
    """Envs 0-1 in free fall (10 m up) with ±0.3 rad PD targets, 2-3 standing with ±0.02: every PER_ENV_FIELDS
    field randomised per env, the same values on both backends."""
    qpos, qvel, ctrl = initial_states(model)
    qpos[:2], qvel[:2] = on_floor(model, [1, 0, 0, 0], g1.robot_info().default_pose), 0.0
    qpos[:2, 2] += 10.0
    ctrl = ctrl[:, [1, 1, 3, 3]]
    reference = _rollout(_native(model), qpos, qvel, ctrl)
    sims = [_native(model), warp_sim]
    try:
        for sim in sims:
            _randomise(sim, np.random.default_rng(7), model)
        native, warp = (_rollout(s, qpos, qvel, ctrl) for s in sims)
    finally:
        for name in PER_ENV_FIELDS:
            warp_sim.set_model_field(name, torch.arange(N), torch.tensor(getattr(model, name)))
    err = np.abs(native["qpos"] - warp["qpos"]).max(axis=(0, 2))
    moved = np.abs(native["qpos"] - reference["qpos"]).max(axis=(0, 2))
    print(f"randomised: max |Δqpos| native vs warp per env {err}; randomisation moved native by {moved}")
    assert (err < QPOS_TOL_DR).all(), err
    assert (moved > 100 * QPOS_TOL_DR).all(), moved  # the randomisation matters
    assert np.array_equal(native["ncon"][:, 2:], warp["ncon"][:, 2:])


def test_per_env_mass_changes_only_that_env(model, warp_sim):
    torso = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    original = warp_sim.model_field("body_mass").clone()
    dev = warp_sim.device
    q = torch.tensor(model.qpos0, dtype=torch.float32).repeat(N, 1)
    q[:, 2] = 0.3
    q[:, 3:7] = torch.tensor([math.sqrt(0.5), 0, -math.sqrt(0.5), 0])
    heavy = original[2:3].clone()
    heavy[0, torso] *= 3.0
    try:
        warp_sim.set_model_field("body_mass", torch.tensor([2]), heavy)
        assert warp_sim.model_field("body_mass")[2, torso] == pytest.approx(3.0 * float(original[2, torso]), rel=1e-6)
        warp_sim.reset_envs(torch.arange(N), q, torch.zeros(N, model.nv))
        ctrl = torch.tensor(g1.robot_info().default_pose, dtype=torch.float32).expand(N, -1).to(dev) + 0.3
        for _ in range(15):
            warp_sim.step(ctrl, DECIMATION)
        qpos = warp_sim.state.qpos.double()
        for i in (1, 3):
            torch.testing.assert_close(qpos[i], qpos[0], atol=1e-6, rtol=0)
        assert (qpos[2] - qpos[0]).abs().max() > 1e-3
    finally:
        warp_sim.set_model_field("body_mass", torch.arange(N), original)


def test_model_field_errors_name_the_fix(model, warp_sim):
    with pytest.raises(ValueError, match=r"extra_fields"):
        warp_sim.set_model_field("geom_size", torch.tensor([0]), torch.zeros(1))
    with pytest.raises(ValueError, match=r"cannot vary \['nq'\] per env"):
        WarpSim(model, 2, device=DEVICE, extra_fields=("nq",))
    sim = make_sim("warp", model, 2, device=DEVICE, extra_fields=("geom_size", "geom_rbound", "geom_aabb"))
    assert sim.model_field("geom_aabb").shape == (2, model.ngeom, 6)
    np.testing.assert_allclose(sim.model_field("geom_aabb")[1].cpu().numpy(), model.geom_aabb, atol=1e-6)


def test_buffer_overflow_is_an_error_that_names_the_fix(model, monkeypatch):
    """Too few contact slots or constraint rows for a lying robot: an error naming the variable, or one warning."""
    qpos, qvel, _ = initial_states(model)
    pose = torch.tensor(g1.robot_info().default_pose, dtype=torch.float32).expand(2, -1)

    def lie(sim):
        sim.reset_envs(torch.arange(2), torch.tensor(qpos[:2]), torch.tensor(qvel[:2]))

    with pytest.raises(WarpOverflowError, match="raise UPRIGHT_WARP_NCONMAX"):
        lie(WarpSim(model, 2, device=DEVICE, nconmax=2))  # 8 contacts in 4 slots, at the reset's collision pass
    with pytest.raises(WarpOverflowError, match=r"raise UPRIGHT_WARP_NJMAX \(now nconmax=128, njmax=8;"):
        lie(WarpSim(model, 2, device=DEVICE, njmax=8))  # 20 and 12 constraint rows
    monkeypatch.setenv("UPRIGHT_WARP_OVERFLOW", "warn")
    sim = WarpSim(model, 2, device=DEVICE, njmax=8)
    with pytest.warns(WarpOverflowWarning, match="UPRIGHT_WARP_NJMAX"):
        lie(sim)
    with pytest.warns(WarpOverflowWarning, match="UPRIGHT_WARP_NJMAX"):  # and again at the step: it still overflows
        sim.step(pose.to(sim.device), DECIMATION)
    usage = sim.usage()
    assert usage["max_constraint_rows"] > usage["njmax"] == 8


def test_settings_are_checked(model, monkeypatch):
    monkeypatch.setenv("UPRIGHT_WARP_NCONMAX", "lots")
    with pytest.raises(ValueError, match="nconmax from UPRIGHT_WARP_NCONMAX must be a positive integer, got 'lots'"):
        WarpSim(model, 2, device=DEVICE)
    monkeypatch.setenv("UPRIGHT_WARP_NCONMAX", "64")
    assert WarpSim(model, 2, device=DEVICE, njmax=100).nconmax == 64
    with pytest.raises(ValueError, match="overflow from argument must be 'error' or 'warn'"):
        WarpSim(model, 2, device=DEVICE, overflow="ignore")


def test_make_sim_builds_warp_and_names_the_extra(model, monkeypatch):
    assert "warp" in BACKENDS
    sim = make_sim("warp", model, 2, device=DEVICE)
    assert isinstance(sim, WarpSim) and sim.per_env_fields == PER_ENV_FIELDS
    monkeypatch.setitem(sys.modules, "upright.sim.warp", None)  # import fails as if mujoco-warp were absent
    with pytest.raises(ImportError, match=r'sim.backend=warp needs mujoco-warp: pip install -e "\.\[warp\]"'):
        make_sim("warp", model, 2)


def _floating(model, dev) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.tensor(model.qpos0, dtype=torch.float32).repeat(N, 1)
    q[:, 2] = 3.0
    q[:, 3:7] = torch.tensor([1.0, 0, 0, 0])
    return q.to(dev), torch.zeros(N, model.nv, device=dev)


def test_body_wrench_accelerates_as_newton_says(model, warp_sim):
    """A +z force F on the torso of a falling G1 raises it by F/M·t²/2 against free fall (M: total mass)."""
    dev = warp_sim.device
    torso = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    warp_sim.reset_envs(torch.arange(N), *_floating(model, dev))
    force = torch.tensor([0.0, 100.0, 200.0, 0.0])
    wrench = torch.zeros(N, 1, 6)
    wrench[:, 0, 2] = force
    ctrl = torch.tensor(g1.robot_info().default_pose, dtype=torch.float32).expand(N, -1).to(dev)
    try:
        warp_sim.set_body_wrench([torso], wrench.to(dev))
        for _ in range(5):
            warp_sim.step(ctrl, DECIMATION)
        t = 5 * DECIMATION * model.opt.timestep
        z = warp_sim.state.qpos[:, 2].double().cpu()
        expected = (force.double() / float(model.body_mass.sum()) * t * t / 2).numpy()
        np.testing.assert_allclose((z - z[0]).numpy(), expected, atol=2e-3)
    finally:
        warp_sim.set_body_wrench([torso], torch.zeros(N, 1, 6, device=dev))


def test_per_substep_controls_equal_held_controls_when_constant(model, warp_sim):
    dev = warp_sim.device
    pose = torch.tensor(g1.robot_info().default_pose, dtype=torch.float32).expand(N, -1).to(dev)
    ctrl = pose + 0.4
    results = []
    for schedule in (ctrl, ctrl.expand(DECIMATION, -1, -1), torch.stack([pose, pose, ctrl, ctrl])):
        warp_sim.reset_envs(torch.arange(N), *_floating(model, dev))
        warp_sim.step(schedule, DECIMATION)
        results.append(warp_sim.state.qpos.double().clone())
    torch.testing.assert_close(results[1], results[0], atol=1e-6, rtol=0)
    assert (results[2] - results[0]).abs().max() > 1e-4
    with pytest.raises(ValueError, match="ctrl must be"):
        warp_sim.step(torch.zeros(3, N, model.nu), DECIMATION)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a healthy step warns about nothing
        warp_sim.step(ctrl, DECIMATION)
