"""A policy file is checked for physical plausibility before any port opens (issue 33, section 4).

Each class of bad file below was accepted by ``load_policy_spec`` before: Kp/Kd of 1e6 (the daemon ran them, the
motor frame silently capped them), ``action_scale`` 1e6 and ``torque_limit`` 1e9, ``control_dt`` 100 s or 0.0123 s (a
traceback after the ports were open), a graph whose declared output width is not what it computes (failed on the
first POLICY tick), an op of a custom domain (an onnxruntime traceback) and keys of the wrong JSON type (TypeError).
Now each is one :class:`PolicyMetadataError` line that names the file and the key.
"""

from __future__ import annotations

import os
import pathlib
import select
import subprocess
import sys

import numpy as np
import onnx
import pytest
from deploy_testlib import write_linear_policy
from onnx import TensorProto, helper, numpy_helper

from upright.deploy.metadata import load_policy_spec
from upright.deploy.robot_config import franka_emika_panda, g1_29dof, gain_envelope
from upright.policy_io.schema import PolicyMetadataError

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROBOT = "unitree_g1_29dof"


def _meta(standup_metadata: dict, **changes) -> dict:
    meta = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in standup_metadata.items()}
    meta = {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in meta.items()}
    meta.update(changes)
    return meta


def _one_joint(values: list, index: int, value: float) -> list:
    out = list(values)
    out[index] = value
    return out


def _refusal(path: pathlib.Path, io_rate_hz: float = 500.0) -> str:
    with pytest.raises(PolicyMetadataError) as err:
        load_policy_spec(path, g1_29dof(), io_rate_hz=io_rate_hz)
    message = str(err.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: "), message
    return message


def write_graph(
    path: pathlib.Path,
    nodes: list,
    initializers: list,
    out_dim: int,
    metadata: dict | None,
    opsets: tuple[tuple[str, int], ...] = (("", 17),),
) -> pathlib.Path:
    """A hand-made graph from input ``obs`` (1, 456) to output ``actions`` declared (1, ``out_dim``)."""
    graph = helper.make_graph(
        nodes,
        "hand_made",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, 456])],
        [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, out_dim])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    onnx.save(model, str(path))
    if metadata is not None:
        from upright.training.onnx_export import attach_metadata

        attach_metadata(path, metadata)
    return path


# ------------------------------------------------------------------ Kp, Kd, torque_limit, action_scale
@pytest.mark.parametrize(
    ("key", "index", "value", "joint", "why"),
    [
        ("kp", 0, 1e6, "left_hip_pitch_joint", "the motor frame encodes at most"),
        ("kd", 3, 1e6, "left_knee_joint", "the motor frame encodes at most"),
        ("held_kp", 2, 1e6, "left_wrist_pitch_joint", "the motor frame encodes at most"),
        ("held_kd", 2, 1e6, "left_wrist_pitch_joint", "the motor frame encodes at most"),
        ("kp", 13, 600.0, "left_shoulder_pitch_joint", None),  # 5020, 25 N·m: 600 is fine
        ("held_kp", 2, 600.0, "left_wrist_pitch_joint", "0.01 rad error"),  # 4010, 5 N·m: 600 saturates at 8 mrad
        ("held_kd", 2, 60.0, "left_wrist_pitch_joint", "0.1 rad/s"),
    ],
)
def test_implausible_gains_are_one_line_naming_the_key(tmp_path, standup_metadata, key, index, value, joint, why):
    meta = _meta(standup_metadata)
    meta[key] = _one_joint(meta[key], index, value)
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, meta)
    if why is None:
        load_policy_spec(path, g1_29dof())
        return
    message = _refusal(path)
    assert f"{key}[{joint}] = {value:g} is implausible for {ROBOT}: " in message and why in message, message


@pytest.mark.parametrize(
    ("key", "index", "value", "joint"),
    [
        ("torque_limit", 3, 1e9, "left_knee_joint"),
        ("held_torque_limit", 2, 6.0, "left_wrist_pitch_joint"),
        ("torque_limit", 0, 0.0, "left_hip_pitch_joint"),
    ],
)
def test_a_torque_limit_above_the_motors_is_one_line(tmp_path, standup_metadata, key, index, value, joint):
    meta = _meta(standup_metadata)
    meta[key] = _one_joint(meta[key], index, value)
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, meta)
    message = _refusal(path)
    assert f"{key}[{joint}] = {value:g} is implausible for {ROBOT}: " in message, message


