"""Fault injection over a real byte-level serial link (ptys): each fault ends in the specified state,
and no unsafe command is ever sent (checked on the joint commands and on the bytes the motors received).

The robot is small (3 policy joints + 1 held joint on one bus, a fake first-order device) so that each
scenario runs in a fraction of a second; cycles run back to back (``pace=False``) and faults are
scheduled by I/O tick, so every scenario is deterministic. POLICY starts near tick 80; faults at 150.
"""

from __future__ import annotations

import numpy as np
import pytest
from deploy_testlib import ConstantPolicy, Fault, Harness

from upright.deploy.loop import run_loop
from upright.deploy.state_machine import Mode

ONSET = 150
N = 5  # SafetyConfig.max_consecutive_link_errors


def run(policy=None, faults=(), cycles=320, temperature=35):
    h = Harness(policy or ConstantPolicy(0.05), faults=faults, temperature=temperature)
    try:
        run_loop(h.controller, h.robot, max_cycles=cycles, pace=False, install_signals=False)
    finally:
        h.close()
    return h


def assert_policy_ran_until_stop(h):
    assert h.controller.sm.damping_reason == "max_cycles", h.controller.sm.damping_reason
    assert h.damping_tick() >= 320
    h.assert_no_unsafe_command()


def assert_damping_for(h, reason: str, within: int):
    assert h.controller.mode == Mode.DAMPING
    assert reason in h.controller.sm.damping_reason, h.controller.sm.damping_reason
    t = h.damping_tick()
    assert t is not None and ONSET < t <= ONSET + within, t
    h.assert_no_unsafe_command()


def test_nominal_run_reaches_policy():
    h = run()
    assert h.controller.tick >= 30 and h.controller.episode == 0
    assert_policy_ran_until_stop(h)


@pytest.mark.parametrize(
    "faults",
    [
        [Fault("drop", "j1", ONSET, ONSET + 1)],
        [Fault("drop", "j1", ONSET, ONSET + N - 1)],
        [Fault("corrupt", "j2", ONSET, ONSET + 2)],
        [Fault("delay", "j0", ONSET, ONSET + 50, value=0.0005)],  # within the 2 ms reply timeout
    ],
    ids=["one-dropped", "N-1-dropped", "two-corrupted", "short-delay"],
)
def test_tolerated_faults_keep_running(faults):
    assert_policy_ran_until_stop(run(faults=faults))


def test_dropped_frames_N_in_a_row_damp():
    h = run(faults=[Fault("drop", "j1", ONSET)])
    assert_damping_for(h, "motor link fault: ['j1']", N + 1)


def test_corrupted_frames_damp():
    h = run(faults=[Fault("corrupt", "j2", ONSET)])
    assert_damping_for(h, "motor link fault: ['j2']", N + 1)
    assert h.robot.reading.crc_error.any() or h.controller.health.total_crc_errors[2] >= N


def test_delayed_frames_damp():
    h = run(faults=[Fault("delay", "j0", ONSET, value=0.1)])
    assert_damping_for(h, "motor link fault: ['j0']", N + 1)
    assert h.controller.health.total_timeouts[0] >= N


def test_stale_imu_damps():
    h = run(faults=[Fault("stale_imu", None, ONSET)], cycles=2000)
    assert_damping_for(h, "IMU stale", 1800)


def test_lost_imu_damps():
    h = run(faults=[Fault("drop", "imu", ONSET)], cycles=2000)
    assert_damping_for(h, "IMU stale", 1800)


def test_nan_from_the_policy_damps_and_nothing_nan_is_sent():
    policy = ConstantPolicy(0.05, nan_after=12)
    h = run(policy)
    assert "NaN" in h.controller.sm.damping_reason
    assert h.controller.mode == Mode.DAMPING
    t = h.damping_tick()
    assert t is not None and t < 320
    # the tick that got NaN sent damping, not a target derived from it
    h.assert_no_unsafe_command()
    assert all(np.isfinite(c["q"]).all() for _, c in h.robot.sent)


def test_motor_error_flag_damps():
    h = run(faults=[Fault("error_flag", "j1", ONSET, value=2)])
    assert_damping_for(h, "motor error flags: {'j1': 2}", 11)


def test_overtemperature_damps():
    h = run(faults=[Fault("temperature", "h0", ONSET, value=90)])
    assert_damping_for(h, "motor over 85.0 °C: ['h0']", 11)
