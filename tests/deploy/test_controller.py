"""Controller logic on fabricated readings (no I/O): entering POLICY ramps from the measured pose, bumpless
takeover, executed vs proposed actions, in the three action modes (relative: q + β·a, absolute: default + β·a,
delta: clip(previous target + β·a, limits))."""

from __future__ import annotations

import time

import numpy as np
from deploy_testlib import ConstantPolicy, small_robot, small_spec

from upright.dataset_io.records import SafetyFlag
from upright.deploy.controller import Controller, ControllerConfig
from upright.deploy.robot import RobotReading
from upright.deploy.safety import SafetyConfig
from upright.deploy.state_machine import Mode


def make(policy_ramp_s: float, action: float = 0.4, action_mode: str = "relative", safety: SafetyConfig | None = None):
    c = Controller(
        small_spec(action_mode=action_mode),
        small_robot(),
        ConstantPolicy(action),
        ControllerConfig(policy_ramp_s=policy_ramp_s, auto_engage_s=0.0, safety=safety or SafetyConfig()),
    )
    now = time.monotonic_ns()
    c.start(now)
    c.sm.mode = Mode.HOLD  # as after RAMP_TO_DEFAULT: holding the default pose
    c.command.kp[:] = c.kp
    c.command.kd[:] = c.kd
    c.command.q[:] = c.default
    c.target[:] = c.default
    rd = RobotReading(4)
    rd.ok[:] = True
    rd.imu_ok, rd.imu_seq, rd.t_ns = True, 1, now
    rd.q[:] = c.default + np.array([0.1, -0.05, 0.08, 0.0])  # the robot sags away from the held pose
    return c, rd


def tick(c, rd, k):
    rd.imu_seq += 1
    rd.t_ns = time.monotonic_ns()
    c.on_cycle(rd, k * c.decimation, 0)


def test_entering_policy_ramps_from_the_measured_pose():
    c, rd = make(policy_ramp_s=0.1)  # 5 ticks
    beta, a = c.spec.action_scale, 0.4
    tick(c, rd, 0)
    assert c.mode == Mode.POLICY
    pol = c.pol
    # first command: 1/5 of the way from the measured pose (not the held default) to q + β·a
    np.testing.assert_allclose(c.command.q[pol], rd.q[pol] + beta * a / 5, atol=1e-7)
    for k in range(1, 5):
        tick(c, rd, k)
        np.testing.assert_allclose(c.command.q[pol], rd.q[pol] + beta * a * (k + 1) / 5, atol=1e-7)
    tick(c, rd, 5)
    np.testing.assert_allclose(c.command.q[pol], rd.q[pol] + beta * a, atol=1e-7)  # ramp over: the env's rule
    np.testing.assert_allclose(c.executed, a, rtol=1e-6)


def test_no_ramp_is_the_env_rule_at_once_and_held_joints_keep_their_pose():
    c, rd = make(policy_ramp_s=0.0)
    tick(c, rd, 0)
    np.testing.assert_allclose(c.command.q[c.pol], rd.q[c.pol] + c.spec.action_scale * 0.4, atol=1e-7)
    np.testing.assert_allclose(c.command.q[c.held], c.spec.held_joint_pos)
    np.testing.assert_allclose(c.command.kp[c.held], c.spec.held_kp)
    np.testing.assert_array_equal(c.executed, c.proposal)


def test_takeover_is_bumpless_and_logs_the_executed_action():
    c, rd = make(policy_ramp_s=0.0)
    tick(c, rd, 0)
    before = c.command.q.copy()
    assert c._enter("takeover", rd) and c.mode == Mode.HUMAN
    tick(c, rd, 1)
    np.testing.assert_allclose(c.command.q, before)  # the human starts from the current targets
    c.human_goal[0] += 1.0
    tick(c, rd, 2)
    assert np.isclose(c.command.q[c.pol[0]] - before[c.pol[0]], c.cfg.safety.human_max_delta)  # rate-limited
    # executed action = what the targets mean in policy units; the proposal is still the policy's
    np.testing.assert_allclose(c.executed, (c.command.q[c.pol] - rd.q[c.pol]) / c.spec.action_scale, rtol=1e-6)
    np.testing.assert_allclose(c.proposal, 0.4)


def test_absolute_mode_targets_default_plus_beta_a_whatever_the_measured_pose():
    c, rd = make(policy_ramp_s=0.0, action_mode="absolute")
    beta, default = c.spec.action_scale, c.spec.default_joint_pos
    tick(c, rd, 0)
    assert c.mode == Mode.POLICY
    np.testing.assert_allclose(c.command.q[c.pol], default + beta * 0.4, atol=1e-7)
    assert np.abs(c.command.q[c.pol] - (rd.q[c.pol] + beta * 0.4)).max() > 0.05  # not the relative rule
    np.testing.assert_array_equal(c.executed, c.proposal)
    rd.q[c.pol] += np.array([0.2, -0.1, 0.05])  # the robot moves: an absolute target does not follow it
    tick(c, rd, 1)
    np.testing.assert_allclose(c.command.q[c.pol], default + beta * 0.4, atol=1e-7)
    np.testing.assert_allclose(c.command.q[c.held], c.spec.held_joint_pos)