@pytest.mark.parametrize("value", [1e6, 2.5])
def test_an_implausible_action_scale_is_one_line(tmp_path, standup_metadata, value):
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, _meta(standup_metadata, action_scale=value))
    message = _refusal(path)
    assert f"action_scale = {value:g} is implausible for {ROBOT}: " in message and "rad per unit action" in message


# ------------------------------------------------------------------ control_dt
@pytest.mark.parametrize(
    ("value", "io_rate", "why"),
    [
        (100.0, 500.0, "longer than"),
        (0.0123, 500.0, "not a whole number"),
        (0.001, 500.0, "shorter than"),
        (0.02, 125.0, "not a whole number"),
    ],
)
def test_an_implausible_control_dt_is_one_line(tmp_path, standup_metadata, value, io_rate, why):
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, _meta(standup_metadata, control_dt=value))
    message = _refusal(path, io_rate)
    assert f"control_dt = {value:g} is implausible for {ROBOT}: " in message and why in message, message


@pytest.mark.parametrize("value", [0.002, 0.02, 0.1])
def test_control_dt_of_whole_loop_periods_up_to_0_1_s_passes(tmp_path, standup_metadata, value):
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, _meta(standup_metadata, control_dt=value))
    assert load_policy_spec(path, g1_29dof()).control_dt == value


# ------------------------------------------------------------------ the graph itself
def test_a_graph_that_computes_another_width_than_it_declares_is_one_line(tmp_path, standup_metadata):
    w = numpy_helper.from_array(np.full((456, 22), 0.01, np.float32), "W")  # computes 22 actions, declares 23
    path = write_graph(
        tmp_path / "p.onnx", [helper.make_node("MatMul", ["obs", "W"], ["actions"])], [w], 23, _meta(standup_metadata)
    )
    message = _refusal(path)
    assert "output_name 'actions'" in message and "(1, 22)" in message and "(1, 23)" in message, message


def test_a_graph_that_is_not_finite_on_a_zero_observation_is_one_line(tmp_path, standup_metadata):
    w = numpy_helper.from_array(np.zeros((456, 23), np.float32), "W")
    b = numpy_helper.from_array(np.full(23, np.nan, np.float32), "b")
    path = write_graph(
        tmp_path / "p.onnx",
        [helper.make_node("Gemm", ["obs", "W", "b"], ["actions"])],
        [w, b],
        23,
        _meta(standup_metadata),
    )
    message = _refusal(path)
    assert "output_name 'actions'" in message and "NaN/inf" in message, message


def test_an_op_of_a_custom_domain_is_one_line(tmp_path, standup_metadata):
    node = helper.make_node("Mystery", ["obs"], ["actions"], name="mystery_0", domain="com.example")
    path = write_graph(
        tmp_path / "p.onnx", [node], [], 23, _meta(standup_metadata), opsets=(("", 17), ("com.example", 1))
    )
    message = _refusal(path)
    assert "com.example" in message and "Mystery" in message and "onnxruntime" in message, message


# ------------------------------------------------------------------ types of every key
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("joint_names", 5),
        ("joint_names", "left_hip_pitch_joint"),
        ("kp", "stiff"),
        ("kd", [[4.0] * 23]),
        ("action_scale", "1.0"),
        ("action_scale", True),
        ("control_dt", "0.02"),
        ("observation_dims", [3, 3, 23, 23, 23, 1.5]),
        ("observation_history_length", 6.0),
        ("held_joint_names", {"a": 1}),
        ("task", 3),
        ("input_name", ["obs"]),
        ("privileged_inputs", "none"),
        ("torque_limit", 88.0),
    ],
)
def test_a_key_of_the_wrong_type_is_one_line_naming_it(tmp_path, standup_metadata, key, value):
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, _meta(standup_metadata, **{key: value}))
    message = _refusal(path)
    assert f"{key} = " in message and " is not " in message, message


# ------------------------------------------------------------------ what must still pass
def test_host_gains_and_the_getup_recipe_gains_pass(tmp_path, standup_metadata):
    from upright.robots import g1
    from upright.tasks.standup.getup.actions import getup_robot_info

    load_policy_spec(write_linear_policy(tmp_path / "host.onnx", 456, 23, _meta(standup_metadata)), g1_29dof())
    info = getup_robot_info(5.0, 2.0)  # recipe=getup: 5 Hz, zeta 2 on each motor's reflected inertia
    kp, kd = info.kp[info.policy_joint_ids], info.kd[info.policy_joint_ids]
    assert kp.min() == pytest.approx(3.56, abs=0.01) and kp.max() == pytest.approx(24.8, abs=0.1)
    assert kd.min() == pytest.approx(0.45, abs=0.01) and kd.max() == pytest.approx(3.16, abs=0.01)
    assert [g1.JOINT_NAMES[i] for i in info.policy_joint_ids] == standup_metadata["joint_names"]
    meta = _meta(standup_metadata, kp=kp.tolist(), kd=kd.tolist(), action_scale=0.6)
    spec = load_policy_spec(write_linear_policy(tmp_path / "getup.onnx", 456, 23, meta), g1_29dof())
    np.testing.assert_allclose(spec.kp, kp)


