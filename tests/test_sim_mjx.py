"""MJX backend: parity with the native backend, state exposure, resets, per-env model fields, impl choice.

Parity (:func:`test_trajectories_match_native_lying_and_standing`): from the same initial states and
control sequences, N = 4 G1 envs are stepped 50 control steps (decimation 4: 1 s of physics)
on both backends, and their qpos must agree within

- :data:`QPOS_TOL_LYING` = 0.05 (max |Δ| over all steps and all qpos entries: m, quaternion units, rad)
  for the robot lying supine on the floor with sinusoidal PD targets (measured: 0.008 at ±0.1 rad,
  0.028 at ±0.3 rad, with the 429 self-collision pairs);
- :data:`QPOS_TOL_STANDING` = 2e-3 for the robot standing in the default pose, PD holding it
  (measured: 1.4e-4).

Why the lying tolerance is not float32-tight: for pyramidal friction cones the friction pyramid's
orientation follows the contact frame, and MJX orients capsule-plane contact frames differently
from C MuJoCo (C aligns the first tangent with the capsule axis). With elliptic cones the two
backends' accelerations agree to float32 precision (see docs/backends.md).

All MJX tests share one N and one model, so the compiled programs are built once per process (and
loaded from JAX's persistent cache afterwards).
"""

from __future__ import annotations

import math
import sys

import mujoco
import numpy as np
import pytest
import torch
from sim_parity_testlib import (
    DECIMATION,
    N,
    check_state_is_current,
    check_trajectories,
    initial_states,
    posvel_sensor_columns,
    rollout,
)

from upright.robots import g1
from upright.sim import BACKENDS, PER_ENV_FIELDS, make_sim
from upright.tasks.standup.scene import standup_scene

QPOS_TOL_LYING = 0.05
"""Max |qpos_native - qpos_mjx| over 50 steps, lying with sinusoidal PD targets (measured 0.028)."""
QPOS_TOL_STANDING = 2e-3
"""Max |qpos_native - qpos_mjx| over 50 steps, standing with PD holding the default pose (measured 1.4e-4)."""
QVEL_TOL_STANDING = 0.1
"""Max |qvel_native - qvel_mjx| over 50 steps, standing (m/s, rad/s; measured 0.038 on an AVX2-only EPYC, < 0.02 on an
AVX512 one). A robot that falls on one backend and not the other differs by about 1 m/s."""


@pytest.fixture(scope="module")
def model():
    return standup_scene()


@pytest.fixture(scope="module")
def mjx_sim(model):
    pytest.importorskip("jax")  # CI installs the [mjx] extra; without jax these tests skip
    from upright.sim.mjx import MjxSim

    return MjxSim(model, N)


@pytest.fixture(scope="module")
def rollouts(model, mjx_sim):
    qpos, qvel, ctrl = initial_states(model)
    native = rollout(make_sim("native", model, N, num_threads=1), qpos, qvel, ctrl)
    mjx = rollout(mjx_sim, qpos, qvel, ctrl)
    return native, mjx


def test_trajectories_match_native_lying_and_standing(rollouts):
    native, mjx = rollouts
    check_trajectories(native, mjx, QPOS_TOL_LYING, QPOS_TOL_STANDING)


def test_all_state_fields_match_native_when_standing(rollouts, model):
    native, mjx = rollouts
    cols = posvel_sensor_columns(model)
    env = 2  # standing, PD holding: both backends follow the same trajectory to float32 precision
    # velocities: a foot contact that MJX's float32 activates one substep apart from C MuJoCo's float64 leaves a
    # transient of a few cm/s (rad/s) at that step: max |dqvel| 0.038 at one of 50 steps on an AMD EPYC with AVX2
    # only, below 0.02 on the AVX512 EPYC that set the first tolerance; the positions of that trajectory agree to
    # 2e-3 (QPOS_TOL_STANDING)
    np.testing.assert_allclose(mjx["qvel"][:, env], native["qvel"][:, env], atol=QVEL_TOL_STANDING)
    np.testing.assert_allclose(mjx["site_xpos"][:, env], native["site_xpos"][:, env], atol=1e-3)
    stage = {
        c: model.sensor_needstage[s]
        for s in range(model.nsensor)
        for c in range(model.sensor_adr[s], model.sensor_adr[s] + model.sensor_dim[s])
    }
    pos = [c for c in cols if stage[c] <= mujoco.mjtStage.mjSTAGE_POS.value]
    vel = [c for c in cols if stage[c] == mujoco.mjtStage.mjSTAGE_VEL.value]  # gyro, velocimeter: the same transient
    assert pos and vel
    np.testing.assert_allclose(mjx["sensordata"][:, env][..., pos], native["sensordata"][:, env][..., pos], atol=0.02)
    sensed = mjx["sensordata"][:, env][..., vel], native["sensordata"][:, env][..., vel]
    np.testing.assert_allclose(*sensed, atol=QVEL_TOL_STANDING)
    np.testing.assert_allclose(mjx["actuator_force"][:, env], native["actuator_force"][:, env], atol=0.5)


