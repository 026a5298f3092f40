"""The loop: absolute-deadline pacing, and every exit path (exception, watchdog, SIGINT, SIGTERM, overruns)
ending with damping on the wire."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
from deploy_testlib import ConstantPolicy, Harness

from upright.deploy.controller import ControllerConfig
from upright.deploy.loop import Pacer, WatchdogTimeout, run_loop
from upright.deploy.safety import SafetyConfig
from upright.deploy.state_machine import Mode


def test_pacer_holds_absolute_deadlines():
    pacer = Pacer(0.004, spin_s=0.0005)
    pacer.start()
    t0 = pacer.next_ns
    late = [pacer.wait() for _ in range(25)]
    assert pacer.next_ns == t0 + 25 * 4_000_000 + pacer.missed * 4_000_000  # no drift: deadlines are t0 + k·dt
    assert np.median(late) < 1e6


def test_pacer_skips_missed_deadlines():
    pacer = Pacer(0.002, spin_s=0.0)
    pacer.start()
    time.sleep(0.011)
    deadline = pacer.next_ns
    late = pacer.wait()
    assert late > 9_000_000 and pacer.missed >= 4
    woke = deadline + late  # when wait() returned (a later clock reading may be a period later on a loaded machine)
    assert woke < pacer.next_ns <= woke + 2_000_000 and (pacer.next_ns - deadline) % 2_000_000 == 0


def _cfg(**safety) -> ControllerConfig:
    """Overruns are not what these tests are about (the machine may be loaded): K is huge unless asked."""
    safety = {"max_consecutive_overruns": 10**6, **safety}
    return ControllerConfig(
        ramp_s=0.1,
        policy_ramp_s=0.0,
        auto_start=True,
        auto_engage_s=0.04,
        stop_damping_s=0.05,
        exit_after_damping_s=0.1,
        safety=SafetyConfig(**safety),
    )


def _last_is_damping(h: Harness) -> None:
    h.assert_no_unsafe_command()
    _, last = h.robot.sent[-1]
    assert (last["kp"] == 0).all() and (last["kd"] > 0).all()


def test_exception_sends_damping():
    h = Harness(ConstantPolicy(raise_after=15), cfg=_cfg())
    try:
        with pytest.raises(RuntimeError, match="policy crashed"):
            run_loop(h.controller, h.robot, max_cycles=2000, install_signals=False)
    finally:
        h.close()
    assert h.controller.mode == Mode.DAMPING and "policy crashed" in h.controller.sm.damping_reason
    _last_is_damping(h)


def test_watchdog_sends_damping():
    h = Harness(ConstantPolicy(sleep_s=0.6, sleep_after=12), cfg=_cfg(watchdog_s=0.15))
    try:
        with pytest.raises(WatchdogTimeout):
            run_loop(h.controller, h.robot, max_cycles=5000)
    finally:
        h.close()
    assert h.controller.mode == Mode.DAMPING
    _last_is_damping(h)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_send_damping_then_exit(sig):
    h = Harness(ConstantPolicy(), cfg=_cfg())
    timer = threading.Timer(0.5, os.kill, (os.getpid(), sig))
    timer.start()
    try:
        code = run_loop(h.controller, h.robot, max_cycles=10_000)
    finally:
        timer.cancel()
        h.close()
    assert code == 0 and h.controller.sm.damping_reason == sig.name
    assert h.controller.tick < 200  # stopped by the signal, not by max_cycles
    _last_is_damping(h)


def test_consecutive_overruns_damp():
    """A policy that takes 10 ms per call at 50 Hz/500 Hz: each period overruns; K in a row -> damping."""
    h = Harness(
        ConstantPolicy(sleep_s=0.01, sleep_after=8), cfg=_cfg(max_consecutive_overruns=4, overrun_threshold_s=0.004)
    )
    try:
        run_loop(h.controller, h.robot, max_cycles=3000, install_signals=False)
    finally:
        h.close()
    assert "overran" in h.controller.sm.damping_reason, h.controller.sm.damping_reason
    _last_is_damping(h)
