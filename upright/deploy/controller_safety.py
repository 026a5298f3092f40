"""The controller's reactions to a fault and its clamps: damping, faults, stop requests, the clamped command.

A part of :class:`~upright.deploy.controller.Controller` (see :mod:`upright.deploy.controller` for the rules).
"""

from __future__ import annotations

import numpy as np

from upright.dataset_io.records import SafetyFlag
from upright.deploy import safety as S
from upright.deploy.protocol.go_m8010 import MotorMode
from upright.deploy.robot import JointCommand, RobotReading
from upright.deploy.state_machine import Mode


class SafetyMixin:
    """Damping, faults and stop requests, and the clamps every position target passes before it is sent.

    A mixin of :class:`~upright.deploy.controller.Controller`: it uses the attributes that the controller's
    ``__init__`` sets and calls its other methods.
    """

    def damping_command(self, reading: RobotReading | None = None) -> JointCommand:
        """kp = 0, kd = damping_kd, tau = 0 on every motor (written into :attr:`command`)."""
        c = self.command
        c.mode[:] = int(MotorMode.FOC)
        c.kp[:] = 0.0
        c.kd[:] = self.cfg.safety.damping_kd
        c.dq[:] = 0.0
        c.tau[:] = 0.0
        if reading is not None:
            c.q[:] = reading.q
        return c

    def fault(self, flag: SafetyFlag, reason: str) -> None:
        """Go to DAMPING now (the command is damping from this call on).

        ``flag`` goes into the frame of this policy tick, or, between ticks, of the next one; the first fault
        also makes that frame be logged (see :mod:`upright.deploy.controller`'s Logging).
        """
        if self._in_tick:
            self.flags |= flag
        else:  # an I/O-cycle check: keep the bit for the next policy tick's frame
            self.io_flags |= flag
        if self.sm.mode != Mode.DAMPING:
            self.sm.handle("fault", reason)
            self._outcome = "damping"
            self._fault_unlogged = True
        self.damping_command()

    def fault_outside_tick(self, flag: SafetyFlag, reason: str, reading: RobotReading | None) -> None:
        """The loop itself failed (an exception, the watchdog): DAMPING, and log the frame of the fault now
        with ``reading`` (the last one; None: no frame), since no policy tick follows."""
        self._in_tick = True
        try:
            if not self._tick_failed:  # raised between policy ticks: the last frame's bits are not this frame's
                self.flags = SafetyFlag.NONE
            self.flags |= self.io_flags
            self.io_flags = SafetyFlag.NONE
            self.fault(flag, reason)
            if reading is not None and self._fault_unlogged:
                self._log(reading)
        finally:
            self._in_tick = False

    def request_stop(self, reason: str) -> None:
        """SIGINT / SIGTERM / quit: damping, then exit after ``stop_damping_s``."""
        self.stop_requested = True
        if self.sm.mode != Mode.DAMPING:
            self.sm.handle("stop", reason)
            self._outcome = "stopped"
            self.damping_ticks = 0
        self.damping_command()

    def _send_targets(self, full: np.ndarray, reading: RobotReading) -> bool:
        """Clamp ``full`` (target bounds, delta from the last position command, torque), make it the command."""
        sc, c = self.cfg.safety, self.command
        clamped = False
        if S.clamp_to_limits(full, self.target_lower, self.target_upper):
            self.flags |= SafetyFlag.TARGET_LIMIT_CLAMPED
            clamped = True
        if (c.kp > 0).any():  # a position command is running: limit the jump from it
            if S.clamp_delta(full, c.q, sc.max_target_delta):
                self.flags |= SafetyFlag.DELTA_CLAMPED
                clamped = True
        if sc.clamp_torque and S.clamp_torque(full, reading.q, reading.dq, self.kp, self.kd, self.torque_limit):
            self.flags |= SafetyFlag.TORQUE_CLAMPED
            clamped = True
        if not S.all_finite(full):  # cannot happen after the checks above; never send it anyway
            self.fault(SafetyFlag.NONFINITE_ACTION, "non-finite target")
            return True
        c.mode[:] = int(MotorMode.FOC)
        c.q[:] = full
        c.kp[:] = self.kp
        c.kd[:] = self.kd
        c.dq[:] = 0.0
        c.tau[:] = 0.0
        self.target[:] = full
        return clamped