def test_state_is_current_at_the_new_state(rollouts, model):
    """Sites and position/velocity sensors are those of the returned qpos/qvel (not of the step's start)."""
    check_state_is_current(rollouts[1], model)


def test_state_is_zero_copy_float32(mjx_sim, model):
    s = mjx_sim.state
    assert s.qpos.dtype == torch.float32 and s.qpos.shape == (N, model.nq)
    assert s.site_xpos.shape == (N, model.nsite, 3) and s.actuator_force.shape == (N, model.nu)
    assert s.qpos.data_ptr() == mjx_sim._d.qpos.unsafe_buffer_pointer()  # DLPack: the JAX buffer itself


def test_reset_any_subset_touches_only_its_rows_without_recompiling(mjx_sim, model):
    q = torch.tensor(model.qpos0, dtype=torch.float32).repeat(N, 1)
    q[:, 2] = 0.3
    q[:, 3:7] = torch.tensor([math.sqrt(0.5), 0, -math.sqrt(0.5), 0])
    mjx_sim.reset_envs(torch.arange(N), q, torch.zeros(N, model.nv))
    mjx_sim.step(torch.zeros(N, model.nu), DECIMATION)
    compiled = mjx_sim._reset._cache_size()
    before = mjx_sim.state.qpos.clone()
    for ids in (torch.tensor([2]), torch.tensor([0, 3]), torch.tensor([0, 1, 3])):
        q2 = q[: len(ids)].clone()
        q2[:, 0] = 5.0
        mjx_sim.reset_envs(ids, q2, torch.zeros(len(ids), model.nv))
        after = mjx_sim.state
        rest = [i for i in range(N) if i not in ids.tolist()]
        assert torch.all(after.qpos[ids, 0] == 5.0)
        torch.testing.assert_close(after.qpos[rest], before[rest])
        assert torch.all(after.qvel[ids] == 0) and torch.all(after.actuator_force[ids] == 0)
        # sites follow the new qpos at once (position stage recomputed for the reset rows)
        assert torch.all(after.site_xpos[ids, :, 0] > 4.0)
        before = after.qpos.clone()
    assert mjx_sim._reset._cache_size() == compiled  # one program for every subset size


@pytest.mark.parametrize("backend", ("native", "mjx"))  # warp: tests/sim/test_sim_warp.py
def test_per_env_mass_changes_only_that_env(backend, model, request):
    """set_model_field on one env: that env moves differently, the others stay identical to each other."""
    sim = request.getfixturevalue("mjx_sim") if backend == "mjx" else make_sim("native", model, N, num_threads=1)
    torso = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    original = sim.model_field("body_mass").clone()
    assert original.shape == (N, model.nbody)
    q = torch.tensor(model.qpos0, dtype=torch.float32).repeat(N, 1)
    q[:, 2] = 0.3
    q[:, 3:7] = torch.tensor([math.sqrt(0.5), 0, -math.sqrt(0.5), 0])
    heavy = original[2:3].clone()
    heavy[0, torso] *= 3.0
    try:
        sim.set_model_field("body_mass", torch.tensor([2]), heavy)
        masses = sim.model_field("body_mass")
        assert masses[2, torso] == pytest.approx(3.0 * float(original[2, torso]), rel=1e-5)
        torch.testing.assert_close(masses[[0, 1, 3]], original[[0, 1, 3]])
        sim.reset_envs(torch.arange(N), q, torch.zeros(N, model.nv))
        ctrl = torch.tensor(g1.robot_info().default_pose, dtype=torch.float32).expand(N, -1) + 0.3
        for _ in range(15):
            sim.step(ctrl, DECIMATION)
        qpos = sim.state.qpos.double()
        for i in (1, 3):
            torch.testing.assert_close(qpos[i], qpos[0], atol=1e-6, rtol=0)
        assert (qpos[2] - qpos[0]).abs().max() > 1e-3
    finally:
        sim.set_model_field("body_mass", torch.arange(N), original)
    torch.testing.assert_close(sim.model_field("body_mass"), original)


@pytest.mark.parametrize("backend", ("native", "mjx"))  # warp: tests/sim/test_sim_warp.py
def test_set_model_field_rejects_fields_that_cannot_vary(backend, model, request):
    sim = request.getfixturevalue("mjx_sim") if backend == "mjx" else make_sim("native", model, N, num_threads=1)
    with pytest.raises(ValueError):
        sim.set_model_field("nq", torch.tensor([0]), torch.zeros(1))
    for name in PER_ENV_FIELDS:  # every backend varies the shared set
        assert sim.model_field(name).shape[0] == N


