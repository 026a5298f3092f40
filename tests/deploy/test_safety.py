"""Each safety check and clamp on its own."""

from __future__ import annotations

import math

import numpy as np
import pytest

from upright.deploy import safety as S


def test_finite():
    assert (
        S.all_finite(np.zeros(3)) and not S.all_finite(np.array([0.0, np.nan])) and not S.all_finite(np.array([np.inf]))
    )


def test_limit_and_delta_clamps():
    t = np.array([-2.0, 0.0, 2.0])
    assert S.clamp_to_limits(t, np.full(3, -1.0), np.full(3, 1.0)) and t.tolist() == [-1.0, 0.0, 1.0]
    assert not S.clamp_to_limits(t, np.full(3, -1.0), np.full(3, 1.0))
    t = np.array([0.0, 0.9, -0.9])
    assert S.clamp_delta(t, np.zeros(3), 0.5) and t.tolist() == [0.0, 0.5, -0.5]
    assert not S.clamp_delta(t, np.zeros(3), None)


def test_torque_clamp_moves_the_target():
    q, dq = np.zeros(2), np.array([0.0, 1.0])
    kp, kd, lim = np.array([100.0, 100.0]), np.array([2.0, 2.0]), np.array([10.0, 10.0])
    t = np.array([0.5, 0.05])  # tau = 50, and 5 - 2 = 3
    assert S.clamp_torque(t, q, dq, kp, kd, lim)
    assert kp[0] * (t[0] - q[0]) - kd[0] * dq[0] == 10.0 and t[1] == 0.05
    t = np.array([1.0, 1.0])
    assert not S.clamp_torque(t, q, dq, np.zeros(2), kd, lim)  # kp = 0: nothing to clamp


def test_tilt():
    assert S.tilt_angle(np.array([0.0, 0.0, -1.0])) == 0.0
    assert math.isclose(S.tilt_angle(np.array([1.0, 0.0, 0.0])), math.pi / 2)
    guard = S.TiltGuard(1.0, arm_ticks=3)
    lying = np.array([1.0, 0.0, 0.0])
    upright = np.array([0.0, 0.0, -1.0])
    assert not any(guard.update(lying) for _ in range(10))  # never stood: not armed
    assert not any(guard.update(upright) for _ in range(3)) and guard.armed
    assert guard.update(lying)  # fell after standing
    assert not S.TiltGuard(None, 1).update(lying)


def test_temperature_and_errors():
    assert S.overheated(np.array([30.0, 85.0]), 85.0).tolist() == [False, True]
    assert S.motor_errors(np.array([0, 4])).tolist() == [False, True]


def test_link_health_counts_in_a_row_and_age():
    h = S.LinkHealth(2, max_consecutive=3, max_age_s=1.0)
    h.start(0)
    ok, no = np.array([True, True]), np.array([True, False])
    z = np.zeros(2, bool)
    assert not h.update(no, z, ~no, 1).any()
    assert not h.update(no, z, ~no, 2).any()
    assert not h.update(ok, z, z, 3).any()  # the streak is broken
    for t in (4, 5):
        assert not h.update(no, z, ~no, t).any()
    assert h.update(no, z, ~no, 6).tolist() == [False, True]
    assert h.total_timeouts.tolist() == [0, 5]
    h2 = S.LinkHealth(1, 100, max_age_s=0.01)
    h2.start(0)
    assert h2.update(np.array([False]), np.array([True]), np.array([False]), int(0.02e9)).all()


def test_imu_freshness_and_overruns():
    f = S.ImuFreshness(0.01)
    f.start(0)
    assert not f.update(True, 1, int(0.005e9))
    assert not f.update(True, 1, int(0.014e9))
    assert f.update(True, 1, int(0.016e9))  # same sequence for > 10 ms
    assert not f.update(True, 2, int(0.017e9))
    c = S.ConsecutiveCounter(3)
    assert [c.update(e) for e in (True, True, False, True, True, True)] == [False, False, False, False, False, True]


def test_target_bounds_widen_the_range_by_the_torque_limit_over_kp():
    lower, upper = np.array([-1.0, -2.0, 0.0]), np.array([1.0, 2.0, 0.5])
    kp, limit = np.array([20.0, 100.0, 0.0]), np.array([20.0, 50.0, 5.0])
    lo, hi = S.target_bounds(lower, upper, kp, limit, "torque")
    np.testing.assert_allclose(lo, [-2.0, -2.5, 0.0])  # a joint without Kp is not widened
    np.testing.assert_allclose(hi, [2.0, 2.5, 0.5])
    lo, hi = S.target_bounds(lower, upper, kp, limit, "range")
    np.testing.assert_array_equal(lo, lower)
    np.testing.assert_array_equal(hi, upper)
    lo[0] = 5.0
    assert lower[0] == -1.0  # copies: bounds changed later do not move the joint range
    with pytest.raises(ValueError, match="use one of"):
        S.target_bounds(lower, upper, kp, limit, "joint")
