"""Mode transitions: the allowed ones, refused ones, and damping from anywhere."""

from __future__ import annotations

import pytest

from upright.dataset_io.records import ControlSource
from upright.deploy.state_machine import Mode, StateMachine


def test_nominal_path_and_interventions():
    sm = StateMachine()
    assert sm.mode == Mode.ZERO_TORQUE
    for event, mode in [
        ("start", Mode.RAMP_TO_DEFAULT),
        ("ramp_done", Mode.HOLD),
        ("resume", Mode.POLICY),
        ("takeover", Mode.HUMAN),
        ("release", Mode.POLICY),
        ("pause", Mode.PAUSED),
        ("takeover", Mode.HUMAN),
        ("pause", Mode.PAUSED),
        ("resume", Mode.POLICY),
    ]:
        assert sm.handle(event) and sm.mode == mode, event
    assert sm.control_source == ControlSource.POLICY


@pytest.mark.parametrize(
    ("mode", "event"),
    [
        (Mode.ZERO_TORQUE, "resume"),
        (Mode.HOLD, "takeover"),
        (Mode.POLICY, "start"),
        (Mode.PAUSED, "release"),
        (Mode.DAMPING, "resume"),
    ],
)
def test_refused_transitions_leave_the_mode(mode, event):
    sm = StateMachine()
    sm.mode = mode
    assert not sm.handle(event) and sm.mode == mode


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("event", ["estop", "fault", "stop"])
def test_damping_from_every_mode(mode, event):
    sm = StateMachine()
    sm.mode = mode
    sm.handle(event, "why")
    assert sm.mode == Mode.DAMPING
    if mode != Mode.DAMPING:
        assert sm.control_source == (ControlSource.ESTOP if event == "estop" else ControlSource.DAMPING)


def test_unknown_event():
    with pytest.raises(ValueError, match="unknown event"):
        StateMachine().handle("jump")


@pytest.mark.parametrize("mode", list(Mode))
def test_a_failed_logger_ramps_an_episode_mode_to_hold(mode):
    """Issue 33.3: ``logger_failed`` (``--on-logger-failure hold``) takes POLICY, HUMAN and PAUSED to RAMP_TO_DEFAULT
    (then HOLD when the ramp is done); every other mode stays."""
    sm = StateMachine()
    sm.mode = mode
    changed = sm.handle("logger_failed", "logger failed: test")
    if mode in (Mode.POLICY, Mode.HUMAN, Mode.PAUSED):
        assert changed and sm.mode == Mode.RAMP_TO_DEFAULT
        assert sm.handle("ramp_done") and sm.mode == Mode.HOLD
    else:
        assert not changed and sm.mode == mode