def test_the_committed_policies_still_load():
    paths = sorted((ROOT / "upright" / "assets" / "policies").glob("*/policy.onnx"))
    assert paths
    for path in paths:
        if path.parent.name.startswith("g1_"):
            load_policy_spec(path, g1_29dof())
        else:  # the lift MLPs read the cube: refused without a pose source, naming the option that gives one
            with pytest.raises(PolicyMetadataError, match="inputs a robot does not provide.*give --object-pose"):
                load_policy_spec(path, franka_emika_panda())
    spec = load_policy_spec(
        ROOT / "upright/assets/policies/panda_lift/policy.onnx", franka_emika_panda(), object_pose=True
    )
    assert spec.action_mode == "ee_delta" and spec.num_actions == 4 and spec.num_joints == 8


def test_the_envelope_of_the_g1_follows_its_motors():
    env = {e.joint: e for e in gain_envelope(g1_29dof())}
    assert env["left_knee_joint"].torque_limit == 139.0 and "7520-22" in env["left_knee_joint"].actuator
    assert env["left_ankle_pitch_joint"].torque_limit == 50.0 and "5020 x2" in env["left_ankle_pitch_joint"].actuator
    assert env["left_wrist_yaw_joint"].kp_max == pytest.approx(500.0)  # 5 N·m / 0.01 rad
    assert env["left_wrist_yaw_joint"].kd_max == pytest.approx(50.0)  # 5 N·m / 0.1 rad/s
    frame = 25.6 * 6.33**2  # the GO-M8010-6 frame's largest kp, joint side
    assert env["left_knee_joint"].kp_max == pytest.approx(frame, rel=1e-3)
    assert all(e.kp_max >= 200.0 and e.kd_max >= 6.0 for e in env.values())  # HoST's gains fit everywhere


# ------------------------------------------------------------------ the real daemon
@pytest.mark.parametrize("case", ["kp", "control_dt", "custom-op", "output-width", "type"])
def test_the_daemon_refuses_in_one_line_before_any_port_socket_or_dataset(tmp_path, standup_metadata, case):
    meta = _meta(standup_metadata)
    if case == "kp":
        path = write_linear_policy(tmp_path / "p.onnx", 456, 23, meta | {"kp": [1e6] * 23})
    elif case == "control_dt":
        path = write_linear_policy(tmp_path / "p.onnx", 456, 23, meta | {"control_dt": 0.0123})
    elif case == "type":
        path = write_linear_policy(tmp_path / "p.onnx", 456, 23, meta | {"joint_names": 5})
    elif case == "custom-op":
        node = helper.make_node("Mystery", ["obs"], ["actions"], domain="com.example")
        path = write_graph(tmp_path / "p.onnx", [node], [], 23, meta, opsets=(("", 17), ("com.example", 1)))
    else:
        w = numpy_helper.from_array(np.full((456, 22), 0.01, np.float32), "W")
        path = write_graph(tmp_path / "p.onnx", [helper.make_node("MatMul", ["obs", "W"], ["actions"])], [w], 23, meta)
    ports, socket, dataset = tmp_path / "ports", tmp_path / "ctl.sock", tmp_path / "data"
    ports.mkdir()
    fds = []
    try:
        for bus in g1_29dof().buses:  # a real pty per bus: a daemon that opened its port would write frames to it
            master, slave = os.openpty()
            fds += [master, slave]  # the slave kept open too: the master reads EIO once no one holds it
            (ports / bus.name).symlink_to(os.ttyname(slave))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "upright.deploy.cli",
                "run",
                "--policy",
                str(path),
                "--port-dir",
                str(ports),
                "--socket",
                str(socket),
                "--dataset",
                str(dataset),
                "--no-keyboard",
                "--auto-start",
                "--duration",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        written = [m for m in fds[::2] if select.select([m], [], [], 0)[0]]
    finally:
        for fd in fds:
            os.close(fd)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith(f"upright-deploy: refusing to start: {path}: "), proc.stderr
    assert not socket.exists() and not dataset.exists() and not written, (socket.exists(), dataset.exists(), written)
