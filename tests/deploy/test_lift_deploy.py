"""The daemon runs the committed lift MLP policy (``ee_delta``): its IK rule and observation against the lift env step
for step, the object pose source over a real UDP socket (stale and hostile datagrams), and, end to end, the policy
lifting the simulated cube to the goal on ``sim-robot`` through the real CLIs, with a tracker stall."""

from __future__ import annotations

import json
import pathlib
import socket
import time

import numpy as np
import pytest
import torch
from daemon_testlib import start_daemon, start_sim_robot, stop, wait_for_mode

from upright.dataset_io.records import SafetyFlag
from upright.deploy.ee_action import EeDeltaRule
from upright.deploy.metadata import load_policy_spec
from upright.deploy.object_pose import ObjectPoseSource, decode_pose, encode_pose, goal_from_text
from upright.deploy.observation import ObservationBuilder
from upright.deploy.robot_config import franka_emika_panda
from upright.policy_io.schema import PolicyMetadataError

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIFT = ROOT / "upright" / "assets" / "policies" / "panda_lift" / "policy.onnx"
"""The committed lift policy (ee_delta, 45 inputs, 4 actions)."""


@pytest.fixture(scope="module")
def spec():
    return load_policy_spec(LIFT, franka_emika_panda(), object_pose=True)


def _lift_env():
    from upright.tasks.lift.config import LiftEnvCfg
    from upright.tasks.lift.env import LiftEnv
    from upright.tasks.standup.config import SimCfg

    cfg = LiftEnvCfg(num_envs=1, action_mode="ee_delta", ee_gravity_compensation=True, ee_max_lead_down=0.05)
    cfg.domain_rand.enabled = False  # no observation noise: the frames compare exactly
    cfg.curriculum.enabled = False  # evaluation and deployment: the lead bound always applies
    return LiftEnv(cfg, SimCfg(backend="native", num_threads=1))


def test_the_daemons_ik_rule_and_frame_are_the_envs_step_for_step(spec):
    """60 env steps of random actions: the daemon's rule gives the env's commanded and applied targets from the same
    inputs, and its observation builder the env's frame from the same readings."""
    rule = EeDeltaRule(spec.metadata, spec.kp, spec.action_scale, spec.path)
    builder = ObservationBuilder(spec)
    env = _lift_env()
    rng = np.random.default_rng(0)
    mirror = []
    try:
        for _ in range(60):
            st = env.state
            q9, dq9 = st.q[0].double().numpy(), st.dq[0].double().numpy()
            ctrl = env.ctrl[0].double().numpy()
            extra = {
                "home_q": rule.measured_q9(spec.default_joint_pos),
                "ctrl": ctrl,
                "gripper_pos": rule.site(q9[:8]),
                "cube_pos": st.cube_pos[0].numpy(),
                "cube_quat": st.cube_quat[0].numpy(),
                "target_pos": st.target_pos[0].numpy(),
            }
            frame = builder.frame(q9, dq9, np.zeros(3), np.array([1.0, 0, 0, 0]), st.action[0].numpy(), **extra)
            np.testing.assert_allclose(frame, env.get_observations()["actor"][0].numpy(), atol=2e-6)
            mirror.append(np.abs(rule.measured_q9(q9[:8]) - q9).max())  # the daemon mirrors finger_joint2
            a = np.clip(rng.normal(0.0, 0.7, 4), -1.0, 1.0).astype(np.float32)
            env.step(torch.tensor(a[None]))
            np.testing.assert_allclose(rule.step(ctrl, a, q9[:8]), env.ctrl[0].double().numpy(), atol=2e-6)
            # the daemon passes the tick's gripper site (already computed for the frame) instead of recomputing it
            np.testing.assert_array_equal(rule.step(ctrl, a, q9[:8], extra["gripper_pos"]), rule.step(ctrl, a, q9[:8]))
            sent = env.action_term.applied_ctrl(env, env.ctrl)[0].double().numpy()
            np.testing.assert_allclose(rule.applied(env.ctrl[0].double().numpy()), sent, atol=2e-6)
    finally:
        env.close()
    assert max(mirror) < 2e-3, max(mirror)  # the two fingers' slides, coupled by the model's equality
    # the rule resumes from targets it did not make: command_of inverts the gravity compensation
    ctrl = spec.default_joint_pos + np.array([0.3, -0.2, 0.1, 0.2, 0.0, 0.1, 0.0, -0.01])
    np.testing.assert_allclose(rule.command_of(rule.applied(ctrl)), ctrl, atol=1e-5)