def test_impl_choice():
    pytest.importorskip("jax")
    from upright.sim.mjx import choose_impl

    assert choose_impl(warp_installed=True, cuda_device=True) == "warp"
    assert choose_impl(warp_installed=True, cuda_device=False) == "jax"
    assert choose_impl(warp_installed=False, cuda_device=True) == "jax"
    assert choose_impl(warp_installed=False, cuda_device=False) == "jax"


def test_default_impl_on_cpu_and_override(monkeypatch):
    jax = pytest.importorskip("jax")
    from upright.sim.mjx import IMPL_ENV_VAR, default_impl

    cpu = jax.devices("cpu")[0]
    monkeypatch.delenv(IMPL_ENV_VAR, raising=False)
    assert default_impl(cpu) == "jax"  # no CUDA device: JAX kernels
    monkeypatch.setenv(IMPL_ENV_VAR, "warp")
    assert default_impl(cpu) == "warp"
    monkeypatch.setenv(IMPL_ENV_VAR, "cuda")
    with pytest.raises(ValueError, match="jax' or 'warp"):
        default_impl(cpu)


def test_make_sim_builds_mjx(model, mjx_sim):
    assert BACKENDS == ("native", "mjx", "warp")
    sim = make_sim("mjx", model, N)
    assert type(sim).__name__ == "MjxSim" and sim.impl == "jax"
    assert sim._advance is mjx_sim._advance  # compiled programs are shared between sims


def test_missing_jax_names_the_extra(model, monkeypatch):
    monkeypatch.setitem(sys.modules, "upright.sim.mjx", None)  # import fails as if jax were absent
    with pytest.raises(ImportError, match=r'pip install -e "\.\[mjx\]"'):
        make_sim("mjx", model, 2)


def _floating(model) -> tuple[torch.Tensor, torch.Tensor]:
    """Every env 3 m above the floor, upright, at rest (free fall for the next 0.1 s)."""
    q = torch.tensor(model.qpos0, dtype=torch.float32).repeat(N, 1)
    q[:, 2] = 3.0
    q[:, 3:7] = torch.tensor([1.0, 0, 0, 0])
    return q, torch.zeros(N, model.nv)


@pytest.mark.parametrize("backend", ("native", "mjx"))  # warp: tests/sim/test_sim_warp.py
def test_body_wrench_accelerates_as_newton_says(backend, model, request):
    """A +z force F on the torso of a falling G1 changes its COM vertical velocity by F/M·t (M = total mass)."""
    sim = request.getfixturevalue("mjx_sim") if backend == "mjx" else make_sim("native", model, N, num_threads=1)
    torso = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    q, v = _floating(model)
    sim.reset_envs(torch.arange(N), q, v)
    force = torch.tensor([0.0, 100.0, 200.0, 0.0])
    wrench = torch.zeros(N, 1, 6)
    wrench[:, 0, 2] = force
    ctrl = torch.tensor(g1.robot_info().default_pose, dtype=torch.float32).expand(N, -1)
    try:
        sim.set_body_wrench([torso], wrench)
        steps = 5
        for _ in range(steps):
            sim.step(ctrl, DECIMATION)
        t = steps * DECIMATION * model.opt.timestep
        z = sim.state.qpos[:, 2].double()
        # z(t) = z0 - g t²/2 + (F/M) t²/2 for the COM; the pelvis follows it closely over 0.1 s of free fall
        dz = (z - z[0]).numpy()
        expected = (force.double() / float(model.body_mass.sum()) * t * t / 2).numpy()
        np.testing.assert_allclose(dz, expected, atol=2e-3)
        assert dz[2] > 0.02  # 200 N: 3 cm higher than free fall after 0.1 s
    finally:
        sim.set_body_wrench([torso], torch.zeros(N, 1, 6))


@pytest.mark.parametrize("backend", ("native", "mjx"))  # warp: tests/sim/test_sim_warp.py
def test_per_substep_controls_equal_held_controls_when_constant(backend, model, request):
    """ctrl (nsub, N, nu) with equal rows = held ctrl (N, nu); different rows change the motion (action delay)."""
    sim = request.getfixturevalue("mjx_sim") if backend == "mjx" else make_sim("native", model, N, num_threads=1)
    pose = torch.tensor(g1.robot_info().default_pose, dtype=torch.float32).expand(N, -1)
    ctrl = pose + 0.4
    q, v = _floating(model)
    results = []
    for schedule in (ctrl, ctrl.expand(DECIMATION, -1, -1), torch.stack([pose, pose, ctrl, ctrl])):
        sim.reset_envs(torch.arange(N), q, v)
        sim.step(schedule, DECIMATION)
        results.append(sim.state.qpos.double().clone())
    torch.testing.assert_close(results[1], results[0], atol=1e-6, rtol=0)
    assert (results[2] - results[0]).abs().max() > 1e-4  # the first two substeps used the old target
    with pytest.raises(ValueError, match="ctrl must be"):
        sim.step(torch.zeros(3, N, model.nu), DECIMATION)