def test_absolute_mode_inverse_is_the_executed_action_around_the_default_pose():
    c, rd = make(policy_ramp_s=0.0, action_mode="absolute")
    beta, default = c.spec.action_scale, c.spec.default_joint_pos
    a = np.array([0.3, -0.2, 0.1], np.float32)
    q = rd.q[c.pol]
    np.testing.assert_allclose(c.policy_targets(a, q), default + beta * a, atol=1e-7)
    np.testing.assert_allclose(c.policy_targets(a, q + 0.3), default + beta * a, atol=1e-7)
    np.testing.assert_allclose(c.executed_action(default + beta * a, q), a, atol=1e-6)
    rel, _ = make(policy_ramp_s=0.0)
    np.testing.assert_allclose(rel.policy_targets(a, q), q + beta * a, atol=1e-7)
    np.testing.assert_allclose(rel.executed_action(q + beta * a, q), a, atol=1e-6)
    # entering POLICY blends from the measured pose; the executed action is the blend's, around the default pose
    c, rd = make(policy_ramp_s=0.1, action_mode="absolute")  # 5 ticks
    tick(c, rd, 0)
    q = rd.q[c.pol]
    np.testing.assert_allclose(c.command.q[c.pol], q + (default + beta * 0.4 - q) / 5, atol=1e-7)
    np.testing.assert_allclose(c.executed, (c.command.q[c.pol] - default) / beta, atol=1e-6)
    np.testing.assert_allclose(c.last_action, c.executed)  # a ramp feeds the executed action back
    for k in range(1, 5):
        tick(c, rd, k)
    np.testing.assert_allclose(c.command.q[c.pol], default + beta * 0.4, atol=1e-7)
    np.testing.assert_allclose(c.executed, 0.4, atol=1e-6)
    # takeover: the human's targets, logged as absolute-mode actions
    assert c._enter("takeover", rd) and c.mode == Mode.HUMAN
    c.human_goal[0] += 1.0
    tick(c, rd, 5)
    np.testing.assert_allclose(c.executed, (c.command.q[c.pol] - default) / beta, atol=1e-6)
    assert not np.isclose(c.executed[0], 0.4)


def test_absolute_mode_targets_still_pass_the_target_bounds():
    # the joint range is [-1, 1] rad, Kp 20 N·m/rad and the torque limit 20 N·m: by default targets may lie up to
    # 20 / 20 = 1 rad outside it (where the motor already pushes with its whole torque at the stop), no further
    only_bounds = SafetyConfig(clamp_torque=False, max_target_delta=None)
    c, rd = make(policy_ramp_s=0.0, action=5.0, action_mode="absolute", safety=only_bounds)  # default + 0.5·5 > 2
    tick(c, rd, 0)
    assert c.flags & SafetyFlag.TARGET_LIMIT_CLAMPED
    np.testing.assert_allclose(c.command.q[c.pol], 2.0)
    # what was executed is the clamped target, in absolute-mode policy units; the proposal stays the policy's
    np.testing.assert_allclose(
        c.executed, (c.command.q[c.pol] - c.spec.default_joint_pos) / c.spec.action_scale, atol=1e-6
    )
    assert (c.executed < 5.0).all() and np.allclose(c.proposal, 5.0)
    c, rd = make(policy_ramp_s=0.0, action=3.0, action_mode="absolute", safety=only_bounds)  # 1.4-1.7 rad: inside
    tick(c, rd, 0)
    assert not c.flags & SafetyFlag.TARGET_LIMIT_CLAMPED
    np.testing.assert_allclose(c.command.q[c.pol], c.spec.default_joint_pos + 1.5)
    # limit_clamp="range": the joint range itself
    strict = SafetyConfig(clamp_torque=False, max_target_delta=None, limit_clamp="range")
    c, rd = make(policy_ramp_s=0.0, action=3.0, action_mode="absolute", safety=strict)
    tick(c, rd, 0)
    assert c.flags & SafetyFlag.TARGET_LIMIT_CLAMPED
    np.testing.assert_allclose(c.command.q[c.pol], 1.0)


