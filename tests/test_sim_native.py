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
    sim.reset_envs(torch.arange(n), torch.tensor(np.stack([s[0] for s in states])), torch.tensor(np.stack([s[1] for s in states])))
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
        cols = np.concatenate([
            np.arange(model.sensor_adr[s], model.sensor_adr[s] + model.sensor_dim[s])
            for s in range(model.nsensor) if model.sensor_needstage[s] <= mujoco.mjtStage.mjSTAGE_VEL.value
        ])  # fmt: skip
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
