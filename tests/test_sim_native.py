"""Native batched backend: parallel envs match a plain single-env MuJoCo loop; resets write rows."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from upright.sim import make_sim
from upright.tasks.standup.scene import standup_scene


@pytest.fixture(scope="module")
def model():
    return standup_scene()


def lying_state(model, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = mujoco.MjData(model)
    data.qpos[2] = 0.3
    data.qpos[3:7] = [np.sqrt(0.5), 0, -np.sqrt(0.5), 0]
    data.qpos[7:] += rng.uniform(-0.2, 0.2, model.nu)
    return data.qpos.copy(), data.qvel.copy()


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_matches_single_env_loop(model, threads):
    n, decimation, steps = 3, 4, 10
    sim = make_sim("native", model, n, num_threads=threads)
    states = [lying_state(model, s) for s in range(n)]
    sim.reset_envs(
        torch.arange(n), torch.tensor(np.stack([s[0] for s in states])), torch.tensor(np.stack([s[1] for s in states]))
    )
    rng = np.random.default_rng(0)
    ctrls = rng.uniform(-0.5, 0.5, (steps, n, model.nu))
    for k in range(steps):
        sim.step(torch.tensor(ctrls[k]), decimation)
    for i in range(n):
        data = mujoco.MjData(model)
        data.qpos[:], data.qvel[:] = states[i]
        mujoco.mj_forward(model, data)
        for k in range(steps):
            data.ctrl[:] = ctrls[k, i]
            mujoco.mj_step(model, data, nstep=decimation)
        # float32 tensors of float64 physics
        np.testing.assert_allclose(sim.state.qpos[i].numpy(), data.qpos, atol=1e-5)
        np.testing.assert_allclose(sim.state.qvel[i].numpy(), data.qvel, atol=1e-4)
        mujoco.mj_forward(model, data)
        np.testing.assert_allclose(sim.state.site_xpos[i].numpy(), data.site_xpos, atol=1e-5)
        # position- and velocity-stage sensors are current after a step (acceleration ones are not)
        cols = np.concatenate(
            [
                np.arange(model.sensor_adr[s], model.sensor_adr[s] + model.sensor_dim[s])
                for s in range(model.nsensor)
                if model.sensor_needstage[s] <= mujoco.mjtStage.mjSTAGE_VEL.value
            ]
        )
        np.testing.assert_allclose(sim.state.sensordata[i].numpy()[cols], data.sensordata[cols], atol=1e-4)


def test_reset_only_touches_given_rows(model):
    sim = make_sim("native", model, 4, num_threads=1)
    q, v = lying_state(model, 1)
    sim.reset_envs(torch.arange(4), torch.tensor(q).expand(4, -1), torch.tensor(v).expand(4, -1))
    sim.step(torch.zeros(4, model.nu), 4)
    before = sim.state.qpos.clone()
    q2 = q.copy()
    q2[0] = 5.0
    sim.reset_envs(torch.tensor([2]), torch.tensor(q2)[None], torch.tensor(v)[None])
    after = sim.state.qpos
    assert after[2, 0] == pytest.approx(5.0)
    torch.testing.assert_close(after[[0, 1, 3]], before[[0, 1, 3]])


def test_unknown_backend_lists_valid(model):
    with pytest.raises(ValueError, match="Valid backends: native"):
        make_sim("physx", model, 2)


def test_per_env_com_offset_keeps_collision_culling_right(model):
    """A per-env ``body_ipos`` write equals a model compiled with that COM whose bounding volumes (``bvh_aabb``)
    were recomputed (``mj_setConst``; its other constants kept compiled, as on every backend): floor contacts of
    the moved torso are not culled. Without moving the boxes the lying G1 differs by ~0.7 rad/s after one substep."""
    torso = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    delta = np.array([0.1, -0.1, 0.05])
    reference = standup_scene()
    reference.body_ipos[torso] += delta
    recomputed = standup_scene()
    recomputed.body_ipos[torso] += delta
    mujoco.mj_setConst(recomputed, mujoco.MjData(recomputed))
    reference.bvh_aabb[:] = recomputed.bvh_aabb
    settle = mujoco.MjData(model)  # lying on the floor, at rest after 1 s
    settle.qpos[:] = lying_state(model, seed=0)[0]
    settle.ctrl[:] = settle.qpos[7:]
    mujoco.mj_step(model, settle, nstep=200)
    qpos, qvel = settle.qpos.copy(), settle.qvel.copy()
    d = mujoco.MjData(reference)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, model.qpos0[7:]
    mujoco.mj_step(reference, d)
    assert d.ncon > 0

    sim = make_sim("native", model, 2, num_threads=1)
    ipos = torch.tensor(model.body_ipos).repeat(2, 1, 1)
    ipos[1, torso] += torch.tensor(delta)
    sim.set_model_field("body_ipos", torch.tensor([1]), ipos[1:])
    sim.reset_envs(torch.arange(2), torch.tensor(qpos).repeat(2, 1), torch.tensor(qvel).repeat(2, 1))
    sim.step(torch.tensor(model.qpos0[7:]).repeat(2, 1), 1)
    np.testing.assert_allclose(sim.state.qvel[1].double().numpy(), d.qvel, atol=1e-4)
    assert np.abs(sim.state.qvel[0].double().numpy() - d.qvel).max() > 1e-2  # env 0 keeps the compiled COM
