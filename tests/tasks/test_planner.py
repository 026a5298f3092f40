"""The predictive-sampling teacher (:mod:`upright.tasks.standup.planner`) on the real standup scene."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from upright.robots import g1
from upright.tasks.standup.planner import DECIMATION, PlannerCfg, PredictiveSampler
from upright.tasks.standup.rise_path import settled_starts
from upright.tasks.standup.scene import standup_scene


@pytest.fixture(scope="module")
def scene() -> mujoco.MjModel:
    return standup_scene()


def _head_drop(scene, q0: np.ndarray, controller, seconds: float) -> float:
    d = mujoco.MjData(scene)
    d.qpos[:] = q0
    mujoco.mj_forward(scene, d)
    head = mujoco.mj_name2id(scene, mujoco.mjtObj.mjOBJ_SITE, "head")
    h0, lowest = float(d.site_xpos[head, 2]), np.inf
    for _ in range(round(seconds / (scene.opt.timestep * DECIMATION))):
        d.ctrl[:] = controller(d)
        mujoco.mj_step(scene, d, nstep=DECIMATION)
        lowest = min(lowest, float(d.site_xpos[head, 2]))
    return h0 - lowest


def test_planner_keeps_a_standing_g1_up_where_holding_the_default_pose_falls(scene):
    default = g1.robot_info().default_pose
    cfg = PlannerCfg(samples=12, horizon_s=0.5, knots=3)
    for k, q0 in enumerate(settled_starts(scene, "stand", 2, seed=2, stand_u_min=0.95)):
        assert _head_drop(scene, q0, lambda d: default, 3.0) > 0.25  # PD on the default pose topples
        planner = PredictiveSampler(scene, cfg, seed=k)
        assert _head_drop(scene, q0, planner.plan, 3.0) < 0.15


def test_planner_targets_stay_in_the_policy_box_and_hold_the_other_joints(scene):
    info = g1.robot_info()
    planner = PredictiveSampler(scene, PlannerCfg(samples=4, horizon_s=0.2, knots=2, sigma=2.0, beta=0.3), seed=0)
    d = mujoco.MjData(scene)
    d.qpos[:] = settled_starts(scene, "stand", 1, seed=2, stand_u_min=0.95)[0]
    mujoco.mj_forward(scene, d)
    before = d.qpos.copy()
    for _ in range(3):
        p = planner.plan(d)
        pol = info.policy_joint_ids
        assert p.shape == (len(g1.JOINT_NAMES),)
        assert np.all(np.abs(p[pol] - info.default_pose[pol]) <= 0.3 + 1e-9)
        held = np.setdiff1d(np.arange(len(g1.JOINT_NAMES)), pol)
        np.testing.assert_allclose(p[held], info.default_pose[held])
    np.testing.assert_array_equal(d.qpos, before)  # planning reads the state, never steps it


def test_knot_weights_interpolate_linearly_and_hold_the_last_knot():
    from upright.tasks.standup.planner import knot_weights

    w = knot_weights(np.array([0.0, 0.5, 1.0, 2.75, 3.0, 3.4]), 4)
    values = np.array([1.0, 3.0, 7.0, -1.0])  # a spline's knot values
    np.testing.assert_allclose(w @ values, [1.0, 2.0, 3.0, 1.0, -1.0, -1.0])
    np.testing.assert_allclose(w.sum(1), 1.0)
