"""End to end, chunked policy: the daemon (`upright-deploy run`) runs an exported TinyVLA (state-only ONNX with its
deploy contract) on `upright-deploy sim-robot --robot franka_emika_panda` (the Panda in the lift scene) over
pseudo-terminals, byte for byte: inference off the real-time thread, the lift task's delta rule, and a HUMAN
intervention logged as on the G1.

The TinyVLA's weights are set by hand (deploy_testlib.goal_seeking_tiny_vla): every action is clip(2·(goal - q), ±1),
so the delta rule drives the arm to ``GOAL`` and holds it there; the test reads where the simulated arm went from the
sim-robot's recorded qpos."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
from daemon_testlib import ctl, start_daemon, start_sim_robot, stop, wait_for_mode
from deploy_testlib import goal_seeking_tiny_vla

from upright.dataset_io.lerobot import load_frames
from upright.dataset_io.records import SafetyFlag
from upright.robots import panda

OFFSET = np.array([0.5, -0.2, 0.3, 0.3, -0.3, -0.2, 0.4, -0.02])
"""GOAL - home, rad (7 arm joints) and m (finger: from open 0.04 to 0.02)."""
GOAL = np.array(panda.HOME_CTRL) + OFFSET
HUMAN_JOINT1 = 0.1
"""The operator's target for joint1 during the takeover, rad (the policy's goal is 0.5)."""


@pytest.fixture(scope="module")
def vla(tmp_path_factory):
    from upright.tasks.lift.metadata import lift_deploy_contract
    from upright.vla.export import export_onnx

    path = tmp_path_factory.mktemp("vla") / "policy.onnx"
    assert export_onnx(goal_seeking_tiny_vla(GOAL, lift_deploy_contract()), path, ["lift the cube"]) < 1e-4
    return path


@pytest.mark.slow
def test_daemon_runs_a_chunked_vla_on_the_simulated_panda_with_an_intervention(tmp_path, vla):
    from upright.vla.onnx_policy import OnnxChunkPolicy

    sim, links = start_sim_robot(
        tmp_path,
        "--robot",
        "franka_emika_panda",
        "--lockstep-dt",
        "0.002",
        "--record",
        str(tmp_path / "trace.npz"),
        buses=1,
    )
    daemon = start_daemon(
        tmp_path,
        vla,
        links,
        "--robot",
        "franka_emika_panda",
        "--instruction",
        "lift the cube",
        "--auto-start",
        "--ramp-s",
        "0.3",
        "--auto-engage",
        "0.1",
    )
    try:
        wait_for_mode(tmp_path, "POLICY")
        time.sleep(1.2)
        take = ctl(tmp_path, "takeover")
        assert take["ok"] and take["mode"] == "HUMAN", take
        assert ctl(tmp_path, "target", f"joint1={HUMAN_JOINT1}")["ok"]
        time.sleep(0.8)
        release = ctl(tmp_path, "release")
        assert release["ok"] and release["mode"] == "POLICY", release
        time.sleep(2.5)
        last = ctl(tmp_path, "status")
        assert last["mode"] == "POLICY", (tmp_path / "daemon.log").read_text()[-3000:]
        assert ctl(tmp_path, "quit")["ok"]
        assert daemon.wait(60) == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    finally:
        stop(daemon)
        stop(sim)
    log = (tmp_path / "daemon.log").read_text()
    assert "chunked policy: H = 10" in log and "action_mode delta" in log, log[-2000:]
    frames = load_frames(tmp_path / "dataset").to_pydict()
    ep = [i for i, e in enumerate(frames["episode_index"]) if e == 0]
    n = len(ep)
    f_take, f_release = take["frame_index"], release["frame_index"]
    # the intervention is logged exactly as on the G1: those frames and only those are human
    intervention = [frames["intervention"][i] for i in ep]
    source = [frames["control_source"][i] for i in ep]
    assert intervention == [f_take <= k < f_release for k in range(n)]
    assert [s == 1 for s in source] == intervention
    assert set(source[:-1]) == {0, 1} and source[-1] == 3  # policy and human, then the quit's damping frame
    info = json.loads((tmp_path / "dataset" / "meta" / "info.json").read_text())
    assert info["robot_type"] == "franka_emika_panda" and info["fps"] == 50
    episodes = pq.read_table(tmp_path / "dataset" / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    assert episodes[0]["upright/outcome"] == "stopped"

    n -= 1  # from here on the frames of the policy and the operator (not the damping frame)
    state = np.array([frames["observation.state"][i] for i in ep[:n]])
    obs = np.array([frames["observation.policy_obs"][i] for i in ep[:n]])
    proposal = np.array([frames["observation.policy_action"][i] for i in ep[:n]])
    target = np.array([frames["action.joint_target"][i] for i in ep[:n]])
    flags = np.array([frames["safety_flags"][i] for i in ep[:n]])
    # the policy's input is the recorded observation.state, in the demonstrations' layout (q, dq, gyro 0, gravity)
    np.testing.assert_array_equal(obs, state)
    np.testing.assert_array_equal(state[:, 16:], np.tile([0, 0, 0, 0, 0, -1.0], (n, 1)))
    # each executed proposal is the VLA's action for the observation of one of the last H ticks (latency compensation)
    chunks = OnnxChunkPolicy(vla).predict_action_chunk({"observation.state": state, "task": ["lift the cube"] * n})
    chunks = chunks.numpy()
    fresh = (flags & SafetyFlag.STALE_ACTION) == 0
    assert fresh[1:].mean() > 0.9, flags  # the queue (almost) never ran dry
    for t in np.flatnonzero(fresh):
        assert any(np.allclose(proposal[t], chunks[s, t - s], atol=1e-5) for s in range(max(0, t - 9), t + 1)), t
    # the lift task's delta rule on every policy tick the daemon's clamps left alone (the torque clamp trims the
    # first fast moves of the wrist): target = clip(previous target + 0.04·a); a stale tick holds the targets
    lo, hi = np.array(panda.CTRL_RANGE).T
    clamps = SafetyFlag.TORQUE_CLAMPED | SafetyFlag.DELTA_CLAMPED | SafetyFlag.TARGET_LIMIT_CLAMPED
    checked = 0
    for t in range(1, n):
        if source[t] == 0 and source[t - 1] == 0 and not flags[t] & clamps:
            a = proposal[t] if fresh[t] else 0.0
            np.testing.assert_allclose(target[t], np.clip(target[t - 1] + 0.04 * a, lo, hi), atol=1e-6)
            checked += 1
    assert checked > 0.8 * (n - (f_release - f_take)), (checked, n)
    # the simulated arm: at the operator's target after the takeover, at the policy's goal at the end
    trace = np.load(tmp_path / "trace.npz")
    times, qpos = trace["time"], trace["qpos"]

    def qpos_at_frame(k: int) -> np.ndarray:
        t = frames["imu_time_us"][ep[k]] / 1e6  # lockstep: the IMU clock is the physics time
        return qpos[int(np.argmin(np.abs(times - t))), :8]

    home = np.array(panda.HOME_CTRL)
    np.testing.assert_allclose(qpos_at_frame(0), home, atol=0.05)  # it started at home
    assert abs(qpos_at_frame(f_release - 1)[0] - HUMAN_JOINT1) < 0.03, qpos_at_frame(f_release - 1)
    end = qpos_at_frame(n - 1)  # the last policy frame
    np.testing.assert_allclose(end[:7], GOAL[:7], atol=0.01)
    assert abs(end[7] - GOAL[7]) < 0.002
