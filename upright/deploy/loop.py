"""The real-time loop: absolute-deadline pacing (sleep, then spin), optional SCHED_FIFO and CPU
pinning, gc frozen after setup, a SIGALRM watchdog, and damping on every way out.

Exit paths, each of which ends with damping commands sent to every motor:

- SIGINT / SIGTERM: the controller goes to DAMPING, keeps sending it ``stop_damping_s``, exits 0.
  A second SIGINT raises KeyboardInterrupt at once (still damping in ``finally``).
- An exception anywhere in the loop (including the watchdog's :class:`WatchdogTimeout`): the
  ``finally`` block sends damping for ``stop_damping_s``, then the exception propagates.
- A safety fault: DAMPING, and the loop keeps sending it until stopped (or ``exit_after_damping_s``).
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import time

from upright.dataset_io.records import SafetyFlag
from upright.deploy.controller import Controller
from upright.deploy.robot import Robot


class WatchdogTimeout(RuntimeError):
    """The control loop did not come back within the watchdog period."""


class Pacer:
    """Wakes up at absolute deadlines ``t0 + k·period``: sleeps until ``spin`` before, then spins.

    Args:
        period_s: loop period.
        spin_s: how long before each deadline to stop sleeping and spin (0: sleep only).
    """

    def __init__(self, period_s: float, spin_s: float = 0.0005):
        self.period_ns = int(round(period_s * 1e9))
        self.spin_ns = int(round(spin_s * 1e9))
        self.next_ns = 0
        self.missed = 0
        """Deadlines skipped because the loop was more than a period late."""

    def start(self, now_ns: int | None = None) -> None:
        self.next_ns = (now_ns or time.monotonic_ns()) + self.period_ns

    def wait(self) -> int:
        """Block until the next deadline; return the lateness of the wake-up, ns."""
        deadline = self.next_ns
        remaining = deadline - time.monotonic_ns()
        if remaining > self.spin_ns:
            time.sleep((remaining - self.spin_ns) / 1e9)
        now = time.monotonic_ns()
        while now < deadline:
            now = time.monotonic_ns()
        self.next_ns = deadline + self.period_ns
        if now >= self.next_ns:  # more than a whole period late: skip the missed deadlines
            skipped = (now - self.next_ns) // self.period_ns + 1
            self.missed += skipped
            self.next_ns += skipped * self.period_ns
        return now - deadline


def setup_realtime(priority: int | None = None, cpus: set[int] | None = None, lock_memory: bool = False) -> list[str]:
    """Try SCHED_FIFO at ``priority``, pinning to ``cpus`` and mlockall; return what worked/failed (one line each)."""
    notes = []
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
            notes.append(f"pinned to CPUs {sorted(cpus)}")
        except OSError as err:
            notes.append(f"CPU pinning refused: {err}")
    if priority:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            notes.append(f"SCHED_FIFO priority {priority}")
        except (PermissionError, OSError) as err:
            notes.append(f"SCHED_FIFO refused ({err}); running with normal priority")
    if lock_memory:
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            if libc.mlockall(3) != 0:  # MCL_CURRENT | MCL_FUTURE
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            notes.append("memory locked (mlockall)")
        except OSError as err:
            notes.append(f"mlockall refused: {err}")
    return notes


def send_damping(robot: Robot, controller: Controller, duration_s: float, period_s: float, tick: int) -> int:
    """Send damping to every motor for ``duration_s`` (at least once); return the next tick."""
    cmd = controller.damping_command()
    t_end = time.monotonic() + duration_s
    while True:
        try:
            reading = robot.exchange(cmd, tick)
            cmd = controller.damping_command(reading)
        except Exception as err:  # noqa: BLE001 - keep trying until the time is up
            print(f"upright-deploy: damping exchange failed: {err!r}", file=sys.stderr, flush=True)
        tick += 1
        if time.monotonic() >= t_end:
            return tick
        time.sleep(period_s)


def run_loop(
    controller: Controller,
    robot: Robot,
    spin_s: float = 0.0005,
    max_cycles: int | None = None,
    install_signals: bool = True,
    pace: bool = True,
) -> int:
    """Run until the controller finishes; always leave the motors damping. Returns the exit code.

    Args:
        controller: per-cycle logic (its ``cfg.io_rate_hz`` sets the period).
        robot: a connected robot.
        spin_s: sleep-then-spin margin.
        max_cycles: stop (with damping) after this many cycles (tests).
        install_signals: handle SIGINT/SIGTERM (only possible in the main thread).
        pace: False runs cycles back to back (tests that count cycles, not time).
    """
    period = 1.0 / controller.cfg.io_rate_hz
    pacer = Pacer(period, spin_s)
    sc = controller.cfg.safety
    old_handlers = {}
    interrupts = {"n": 0}

    def on_stop(signum, frame):
        interrupts["n"] += 1
        if signum == signal.SIGINT and interrupts["n"] > 1:
            raise KeyboardInterrupt
        controller.request_stop(signal.Signals(signum).name)

    def on_alarm(signum, frame):
        raise WatchdogTimeout(f"control loop stalled for more than {sc.watchdog_s} s")

    if install_signals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            old_handlers[sig] = signal.signal(sig, on_stop)
        if sc.watchdog_s:
            old_handlers[signal.SIGALRM] = signal.signal(signal.SIGALRM, on_alarm)
    watchdog = install_signals and bool(sc.watchdog_s)
    tick = 0
    reading = None
    gc.collect()
    gc.freeze()
    gc.disable()
    now = time.monotonic_ns()
    controller.start(now)
    pacer.start(now)
    try:
        while not controller.finished:
            lateness = pacer.wait() if pace else 0
            if watchdog:
                signal.setitimer(signal.ITIMER_REAL, sc.watchdog_s)
            reading = robot.exchange(controller.command, tick)
            controller.on_cycle(reading, tick, lateness)
            tick += 1
            if max_cycles is not None and tick >= max_cycles and not controller.stop_requested:
                controller.request_stop("max_cycles")  # then damping for stop_damping_s, as for SIGTERM
        return controller.exit_code
    except BaseException as err:
        reason = f"exception: {err!r}"
        flag = SafetyFlag.WATCHDOG if isinstance(err, WatchdogTimeout) else SafetyFlag.EXCEPTION
        try:  # damping (logged), and the frame of the fault in the dataset
            controller.fault_outside_tick(flag, reason, reading)
        except Exception as log_err:  # noqa: BLE001 - damping must still be sent
            controller.sm.handle("fault", reason)
            print(f"upright-deploy: could not log the fault: {log_err!r}", file=sys.stderr, flush=True)
        raise
    finally:
        if watchdog:
            signal.setitimer(signal.ITIMER_REAL, 0)
        send_damping(robot, controller, controller.cfg.stop_damping_s, period, tick + 1)
        gc.enable()
        gc.unfreeze()
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
