"""The policy contract from the ONNX file: accepted when complete, refused (before anything moves) when not."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from deploy_testlib import write_linear_policy

from upright.deploy.metadata import load_policy_spec
from upright.deploy.robot_config import g1_29dof
from upright.policy_io.schema import PolicyMetadataError, read_raw_metadata
from upright.training import onnx_export


def test_spec_from_exporter_metadata(linear_policy, standup_metadata):
    spec = load_policy_spec(linear_policy, g1_29dof())
    assert spec.joint_names == tuple(standup_metadata["joint_names"]) and spec.num_joints == 23
    assert spec.held_joint_names == tuple(standup_metadata["held_joint_names"])
    np.testing.assert_allclose(spec.kp, standup_metadata["kp"])
    np.testing.assert_allclose(spec.default_joint_pos, standup_metadata["default_joint_pos"])
    assert spec.control_dt == pytest.approx(0.02) and spec.history_length == 6
    assert spec.frame_dim == 76 and spec.obs_dim == 456
    assert spec.observation_names == (
        "base_ang_vel",
        "projected_gravity",
        "joint_pos",
        "joint_vel",
        "last_action",
        "action_scale",
    )
    assert spec.action_scale == standup_metadata["action_scale"] and spec.observation_clip == 100.0
    # the daemon's reader and the exporter's agree on every value
    raw = onnx_export.read_metadata(linear_policy)
    assert read_raw_metadata(linear_policy) == raw


def test_refuses_a_file_without_metadata(tmp_path):
    path = write_linear_policy(tmp_path / "bare.onnx", 456, 23, metadata=None)
    with pytest.raises(PolicyMetadataError, match="not a self-describing upright policy.*missing"):
        load_policy_spec(path, g1_29dof())


def test_refuses_a_file_that_is_not_onnx(tmp_path):
    path = tmp_path / "policy.onnx"
    path.write_bytes(b"not a model")
    with pytest.raises(PolicyMetadataError, match="not a readable ONNX file"):
        load_policy_spec(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(joint_names=["left_hip_pitch_joint_x", *m["joint_names"][1:]]), "does not have"),
        (
            lambda m: m.update(held_joint_names=[], held_kp=[], held_kd=[], held_joint_pos=[]),
            "neither drives nor holds",
        ),
        (
            lambda m: m.update(held_joint_names=[m["joint_names"][0], *m["held_joint_names"][1:]]),
            "both policy-driven and held",
        ),
        (lambda m: m.update(kp=m["kp"][:-1]), "'kp' has 22 values"),
        (lambda m: m.update(observation_names=["base_lin_vel", *m["observation_names"][1:]]), "unknown to this daemon"),
        (lambda m: m.update(observation_history_length=5), "input 'obs' has shape"),
        (lambda m: m.update(action_mode="torque"), "action_mode 'torque' is not supported.*upright.training.export"),
        (lambda m: m.update(action_mode="relative: p_target = q + b * a"), "is not supported"),  # a schema-2 string
        (lambda m: m.update(default_joint_pos=[9.0] * 23), "outside"),
        (lambda m: m.update(control_dt=0), "positive"),
    ],
)
def test_refuses_inconsistent_or_mismatched_metadata(tmp_path, standup_metadata, change, message):
    meta = {k: (list(v) if isinstance(v, (list, tuple, np.ndarray)) else v) for k, v in standup_metadata.items()}
    meta = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in meta.items()}
    change(meta)
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, meta)
    with pytest.raises(PolicyMetadataError, match=message) as err:
        load_policy_spec(path, g1_29dof())
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("mode", ["relative", "absolute"])
def test_action_mode_round_trip_from_the_env_config(tmp_path, mode):
    """env.action_mode -> exporter metadata -> file -> the daemon's spec; absolute's offset is default_joint_pos,
    the default pose the env's absolute rule adds β·a to."""
    from upright.tasks.registry import make_env, policy_metadata
    from upright.tasks.standup.config import SimCfg, StandupEnvCfg

    env = make_env("standup", StandupEnvCfg(num_envs=1, action_mode=mode), SimCfg(num_threads=1), device="cpu", seed=0)
    try:
        meta = policy_metadata("standup", env)
        env_default = env.default_pose[env.robot.policy_joint_ids].double().numpy()
    finally:
        env.close()
    path = write_linear_policy(tmp_path / "p.onnx", 456, 23, meta)
    raw = read_raw_metadata(path)
    assert raw["action_mode"] == mode and raw["upright_metadata_version"] == "3"
    origin = {"relative": "q_measured", "absolute": "default_joint_pos"}[mode]
    assert raw["action_formula"].startswith(f"p_target = {origin} + action_scale * action")
    spec = load_policy_spec(path, g1_29dof())
    assert spec.action_mode == mode
    np.testing.assert_allclose(spec.default_joint_pos, env_default, atol=1e-6)


def test_cli_refuses_before_opening_any_port(tmp_path):
    """`run` with a bare ONNX file exits 2 with the metadata error; the (nonexistent) ports are never opened."""
    path = write_linear_policy(tmp_path / "bare.onnx", 456, 23, metadata=None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "upright.deploy.cli",
            "run",
            "--policy",
            str(path),
            "--port-dir",
            str(tmp_path / "nope"),
            "--no-log",
            "--no-keyboard",
            "--socket",
            str(tmp_path / "s.sock"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "refusing to start" in proc.stderr and "metadata keys" in proc.stderr
    assert "serial" not in proc.stderr.lower()
    assert not (tmp_path / "s.sock").exists()
