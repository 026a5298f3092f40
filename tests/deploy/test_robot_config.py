"""The daemon's robot tables (deploy never imports the training-side robots) agree with upright.robots.g1 / .panda and
the MJCF."""

from __future__ import annotations

import mujoco
import pytest

from upright.deploy.robot_config import load_robot_config, robot_config_to_json
from upright.robots import g1


def test_g1_table_matches_the_robot_model():
    cfg = load_robot_config("unitree_g1_29dof")
    assert sorted(cfg.joint_names) == sorted(g1.JOINT_NAMES)
    info = g1.robot_info()
    model = g1.g1_spec().compile()
    for m in cfg.motors:
        i = g1.JOINT_NAMES.index(m.joint)
        assert m.torque_limit == info.torque_limit[i] and m.velocity_limit == info.velocity_limit[i]
        motor, count = g1.motor_of(m.joint)  # the datasheet the table's limits come from
        assert m.actuator == (motor if count == 1 else f"{motor} x{count}")
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, m.joint)
        assert (m.lower, m.upper) == pytest.approx(tuple(model.jnt_range[jid]), abs=1e-6)
    per_bus = [len(b.motors) for b in cfg.buses]
    assert max(per_bus) <= 15 and sum(b.has_imu for b in cfg.buses) == 1


def test_json_round_trip_and_port_override(tmp_path):
    cfg = load_robot_config("unitree_g1_29dof")
    path = tmp_path / "robot.json"
    path.write_text(robot_config_to_json(cfg))
    assert load_robot_config(path) == cfg
    moved = cfg.with_ports({"bus0": "/dev/ttyACM7"})
    assert moved.buses[0].port == "/dev/ttyACM7" and moved.buses[1].port == cfg.buses[1].port
    with pytest.raises(ValueError, match="unknown bus"):
        cfg.with_ports({"bus9": "/x"})
    with pytest.raises(ValueError, match="neither a built-in robot"):
        load_robot_config(tmp_path / "missing.json")


def test_panda_table_matches_the_robot_model_and_the_lift_scene():
    """The Panda table (7 arm joints + finger_joint1) against upright.robots.panda and the compiled lift scene."""
    from upright.robots import panda
    from upright.tasks.lift.scene import lift_scene

    cfg = load_robot_config("franka_emika_panda")
    joints = list(panda.ARM_JOINT_NAMES) + [panda.FINGER_JOINT_NAMES[0]]
    assert list(cfg.joint_names) == joints and len(cfg.buses) == 1 and cfg.buses[0].has_imu
    info = panda.panda_info()
    model = lift_scene()
    act_of_joint = {int(model.actuator_trnid[a, 0]): a for a in range(model.nu)}
    for k, m in enumerate(cfg.motors):
        assert m.motor_id == k
        assert (m.lower, m.upper) == (info.ctrl_lower[k], info.ctrl_upper[k]) == tuple(panda.JOINT_RANGE[k])
        assert m.torque_limit == info.force_limit[k] and m.velocity_limit == panda.VELOCITY_LIMIT[k]
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, m.joint)
        assert (m.lower, m.upper) == pytest.approx(tuple(model.jnt_range[jid]), abs=1e-6)
        a = act_of_joint[jid]  # the joint's actuator: its force and target ranges are the table's
        assert (-m.torque_limit, m.torque_limit) == pytest.approx(tuple(model.actuator_forcerange[a]))
        assert (m.lower, m.upper) == pytest.approx(tuple(model.actuator_ctrlrange[a]))
    # the lift task's Kp / Kd (joint side) fit the GO-M8010-6 frame's rotor-side 0..25.6 at the table's gear
    from upright.deploy.protocol.go_m8010 import K_SCALE

    limit = 32767 / K_SCALE * cfg.array("gear") ** 2
    assert (info.kp < limit).all() and (info.kd < limit).all()


def test_panda_json_round_trip(tmp_path):
    cfg = load_robot_config("franka_emika_panda")
    path = tmp_path / "panda.json"
    path.write_text(robot_config_to_json(cfg))
    assert load_robot_config(path) == cfg
