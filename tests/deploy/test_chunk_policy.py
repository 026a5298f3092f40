"""Loading a chunked (VLA) policy for the daemon (upright/deploy/chunk_policy.py): the deploy contract from the model
or a
JSON file, the observation.state layout, one-line refusals naming the fix (a missing contract key, a privileged
state, a contradicting action mode, joints the robot lacks), a camera policy's cameras and image size in the spec,
the CLI's instruction, and a remote policy served by upright-policy-server on loopback running through the
ChunkRunner."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from deploy_testlib import goal_seeking_tiny_vla

from upright.deploy.chunk_policy import CHUNK_OBSERVATION_TERMS, is_chunk_policy_source, load_chunk_policy
from upright.deploy.robot_config import load_robot_config
from upright.policy_io.schema import CHUNK_CONTRACT_KEYS, PolicyMetadataError

PANDA = load_robot_config("franka_emika_panda")


@pytest.fixture(scope="module")
def contract():
    from upright.tasks.lift.metadata import lift_deploy_contract

    return lift_deploy_contract()


def _save(model, folder):
    folder.mkdir(parents=True, exist_ok=True)
    model.save(folder / "model.pt")
    return folder


def _refused(source, match, **kw):
    with pytest.raises(PolicyMetadataError, match=match) as err:
        load_chunk_policy(str(source), PANDA, **kw)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_the_contract_of_a_tinyvla_folder_becomes_the_controllers_spec(tmp_path, contract):
    folder = _save(goal_seeking_tiny_vla(np.zeros(8), contract), tmp_path / "vla")
    assert is_chunk_policy_source(str(folder)) and is_chunk_policy_source("ws://127.0.0.1:8000")
    spec, policy = load_chunk_policy(str(folder), PANDA, task="lift the cube")
    assert spec.joint_names == tuple(contract["joint_names"]) and spec.action_mode == "delta"
    np.testing.assert_array_equal(spec.kp, contract["kp"])
    np.testing.assert_array_equal(spec.default_joint_pos, contract["default_joint_pos"])
    assert spec.action_scale == 0.04 and spec.action_clip == 1.0 and spec.control_dt == 0.02
    assert spec.observation_names == CHUNK_OBSERVATION_TERMS and spec.obs_dim == 22 and spec.history_length == 1
    assert spec.task == "lift the cube" and policy.chunk_size == 10
    # the spec's observation frame is observation.state: q, dq, gyro, gravity at scale 1
    from upright.deploy.observation import ObservationBuilder

    q, dq = np.linspace(-1, 1, 8), np.linspace(0.5, -0.5, 8)
    frame = ObservationBuilder(spec).frame(q, dq, np.array([0.1, 0.2, 0.3]), np.array([1.0, 0, 0, 0]), np.zeros(8))
    np.testing.assert_allclose(frame, np.concatenate([q, dq, [0.1, 0.2, 0.3], [0, 0, -1]]), atol=1e-6)


def test_a_missing_contract_is_refused_in_one_line_and_a_json_file_completes_it(tmp_path, contract):
    folder = _save(goal_seeking_tiny_vla(np.zeros(8), contract, embed=False), tmp_path / "bare")
    msg = _refused(folder, "deploy contract lacks")
    assert all(k in msg for k in CHUNK_CONTRACT_KEYS) and "--policy-contract" in msg and "--deploy-contract" in msg
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({k: v for k, v in contract.items() if k != "kd"}))
    _refused(folder, r"lacks \['kd'\]", contract_file=str(partial))
    full = tmp_path / "contract.json"
    full.write_text(json.dumps({**contract, "action_scale": 0.02}))
    spec, _ = load_chunk_policy(str(folder), PANDA, contract_file=str(full))
    assert spec.action_scale == 0.02  # the file's keys win


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"state_dim": 49, "state_names": ()}, "49-value observation.state.*policy_obs"),
        ({"state_names": tuple(f"s{i}" for i in range(22))}, "state_names"),
        ({"action_names": tuple(f"a{i}" for i in range(8))}, "action_names"),
    ],
)
def test_a_policy_the_daemon_cannot_feed_is_refused(tmp_path, contract, change, match):
    from upright.vla.tiny import TinyVLA, TinyVLAConfig

    base = goal_seeking_tiny_vla(np.zeros(8), contract).cfg.to_dict()
    model = TinyVLA(TinyVLAConfig.from_dict({**base, **change}))
    _refused(_save(model, tmp_path / "vla"), match)


def test_a_camera_policy_loads_with_its_cameras_and_image_size(tmp_path, contract):
    from upright.vla.tiny import TinyVLA, TinyVLAConfig

    base = goal_seeking_tiny_vla(np.zeros(8), contract).cfg.to_dict()
    model = TinyVLA(
        TinyVLAConfig.from_dict({**base, "cameras": ("front", "wrist"), "image_height": 16, "image_width": 24})
    )
    spec, policy = load_chunk_policy(str(_save(model, tmp_path / "vla")), PANDA)
    assert spec.metadata["cameras"] == ["front", "wrist"] and spec.metadata["image_size"] == [16, 24]
    assert policy.cfg.cameras == ("front", "wrist")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"action_mode": "relative"}, "action_convention is 'delta'.*action_mode 'relative'"),
        ({"action_mode": "ee_delta"}, "not one the daemon runs"),
        ({"joint_names": [f"j{i}" for i in range(8)]}, "do not match the robot"),
        ({"kp": [1.0] * 7}, "'kp' has 7 values"),
        ({"control_dt": 0.01}, "control_dt"),
    ],
)
def test_a_contract_that_contradicts_the_policy_or_the_robot_is_refused(tmp_path, contract, change, match):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**contract, **change}))
    model = goal_seeking_tiny_vla(np.zeros(8), contract)
    model.cfg.action_names = model.cfg.state_names = ()  # let the joint-name check reach the robot
    _refused(_save(model, tmp_path / "vla"), match, contract_file=str(bad))


def test_the_cli_wants_an_instruction_for_a_chunked_policy(tmp_path, contract, capsys, linear_policy):
    from upright.deploy.cli import main

    folder = _save(goal_seeking_tiny_vla(np.zeros(8), contract), tmp_path / "vla")
    common = ["--no-log", "--socket", str(tmp_path / "ctl.sock"), "--no-keyboard"]
    assert main(["run", "--policy", str(folder), "--robot", "franka_emika_panda", *common]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--instruction 'lift the cube'" in err[0], err
    assert main(["run", "--policy", str(linear_policy), "--instruction", "stand up", *common]) == 2
    assert "for chunked (VLA) policies" in capsys.readouterr().err
    assert (
        main(["run", "--policy", "ws://127.0.0.1:9", "--instruction", "lift", "--robot", "franka_emika_panda", *common])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no openpi policy server at ws://127.0.0.1:9" in err[0], err


def test_a_remote_policy_runs_through_the_chunk_runner(tmp_path, contract):
    """upright-policy-server serves the TinyVLA on loopback; the daemon's loader connects with a JSON contract (the
    server's metadata has none) and the ChunkRunner gets the model's actions over the wire."""
    from upright.deploy.chunk_runner import ChunkRunner
    from upright.vla.server_thread import BackgroundServer

    goal = np.array(contract["default_joint_pos"]) + 0.1
    model = goal_seeking_tiny_vla(goal, contract)
    path = tmp_path / "contract.json"
    path.write_text(json.dumps(contract))
    with BackgroundServer(model) as server:
        source = f"ws://127.0.0.1:{server.port}"
        _refused(source, "deploy contract lacks")  # the remote case needs the JSON file
        spec, remote = load_chunk_policy(source, PANDA, contract_file=str(path), task="lift the cube")
        runner = ChunkRunner(remote, "lift the cube", control_dt=spec.control_dt)
        try:
            state = np.concatenate([spec.default_joint_pos, np.zeros(8), [0, 0, 0, 0, 0, -1.0]]).astype(np.float32)
            actions = []
            for _ in range(50):
                a = runner(state[None])
                if a is not None:
                    actions.append(a)
                time.sleep(0.02)
        finally:
            runner.close()
        assert remote._ws is None  # closing the runner closed the connection
    assert len(actions) >= 40 and runner.stats.chunks_used >= 2
    np.testing.assert_allclose(actions[-1], np.clip(2.0 * (goal - spec.default_joint_pos), -1, 1), atol=1e-5)
