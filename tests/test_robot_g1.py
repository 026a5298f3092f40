"""The G1 definition: joint order, gains, limits, default pose, sensors, contacts, missing-model error."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from upright.robots import g1
from upright.robots.menagerie import ModelNotFoundError, model_path


@pytest.fixture(scope="module")
def model():
    return g1.g1_spec().compile()


def test_joint_order_and_policy_subset(model):
    assert len(g1.JOINT_NAMES) == 29 and len(g1.POLICY_JOINT_NAMES) == 23
    hinge = [model.joint(i).name for i in range(model.njnt) if model.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE]
    assert list(g1.JOINT_NAMES) == hinge
    # actuator i drives joint i, in the fixed order
    assert [model.joint(model.actuator_trnid[i, 0]).name for i in range(model.nu)] == list(g1.JOINT_NAMES)
    assert not set(g1.HELD_JOINT_NAMES) & set(g1.POLICY_JOINT_NAMES)


@pytest.mark.parametrize(
    ("joint", "kp", "kd"),
    [
        ("left_hip_pitch_joint", 150, 4),
        ("right_knee_joint", 200, 6),
        ("left_ankle_roll_joint", 40, 2),
        ("waist_yaw_joint", 100, 4),
        ("right_shoulder_roll_joint", 100, 4),
        ("left_elbow_joint", 100, 4),
        ("right_wrist_roll_joint", 100, 4),
    ],
)
def test_host_gains_in_the_compiled_actuators(model, joint, kp, kd):
    i = g1.JOINT_NAMES.index(joint)
    assert model.actuator_gainprm[i, 0] == kp
    assert model.actuator_biasprm[i, 1] == -kp and model.actuator_biasprm[i, 2] == -kd


def test_torque_limits_from_datasheet(model):
    info = g1.robot_info()
    expect = {
        "left_hip_pitch_joint": 88,
        "left_hip_roll_joint": 139,
        "left_knee_joint": 139,
        "left_ankle_pitch_joint": 50,
        "waist_yaw_joint": 88,
        "waist_roll_joint": 50,
        "left_shoulder_pitch_joint": 25,
        "left_wrist_yaw_joint": 5,
    }
    for joint, limit in expect.items():
        i = g1.JOINT_NAMES.index(joint)
        assert info.torque_limit[i] == limit
        np.testing.assert_allclose(model.actuator_forcerange[i], [-limit, limit])


def test_default_pose():
    info = g1.robot_info()
    pose = dict(zip(g1.JOINT_NAMES, info.default_pose))
    assert pose["left_hip_pitch_joint"] == -0.1 and pose["right_knee_joint"] == 0.3
    assert pose["left_ankle_pitch_joint"] == -0.2 and pose["right_elbow_joint"] == 0.8
    assert pose["waist_yaw_joint"] == 0.0 and pose["left_wrist_pitch_joint"] == 0.0


def test_sensors_the_task_reads(model):
    for name in ("imu_ang_vel", "imu_upvector", "head_pos", "left_foot_pos", "right_foot_pos"):
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name) >= 0, name
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    head = data.sensor("head_pos").data
    torso = data.body("torso_link").xpos
    np.testing.assert_allclose(head, torso + np.array(g1.HEAD_OFFSET_IN_TORSO), atol=1e-9)


def test_contact_filter_only_explicit_self_pairs(model):
    robot_geoms = [i for i in range(model.ngeom) if model.geom_contype[i] or model.geom_conaffinity[i]]
    for i in robot_geoms:  # no implicit robot-robot contacts
        for j in robot_geoms:
            assert not (model.geom_contype[i] & model.geom_conaffinity[j])
    assert model.npair == len(g1.self_collision_pairs())


def test_held_joints_stay_near_default_under_zero_actions():
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg
    from upright.tasks.standup.env import StandupEnv
    from upright.tasks.standup.randomization import DomainRandCfg

    # the nominal robot: domain randomisation (e.g. restitution near 1) can knock the 5 N·m wrists further
    cfg = StandupEnvCfg(num_envs=4, obs_noise=False, domain_rand=DomainRandCfg(enabled=False))
    env = StandupEnv(cfg, SimCfg(num_threads=1), seed=0)
    worst = 0.0
    for _ in range(60):
        env.step(torch.zeros(4, 23))
        held = env.sim.state.qpos[:, env._q_adr[env._held_ids]]
        worst = max(worst, float(held.abs().max()))
    # held by PD at 0 rad while the robot drops and lies on the floor (hands pressed into the ground)
    assert worst < 0.25, worst


def test_missing_model_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path))
    (tmp_path / "unitree_g1").mkdir()
    with pytest.raises(ModelNotFoundError, match="MENAGERIE_ROOT.*network access"):
        model_path("unitree_g1", "g1_mjlab.xml")


# Reflected rotor inertias of the G1's motors, kg·m², as mjlab's g1_constants.py computes them
# (ARMATURE_5020 etc.: rotor inertias x gear ratios² of the two-stage planetary gearboxes).
_ARMATURE_5020, _ARMATURE_7520_14, _ARMATURE_7520_22, _ARMATURE_4010 = 0.003609725, 0.0101775200, 0.025101925, 0.00425
_MOTOR_OF_JOINT = {
    "hip_pitch": _ARMATURE_7520_14,
    "hip_yaw": _ARMATURE_7520_14,
    "waist_yaw": _ARMATURE_7520_14,
    "hip_roll": _ARMATURE_7520_22,
    "knee": _ARMATURE_7520_22,
    "shoulder_pitch": _ARMATURE_5020,
    "shoulder_roll": _ARMATURE_5020,
    "shoulder_yaw": _ARMATURE_5020,
    "elbow": _ARMATURE_5020,
    "wrist_roll": _ARMATURE_5020,
    # parallel linkages driven by two 5020s
    "ankle_pitch": 2 * _ARMATURE_5020,
    "ankle_roll": 2 * _ARMATURE_5020,
    "waist_roll": 2 * _ARMATURE_5020,
    "waist_pitch": 2 * _ARMATURE_5020,
    "wrist_pitch": _ARMATURE_4010,
    "wrist_yaw": _ARMATURE_4010,
}


def test_each_joint_gets_the_armature_of_its_motor(model):
    info = g1.robot_info()
    for i, joint in enumerate(g1.JOINT_NAMES):
        key = joint.removeprefix("left_").removeprefix("right_").removesuffix("_joint")
        expected = _MOTOR_OF_JOINT[key]
        dof = model.jnt_dofadr[model.joint(joint).id]
        assert model.dof_armature[dof] == pytest.approx(expected, rel=1e-6), joint
        assert info.armature[i] == pytest.approx(expected, rel=1e-6), joint
    free = model.jnt_dofadr[model.joint("floating_base_joint").id]
    assert np.all(model.dof_armature[free : free + 6] == 0)  # the floating base has no motor
