"""The daemon's G1 table (deploy never imports the training-side robot) agrees with upright.robots.g1 and the MJCF."""

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