def test_a_lift_file_needs_a_pose_source_and_its_chain(tmp_path):
    import onnx

    with pytest.raises(PolicyMetadataError, match=r"does not provide: \['gripper_to_cube'.*give --object-pose udp://"):
        load_policy_spec(LIFT, franka_emika_panda())
    model = onnx.load(str(LIFT))
    kept = [p for p in model.metadata_props if p.key != "kinematic_chain"]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    old = tmp_path / "old_lift.onnx"
    onnx.save(model, str(old))
    with pytest.raises(PolicyMetadataError, match=r"needs metadata keys \['kinematic_chain'\].*--refresh-metadata"):
        load_policy_spec(old, franka_emika_panda(), object_pose=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_pose_source_takes_valid_datagrams_and_drops_stale_and_hostile_ones():
    port = _free_port()
    source = ObjectPoseSource(f"udp://127.0.0.1:{port}", max_age_s=0.2)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert source.fresh() is None and "none yet" in source.describe()
        tx.sendto(encode_pose(1, [0.5, 0.1, 0.03], [2.0, 0.0, 0.0, 0.0]), ("127.0.0.1", port))
        _wait(lambda: source.received == 1)
        sample = source.fresh()
        np.testing.assert_allclose(sample.pos, [0.5, 0.1, 0.03])
        np.testing.assert_allclose(sample.quat, [1.0, 0.0, 0.0, 0.0])  # normalised
        hostile = [
            b"not json",
            b"\xff\xfe",
            json.dumps({"seq": 2, "pos": [0.5, 0.0], "quat": [1, 0, 0, 0]}).encode(),
            json.dumps({"seq": 2, "pos": [0.5, 0.0, float("nan")], "quat": [1, 0, 0, 0]}).encode(),
            json.dumps({"seq": 2, "pos": [0.5, 0.0, 0.0], "quat": [0.01, 0, 0, 0]}).encode(),
            json.dumps({"seq": 2, "pos": [50.0, 0.0, 0.0], "quat": [1, 0, 0, 0]}).encode(),
            json.dumps({"seq": True, "pos": [0.5, 0.0, 0.0], "quat": [1, 0, 0, 0]}).encode(),
            b"[" * 5000,  # too long
            b"[" * 1000,  # within the length, but nested past the JSON parser's recursion limit
            b'{"seq": 2, "pos": [1' + b"0" * 400 + b', 0, 0], "quat": [1, 0, 0, 0]}',  # overflows a float
            encode_pose(1, [0.6, 0.0, 0.03], [1, 0, 0, 0]),  # a repeated seq
        ]
        for data in hostile:
            tx.sendto(data, ("127.0.0.1", port))
        _wait(lambda: source.rejected == len(hostile))
        np.testing.assert_allclose(source.latest().pos, [0.5, 0.1, 0.03])  # none of them got in
        assert source.last_rejection == "seq 1 is not above the newest 1"
        # another host (127.0.0.2: loopback, but not the tracker's address) cannot inject a pose
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as intruder:
            intruder.bind(("127.0.0.2", 0))
            intruder.sendto(encode_pose(50, [0.4, 0.0, 0.3], [1, 0, 0, 0]), ("127.0.0.1", port))
        _wait(lambda: source.rejected == len(hostile) + 1)
        assert source.last_rejection == "from 127.0.0.2, not the tracker's 127.0.0.1" and source.latest().seq == 1
        time.sleep(0.25)
        assert source.fresh() is None and source.latest() is not None  # older than 0.2 s: stale
        # a restarted tracker (its seq from 0 again) is taken once the newest sample is stale
        tx.sendto(encode_pose(0, [0.55, 0.0, 0.2], [1, 0, 0, 0]), ("127.0.0.1", port))
        _wait(lambda: source.fresh() is not None)
        assert source.fresh().seq == 0 and source.received == 2
        with pytest.raises(ValueError, match=f"cannot bind 127.0.0.1:{port}"):
            ObjectPoseSource(f"udp://127.0.0.1:{port}")
    finally:
        tx.close()
        source.close()
    with pytest.raises(ValueError, match="expected udp://HOST:PORT"):
        ObjectPoseSource("tcp://127.0.0.1:80")
    with pytest.raises(ValueError, match="expected X,Y,Z"):
        goal_from_text("0.5,0.1")
    with pytest.raises(ValueError, match="not a reachable goal.*metres in the robot base frame"):
        goal_from_text("70,0,30")  # centimetres
    with pytest.raises(ValueError, match="needs its sender, --object-pose-from IP"):
        ObjectPoseSource("udp://0.0.0.0:5999")
    with pytest.raises(ValueError, match="not about 1"):
        decode_pose(encode_pose(1, [0, 0, 0], [0, 0, 0, 0]))


def test_the_controller_runs_the_lift_rule_holds_on_a_stale_pose_and_resyncs_after_an_intervention(spec):
    """The controller with the committed lift policy (real onnxruntime) and a real UDP pose source, on fabricated
    encoder readings: HOLD sends the gravity-compensated home targets; resume is refused until a pose arrives; a
    POLICY tick is the env's rule; a stale pose holds the targets and faults after max_consecutive_stale ticks; after
    HUMAN targets the commanded targets follow what was sent."""
    from upright.deploy.controller import Controller, ControllerConfig
    from upright.deploy.robot import RobotReading
    from upright.deploy.safety import SafetyConfig
    from upright.deploy.state_machine import Mode
    from upright.policy_io.mlp import OnnxPolicy

    port = _free_port()
    source = ObjectPoseSource(f"udp://127.0.0.1:{port}", max_age_s=0.05)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    cfg = ControllerConfig(safety=SafetyConfig(max_consecutive_stale=3, clamp_torque=False))
    c = Controller(spec, franka_emika_panda(), OnnxPolicy(spec, warmup=1), cfg, object_pose=source,
                   object_goal=np.array([0.7, 0.0, 0.3]))  # fmt: skip
    rule = EeDeltaRule(spec.metadata, spec.kp, spec.action_scale)
    try:
        now = time.monotonic_ns()
        c.start(now)
        rd = RobotReading(8)
        rd.ok[:] = True
        rd.imu_ok, rd.imu_seq, rd.t_ns, rd.imu_quat[:] = True, 1, now, [1.0, 0, 0, 0]
        rd.q[:] = spec.default_joint_pos
        c.sm.mode = Mode.HOLD
        k = 0

        def tick():
            nonlocal k
            rd.imu_seq += 1
            rd.t_ns = time.monotonic_ns()
            c.on_cycle(rd, k * c.decimation, 0)
            k += 1

        tick()
        np.testing.assert_allclose(c.command.q[c.pol], rule.applied(spec.default_joint_pos))
        reply = c._apply({"cmd": "resume"}, rd)
        assert not reply["ok"] and "'resume' refused: no fresh object pose" in reply["error"], reply
        tx.sendto(encode_pose(1, [0.7, 0.0, 0.03], [1, 0, 0, 0]), ("127.0.0.1", port))
        _wait(lambda: source.fresh() is not None)
        assert c._apply({"cmd": "resume"}, rd)["ok"] and c.mode == Mode.POLICY
        tick()
        a = np.clip(c.proposal, -1, 1)
        assert np.abs(a).max() > 0 and not c.flags & SafetyFlag.OBJECT_STALE
        expected = rule.step(spec.default_joint_pos, a, rd.q[c.pol])
        np.testing.assert_allclose(c.ee_ctrl, expected, atol=1e-12)
        if not c.flags & (SafetyFlag.DELTA_CLAMPED | SafetyFlag.TARGET_LIMIT_CLAMPED):
            np.testing.assert_allclose(c.command.q[c.pol], rule.applied(expected), atol=1e-12)
        np.testing.assert_array_equal(c.last_action, a)
        # the pose goes stale: no policy call, targets held, and the third such tick faults
        time.sleep(0.08)
        held = c.command.q.copy()
        tick()
        assert c.flags & SafetyFlag.OBJECT_STALE and c.mode == Mode.POLICY
        np.testing.assert_array_equal(c.command.q, held)
        # an intervention meanwhile: HUMAN targets are joint targets; q_c follows what was sent
        tx.sendto(encode_pose(2, [0.7, 0.0, 0.03], [1, 0, 0, 0]), ("127.0.0.1", port))
        _wait(lambda: source.fresh() is not None)
        assert c._apply({"cmd": "takeover"}, rd)["ok"] and c.mode == Mode.HUMAN
        c.human_goal[0] += 0.05
        tick()
        np.testing.assert_allclose(c.ee_ctrl, rule.command_of(c.target[c.pol]), atol=1e-12)
        assert abs(c.ee_ctrl[0] - expected[0]) > 0.001  # it moved with the operator's target
        time.sleep(0.08)
        reply = c._apply({"cmd": "release"}, rd)
        assert not reply["ok"] and "'release' refused: no fresh object pose" in reply["error"], reply
        tx.sendto(encode_pose(3, [0.7, 0.0, 0.03], [1, 0, 0, 0]), ("127.0.0.1", port))
        _wait(lambda: source.fresh() is not None)
        assert c._apply({"cmd": "release"}, rd)["ok"] and c.mode == Mode.POLICY
        time.sleep(0.08)
        for _ in range(3):
            tick()
        assert c.mode == Mode.DAMPING and "lift policy: no fresh object pose for 3 policy ticks" in (
            c.sm.damping_reason
        ), c.sm.damping_reason
        assert "object_pose" in c.status() and "3 received" in c.status()["object_pose"]
    finally:
        c.close()
        tx.close()
        source.close()


@pytest.mark.slow
def test_the_daemon_lifts_the_simulated_cube_to_the_goal_and_holds_through_a_tracker_stall(tmp_path):
    """sim-robot (the Panda in the lift scene, the cube at (0.7, 0, 0.03)) sends the cube's pose at 50 Hz; the daemon
    runs the committed lift policy with the goal 0.27 m above the cube. A tracker stall from I/O tick 4,000 to 4,600
    (1.2 s) makes OBJECT_STALE ticks that hold the targets, then the policy resumes; the cube ends at the goal."""
    port = _free_port()
    goal = np.array([0.7, 0.0, 0.3])
    sim, links = start_sim_robot(
        tmp_path, "--robot", "franka_emika_panda", "--record", str(tmp_path / "trace.npz"),
        "--object-pose", f"udp://127.0.0.1:{port}", "--fault", "pose_stall::4000:4600", buses=1,
    )  # fmt: skip
    daemon = start_daemon(
        tmp_path, LIFT, links, "--robot", "franka_emika_panda", "--object-pose", f"udp://127.0.0.1:{port}",
        "--object-goal", ",".join(map(str, goal)), "--auto-start", "--ramp-s", "0.3", "--auto-engage", "0.1",
        "--max-stale-ticks", "100",
    )  # fmt: skip
    try:
        wait_for_mode(tmp_path, "POLICY")
        from upright.deploy.operator_socket import send_command

        deadline = time.monotonic() + 240
        while send_command(str(tmp_path / "ctl.sock"), {"cmd": "status"})["tick"] < 900:  # 18 s of policy ticks
            assert daemon.poll() is None and time.monotonic() < deadline, (tmp_path / "daemon.log").read_text()[-3000:]
            time.sleep(0.5)
        status = send_command(str(tmp_path / "ctl.sock"), {"cmd": "status"})
        assert status["mode"] == "POLICY", status
        assert send_command(str(tmp_path / "ctl.sock"), {"cmd": "quit"})["ok"]
        assert daemon.wait(60) == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    finally:
        stop(daemon)
        stop(sim)
    from upright.dataset_io.lerobot import load_frames

    frames = load_frames(tmp_path / "dataset").to_pydict()
    flags = np.array(frames["safety_flags"])
    stale = (flags & SafetyFlag.OBJECT_STALE) != 0
    assert 40 <= stale.sum() <= 80, stale.sum()  # 1.2 s at 50 Hz, minus the 0.1 s the last pose stays fresh
    targets = np.array(frames["action.joint_target"])
    held = np.flatnonzero(stale[1:] & stale[:-1]) + 1
    np.testing.assert_array_equal(targets[held], targets[held - 1])  # POLICY holds its targets while stale
    info = json.loads((tmp_path / "dataset" / "meta" / "info.json").read_text())
    assert info["features"]["action"]["names"] == ["site_dx", "site_dy", "site_dz", "finger"]
    trace = np.load(tmp_path / "trace.npz")
    times, cube = trace["time"], trace["qpos"][:, 9:12]
    t_end = frames["imu_time_us"][-2] / 1e6  # the last policy frame (the last one is the quit's damping frame)
    end = cube[int(np.argmin(np.abs(times - t_end)))]
    assert np.linalg.norm(end - goal) < 0.025, end  # the lift task's success radius
