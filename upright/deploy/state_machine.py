"""The daemon's modes and the operator events that move between them.

::

    ZERO_TORQUE --start--> RAMP_TO_DEFAULT --(ramp done)--> HOLD --resume--> POLICY
    POLICY --pause--> PAUSED --resume--> POLICY          POLICY --takeover--> HUMAN --release--> POLICY
    PAUSED --takeover--> HUMAN --pause--> PAUSED
    POLICY / HUMAN / PAUSED --logger_failed--> RAMP_TO_DEFAULT --(ramp done)--> HOLD
    any --estop / fault / stop--> DAMPING   (terminal: only damping is sent until the process exits)

``logger_failed``: the episode's logger failed and the daemon runs with ``--on-logger-failure hold`` (the default):
the episode ends and the robot ramps from its current targets to the default pose and holds it; the controller then
refuses ``resume`` (no episode could be recorded) until the daemon is restarted.

Every other (event, mode) pair is refused and leaves the mode unchanged. Every change of mode is
logged as one line, ``HOLD -> POLICY (operator resume)``, through the ``upright.deploy`` logger
(``upright-deploy run`` sends it to stderr, so ``journalctl -f`` shows it at once).
"""

from __future__ import annotations

import logging
from enum import IntEnum

from upright.dataset_io.records import ControlSource

log = logging.getLogger("upright.deploy")


class Mode(IntEnum):
    ZERO_TORQUE = 0
    RAMP_TO_DEFAULT = 1
    HOLD = 2
    POLICY = 3
    HUMAN = 4
    PAUSED = 5
    DAMPING = 6


TRANSITIONS: dict[str, dict[Mode, Mode]] = {
    "start": {Mode.ZERO_TORQUE: Mode.RAMP_TO_DEFAULT},
    "ramp_done": {Mode.RAMP_TO_DEFAULT: Mode.HOLD},
    "resume": {Mode.HOLD: Mode.POLICY, Mode.PAUSED: Mode.POLICY},
    "pause": {Mode.POLICY: Mode.PAUSED, Mode.HUMAN: Mode.PAUSED},
    "takeover": {Mode.POLICY: Mode.HUMAN, Mode.PAUSED: Mode.HUMAN},
    "release": {Mode.HUMAN: Mode.POLICY},
    "logger_failed": {
        Mode.POLICY: Mode.RAMP_TO_DEFAULT,
        Mode.HUMAN: Mode.RAMP_TO_DEFAULT,
        Mode.PAUSED: Mode.RAMP_TO_DEFAULT,
    },
}
"""Operator and internal events; ``estop``, ``fault`` and ``stop`` go to DAMPING from any mode."""

TO_DAMPING = ("estop", "fault", "stop")


class StateMachine:
    """Current mode plus the reason the robot went to damping."""

    def __init__(self) -> None:
        self.mode = Mode.ZERO_TORQUE
        self.damping_reason = ""
        self.estop = False

    def handle(self, event: str, reason: str = "") -> bool:
        """Apply ``event``; return True if it changed the mode (or was a damping event).

        A change of mode is logged (``logging``, logger ``upright.deploy``): DAMPING at level ERROR for a
        ``fault``, WARNING for ``estop`` and ``stop``, every other change at INFO; the line names ``reason``
        (default: the event).

        Raises:
            ValueError: ``event`` is not a known event.
        """
        before = self.mode
        if event in TO_DAMPING:
            if self.mode != Mode.DAMPING:
                self.mode = Mode.DAMPING
                self.damping_reason = reason or event
                self.estop = event == "estop"
                level = logging.ERROR if event == "fault" else logging.WARNING
                log.log(level, "%s -> DAMPING (%s: %s)", before.name, event, self.damping_reason)
            return True
        table = TRANSITIONS.get(event)
        if table is None:
            raise ValueError(f"unknown event '{event}'; known: {sorted([*TRANSITIONS, *TO_DAMPING])}")
        if self.mode not in table:
            return False
        self.mode = table[self.mode]
        log.info("%s -> %s (%s)", before.name, self.mode.name, reason or event)
        return True

    @property
    def control_source(self) -> ControlSource:
        """The logged control source of the current mode (DAMPING splits into damping / estop)."""
        if self.mode == Mode.HUMAN:
            return ControlSource.HUMAN
        if self.mode == Mode.PAUSED:
            return ControlSource.PAUSED
        if self.mode == Mode.DAMPING:
            return ControlSource.ESTOP if self.estop else ControlSource.DAMPING
        return ControlSource.POLICY