def test_delta_mode_moves_the_previous_targets_within_the_limits_and_never_blends():
    c, rd = make(policy_ramp_s=0.1, action=0.4, action_mode="delta")  # a ramp is set, but delta starts at the held pose
    beta = c.spec.action_scale
    expect = c.default[c.pol].copy()  # HOLD's targets: the env's p_target at the episode's start
    for k in range(8):
        rd.q[c.pol] = c.command.q[c.pol]  # the arm has reached the previous targets
        tick(c, rd, k)
        assert c.mode == Mode.POLICY
        expect = np.clip(expect + beta * 0.4, c.lower[c.pol], c.upper[c.pol])
        np.testing.assert_allclose(c.command.q[c.pol], expect, atol=1e-7)
        np.testing.assert_allclose(c.executed, 0.4)  # the rule's own clip is the env's, not a deploy clamp
        assert not c.flags & (SafetyFlag.TARGET_LIMIT_CLAMPED | SafetyFlag.RAMPING)
        np.testing.assert_allclose(c.command.q[c.held], c.spec.held_joint_pos)
    np.testing.assert_array_equal(expect, c.upper[c.pol])  # the targets ran into the limits and stayed there
    rel, _ = make(policy_ramp_s=0.0)
    q = rd.q[c.pol]
    assert np.abs(rel.policy_targets(np.full(3, 0.4), q) - c.policy_targets(np.full(3, 0.4), q)).max() > 0.05


def test_delta_mode_logs_a_takeover_as_increments_of_the_targets():
    c, rd = make(policy_ramp_s=0.0, action=0.1, action_mode="delta")
    tick(c, rd, 0)
    assert c._enter("takeover", rd) and c.mode == Mode.HUMAN
    c.human_goal[0] += 1.0
    before = c.command.q[c.pol].copy()
    tick(c, rd, 1)
    step = c.command.q[c.pol] - before
    assert np.isclose(step[0], c.cfg.safety.human_max_delta) and np.allclose(step[1:], 0.0)
    np.testing.assert_allclose(c.executed, step / c.spec.action_scale, atol=1e-6)  # policy units of the delta rule
    np.testing.assert_allclose(c.proposal, 0.1)
    assert c._enter("release", rd) and c.mode == Mode.POLICY
    before = c.command.q[c.pol].copy()
    tick(c, rd, 2)  # the policy continues from the human's last targets
    np.testing.assert_allclose(c.command.q[c.pol], before + c.spec.action_scale * 0.1, atol=1e-7)


def test_faults_found_in_one_cycle_are_named_together():
    """Issue 33.8: a daemon that had no CPU for 60 ms (more than max_motor_age_s and max_imu_age_s, 50 ms) finds, in
    one cycle, j1 silent and the IMU's sequence stuck: which failed first is not known within a cycle, so the reason
    names both, and the frame has both bits (it used to name the motor link alone)."""
    c, rd = make(policy_ramp_s=0.0)
    tick(c, rd, 0)
    assert c.mode == Mode.POLICY
    rd.ok[1], rd.timeout[1] = False, True  # j1 silent; the IMU answers with the same sequence
    rd.t_ns += int(0.06e9)
    c.on_cycle(rd, 1, 0)
    assert c.mode == Mode.DAMPING
    assert c.sm.damping_reason == "motor link fault: ['j1']; IMU stale: sequence not advancing"
    rd.ok[1], rd.timeout[1] = True, False
    tick(c, rd, 1)  # the next policy tick logs the frame of the fault
    assert c.flags & (SafetyFlag.LINK_FAULT | SafetyFlag.IMU_STALE) == SafetyFlag.LINK_FAULT | SafetyFlag.IMU_STALE
    rd.t_ns += int(0.06e9)  # one fault at a time: a fault found later adds its bit, not its reason
    c.on_cycle(rd, 11, 0)
    assert c.sm.damping_reason == "motor link fault: ['j1']; IMU stale: sequence not advancing"


def test_a_late_cycle_with_fresh_replies_is_not_a_fault():
    """Issue 33.8: the checks record the exchange before they compare ages: a cycle 60 ms late whose replies are all
    fresh is no fault (a daemon without a CPU for a while is not a link or IMU fault)."""
    c, rd = make(policy_ramp_s=0.0)
    tick(c, rd, 0)
    rd.imu_seq += 1
    rd.t_ns += int(0.06e9)
    c.on_cycle(rd, 1, 0)
    assert c.mode == Mode.POLICY and c.sm.damping_reason == ""


def test_a_pause_or_takeover_holds_a_target_past_a_stop_at_the_stop():
    """Targets may lie past a joint's stop under the policy (target_bounds); a pause or a takeover holds the joint at
    its stop instead (a takeover moves there at the human rate limit), or the motor would push into it with its whole
    torque for as long as they last."""
    only_bounds = SafetyConfig(clamp_torque=False, max_target_delta=None)
    for event, mode in (("pause", Mode.PAUSED), ("takeover", Mode.HUMAN)):
        c, rd = make(policy_ramp_s=0.0, action=3.0, action_mode="absolute", safety=only_bounds)
        tick(c, rd, 0)
        assert (c.command.q[c.pol] > c.upper[c.pol]).all()  # the policy's targets, past the stops
        assert c._enter(event, rd) and c.mode == mode
        # PAUSED holds the stop at once; HUMAN walks there at its rate limit (0.02 rad per tick) and stays
        for k in range(1, 40):
            tick(c, rd, k)
        np.testing.assert_allclose(c.command.q[c.pol], c.upper[c.pol])
