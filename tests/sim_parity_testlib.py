"""The parity scenario that every GPU backend's tests (``tests/test_sim_mjx.py``, ``tests/sim/test_sim_warp.py``)
compare against the native backend: N = 4 G1 envs, 50 control steps of decimation 4 (1 s of physics), envs 0-1 lying
supine with ±0.1 / ±0.3 rad sinusoidal PD targets, envs 2-3 standing with PD holding the default pose / tracking
±0.02 rad. Each test module states its backend's tolerances."""

from __future__ import annotations

import math
from collections.abc import Callable

import mujoco
import numpy as np
import torch

from upright.robots import g1

N, STEPS, DECIMATION = 4, 50, 4
STATE_KEYS = ("qpos", "qvel", "sensordata", "site_xpos", "actuator_force")


def on_floor(m: mujoco.MjModel, quat, joints) -> np.ndarray:
    """qpos with the given base orientation and joint angles, lowered until the robot's lowest collision geom
    (capsules and spheres) touches the floor."""
    d = mujoco.MjData(m)
    d.qpos[2], d.qpos[3:7], d.qpos[7:] = 1.0, quat, joints
    mujoco.mj_kinematics(m, d)
    low = []
    for i in range(m.ngeom):
        if m.geom_bodyid[i] == 0 or not (m.geom_contype[i] or m.geom_conaffinity[i]):
            continue
        half = m.geom_size[i, 1] * abs(d.geom_xmat[i, 8]) if m.geom_type[i] == mujoco.mjtGeom.mjGEOM_CAPSULE else 0
        low.append(d.geom_xpos[i, 2] - half - m.geom_size[i, 0])
    d.qpos[2] -= min(low)
    return d.qpos.copy()


def initial_states(m: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(qpos (N, nq), qvel (N, nv), ctrl (STEPS, N, nu)): envs 0-1 lying supine (settled 1 s on native MuJoCo),
    2-3 standing."""
    pose = g1.robot_info().default_pose
    d = mujoco.MjData(m)
    d.qpos[:] = on_floor(m, [math.sqrt(0.5), 0, -math.sqrt(0.5), 0], pose)
    d.qpos[2] += 0.002
    d.ctrl[:] = pose
    mujoco.mj_step(m, d, nstep=200)  # settle on the floor: contacts at rest, as after a fall
    standing = on_floor(m, [1, 0, 0, 0], pose)
    qpos = np.stack([d.qpos, d.qpos, standing, standing])
    qvel = np.stack([d.qvel, d.qvel, np.zeros(m.nv), np.zeros(m.nv)])
    amplitude = np.array([0.1, 0.3, 0.0, 0.02])[:, None] * np.random.default_rng(0).choice([-1.0, 1.0], (N, m.nu))
    t = (np.arange(STEPS) + 1)[:, None, None] * DECIMATION * m.opt.timestep
    return qpos, qvel, pose + amplitude[None] * np.sin(2 * np.pi * t)  # 1 Hz, starts at the pose


def rollout(sim, qpos, qvel, ctrl, extra: Callable[[object], dict] | None = None) -> dict[str, np.ndarray]:
    """Reset ``sim``'s N envs to (qpos, qvel), step it through ``ctrl``; every step's state tensors (and the arrays of
    ``extra(sim)``), stacked: {key: (steps, N, ...) float64}."""
    dev = sim.device
    sim.reset_envs(torch.arange(N, device=dev), torch.tensor(qpos).to(dev), torch.tensor(qvel).to(dev))
    out: dict[str, list] = {}
    for k in range(len(ctrl)):
        sim.step(torch.tensor(ctrl[k]).to(dev), DECIMATION)
        s = sim.state
        row = {key: getattr(s, key).double().cpu().numpy().copy() for key in STATE_KEYS}
        row.update(extra(sim) if extra else {})
        for key, value in row.items():
            out.setdefault(key, []).append(value)
    return {k: np.stack(v) for k, v in out.items()}


def posvel_sensor_columns(model: mujoco.MjModel) -> list[int]:
    """Columns of ``sensordata`` computed at the position or velocity stage."""
    return [
        c
        for s in range(model.nsensor)
        if model.sensor_needstage[s] <= mujoco.mjtStage.mjSTAGE_VEL.value
        for c in range(model.sensor_adr[s], model.sensor_adr[s] + model.sensor_dim[s])
    ]


def check_trajectories(native: dict, other: dict, tol_lying: float, tol_standing: float) -> np.ndarray:
    """Assert max |Δqpos| per env under the lying / standing tolerance, and that the scenario is not vacuous (the lying
    envs move, the standing ones stand). Returns the per-env errors (N,)."""
    err = np.abs(native["qpos"] - other["qpos"]).max(axis=(0, 2))  # per env, over steps and entries
    print(f"max |Δqpos| per env (lying ±0.1, lying ±0.3, standing hold, standing ±0.02): {err}")
    assert err[0] < tol_lying and err[1] < tol_lying, err
    assert err[2] < tol_standing and err[3] < tol_standing, err
    assert np.abs(native["qpos"][-1, 1, 7:] - native["qpos"][0, 1, 7:]).max() > 0.1
    assert native["qpos"][:, 2:, 2].min() > 0.6
    return err


def check_state_is_current(out: dict, model: mujoco.MjModel) -> None:
    """Sites and position/velocity sensors of the last step are those of its returned qpos/qvel (MuJoCo's forward
    pass at that state), not of the step's start."""
    cols = posvel_sensor_columns(model)
    d = mujoco.MjData(model)
    for i in range(N):
        d.qpos[:], d.qvel[:] = out["qpos"][-1, i], out["qvel"][-1, i]
        mujoco.mj_forward(model, d)
        np.testing.assert_allclose(out["site_xpos"][-1, i], d.site_xpos, atol=1e-4)
        np.testing.assert_allclose(out["sensordata"][-1, i][cols], d.sensordata[cols], atol=1e-2, rtol=1e-3)
