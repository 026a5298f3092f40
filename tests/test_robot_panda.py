"""The Panda definition (upright.robots.panda) against the compiled Menagerie model: joint order, actuators, gains,
limits, home keyframe, sites, contact set."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from upright.robots import panda


@pytest.fixture(scope="module")
def model():
    return panda.panda_spec(panda.SCENE_FILE).compile()


def test_joint_and_actuator_order(model):
    hinge_or_slide = [model.joint(i).name for i in range(model.njnt) if model.jnt_type[i] != mujoco.mjtJoint.mjJNT_FREE]
    assert hinge_or_slide == list(panda.JOINT_NAMES)
    assert [model.actuator(i).name for i in range(model.nu)] == list(panda.ACTUATOR_NAMES)
    driven = [model.joint(model.actuator_trnid[i, 0]).name for i in range(model.nu)]
    assert driven == list(panda.ARM_JOINT_NAMES) + ["finger_joint1"]
    # robot joints come first in qpos: addresses 0..8
    assert [int(model.jnt_qposadr[model.joint(j).id]) for j in panda.JOINT_NAMES] == list(range(9))


def test_gains_limits_and_ranges_match_the_file(model):
    info = panda.panda_info()
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], info.kp)
    np.testing.assert_allclose(-model.actuator_biasprm[:, 1], info.kp)
    np.testing.assert_allclose(-model.actuator_biasprm[:, 2], info.kd)
    np.testing.assert_allclose(model.actuator_forcerange[:, 1], info.force_limit)
    np.testing.assert_allclose(model.actuator_ctrlrange[:, 0], info.ctrl_lower)
    np.testing.assert_allclose(model.actuator_ctrlrange[:, 1], info.ctrl_upper)
    ranges = np.array([model.jnt_range[model.joint(j).id] for j in panda.JOINT_NAMES])
    np.testing.assert_allclose(ranges, np.array(panda.JOINT_RANGE))


def test_home_keyframe(model):
    key = model.keyframe("home")
    np.testing.assert_allclose(key.qpos[:9], panda.HOME_QPOS)
    np.testing.assert_allclose(key.ctrl, panda.HOME_CTRL)
    np.testing.assert_allclose(key.qpos[9:12], panda.CUBE_HOME_POS)
    np.testing.assert_allclose(model.geom_size[model.geom(panda.CUBE_BODY).id], panda.CUBE_HALF_SIZE)


def test_sites_sit_where_documented(model):
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.keyframe("home").id)
    mujoco.mj_forward(model, data)
    grip = data.site(panda.GRIPPER_SITE).xpos
    np.testing.assert_allclose(grip, [0.677, 0.0, 0.382], atol=2e-3)
    left, right = (data.site(s).xpos for s in panda.FINGERTIP_SITES)
    # fingers open 0.04 m each: pads ~2 x (0.04 + 0.0076) m apart, around the gripper site, hand pointing down
    assert 0.08 < np.linalg.norm(left - right) < 0.1
    np.testing.assert_allclose((left + right) / 2, grip, atol=0.02)
    assert data.site(panda.GRIPPER_SITE).xmat.reshape(3, 3)[2, 2] == pytest.approx(-1.0, abs=0.05)


def test_contact_set_is_primitive(model):
    colliding = {model.geom(i).name for i in range(model.ngeom) if model.geom_contype[i] or model.geom_conaffinity[i]}
    assert colliding == {panda.FLOOR_GEOM, panda.HAND_GEOM, *panda.FINGER_PAD_GEOMS, panda.CUBE_BODY}
    for name in colliding:
        assert model.geom_type[model.geom(name).id] != mujoco.mjtGeom.mjGEOM_MESH


def test_holds_home_pose_under_gravity(model):
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.keyframe("home").id)
    for _ in range(400):  # 2 s
        mujoco.mj_step(model, data)
    np.testing.assert_allclose(data.qpos[:7], panda.HOME_QPOS[:7], atol=0.05)
    assert np.abs(data.qvel[:9]).max() < 1e-2
