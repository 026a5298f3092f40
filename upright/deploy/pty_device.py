"""Serve emulated serial devices (GO-M8010-6 motors, the upright IMU) over pseudo-terminal pairs.

One pty pair per bus: the daemon opens the slave side as a serial port (symlinked as
``<link_dir>/<bus name>``), this server owns the master side, parses the command frames, asks a
:class:`DeviceModel` for the replies and writes them back. Frames with a bad CRC are ignored (no
reply), as a real motor does.

:class:`Fault` injects link and device faults by I/O tick (the tick the daemon sends in each IMU
request): dropped, delayed and corrupted replies, a frozen (stale) IMU, motor error flags and
temperatures, and a stalled camera of sim-robot (:mod:`upright.deploy.sim_camera`). Tests and
``upright-deploy sim-robot --fault`` use it.
"""

from __future__ import annotations

import heapq
import os
import pathlib
import select
import time
import tty
from dataclasses import dataclass
from typing import Protocol

from upright.deploy.protocol import go_m8010 as go
from upright.deploy.protocol import imu_frame

FAULT_KINDS = ("drop", "delay", "corrupt", "stale_imu", "error_flag", "temperature", "camera_stall", "pose_stall")


@dataclass(frozen=True)
class Fault:
    """A fault active for I/O ticks in [start_tick, end_tick) (end None: forever).

    kinds: ``drop`` (no reply), ``delay`` (reply after ``value`` seconds), ``corrupt`` (one payload
    byte flipped, so the CRC fails), ``stale_imu`` (the IMU repeats its last sample), ``error_flag``
    (reply error field = ``value``), ``temperature`` (reply temperature = ``value`` °C), ``camera_stall``
    (sim-robot's camera named by ``joint`` publishes no frame; :mod:`upright.deploy.sim_camera`), ``pose_stall``
    (sim-robot's object pose stream, ``--object-pose``, sends nothing; ``joint`` is ignored). ``joint`` None
    applies a motor fault to every motor (a camera fault to every camera).
    """

    kind: str
    joint: str | None = None
    start_tick: int = 0
    end_tick: int | None = None
    value: float = 0.0

    def active(self, tick: int, joint: str | None) -> bool:
        if tick < self.start_tick or (self.end_tick is not None and tick >= self.end_tick):
            return False
        return self.joint is None or joint is None or self.joint == joint

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``kind:joint:start[:end[:value]]``; an empty joint or end means any / forever.

        Raises:
            ValueError: unknown kind or malformed text.
        """
        parts = text.split(":")
        if len(parts) < 3 or parts[0] not in FAULT_KINDS:
            raise ValueError(f"fault '{text}': expected kind:joint:start[:end[:value]], kind in {FAULT_KINDS}")
        end = parts[3] if len(parts) > 3 and parts[3] else None
        value = float(parts[4]) if len(parts) > 4 and parts[4] else 0.0
        return cls(parts[0], parts[1] or None, int(parts[2]), int(end) if end is not None else None, value)


class DeviceModel(Protocol):
    """What answers the frames: the simulated robot, or a test's fake."""

    def motor_reply(self, bus: int, cmd: go.GoCommand) -> go.GoReply | None:
        """Apply ``cmd`` (rotor side) to motor ``cmd.motor_id`` of ``bus`` and return its reply (None: silent)."""

    def imu_sample(self, tick: int) -> imu_frame.ImuSample:
        """Answer an IMU request for I/O tick ``tick`` (a lockstep model advances time here)."""

    def idle(self) -> float | None:
        """Do background work (free-running physics); return the seconds until it is next needed."""


class PtyLink:
    """One pty pair; the slave side is left open (raw) so the daemon can open and reopen it."""

    def __init__(self, name: str, link_dir: pathlib.Path | None):
        self.name = name
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        self.link: pathlib.Path | None = None
        if link_dir is not None:
            link_dir.mkdir(parents=True, exist_ok=True)
            self.link = link_dir / name
            if self.link.is_symlink() or self.link.exists():
                self.link.unlink()
            self.link.symlink_to(self.path)
        self.buf = bytearray()

    @property
    def port(self) -> str:
        return str(self.link) if self.link is not None else self.path

    def close(self) -> None:
        if self.link is not None and self.link.is_symlink():
            self.link.unlink()
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


class PtyDeviceServer:
    """Answers frames on one pty per bus.

    Args:
        bus_names: names of the buses (one pty each).
        joint_names_by_bus: per bus, the joint of each motor id (for faults by joint name).
        model: the device model.
        link_dir: folder for the ``<bus name>`` symlinks (None: no links; use :attr:`ports`).
        faults: faults to inject.
    """

    def __init__(
        self,
        bus_names: list[str],
        joint_names_by_bus: list[dict[int, str]],
        model: DeviceModel,
        link_dir: str | pathlib.Path | None = None,
        faults: list[Fault] | tuple[Fault, ...] = (),
    ):
        self.model = model
        self.joints = joint_names_by_bus
        self.links = [PtyLink(n, pathlib.Path(link_dir) if link_dir else None) for n in bus_names]
        self.faults = list(faults)
        self.tick = 0
        self._last_imu: bytes | None = None
        self._pending: list[tuple[float, int, int, bytes]] = []  # (due, seq, bus, frame)
        self._seq = 0
        self.commands: list[tuple[int, int, go.GoCommand]] = []
        """(tick, bus, command) of every valid command received, when ``record_commands`` is set."""
        self.record_commands = False
        self.bad_frames = 0
        """Command frames ignored because of a bad CRC."""
        self.consumed = [0] * len(self.links)
        """Bytes read from each bus and answered (parsed) so far: the tests' harness compares it with what it sent
        (see :meth:`on_progress`)."""

    @property
    def ports(self) -> dict[str, str]:
        """Bus name -> serial port path for the daemon."""
        return {link.name: link.port for link in self.links}

    def close(self) -> None:
        for link in self.links:
            link.close()

    def on_progress(self, bus: int) -> None:
        """Called by :meth:`serve` each time it has answered the bytes it read from ``bus`` (:attr:`consumed`) or
        written a delayed reply there; nothing by default. A test harness overrides it to wait, in device time, for
        the device's answer (``tests/deploy/deploy_testlib.py``)."""

    def pending_due(self, bus: int) -> list[float]:
        """Monotonic times (s) at which the delayed replies not yet written to ``bus`` are due."""
        return [due for due, _, b, _ in list(self._pending) if b == bus]

    def _faults(self, kind: str, joint: str | None) -> Fault | None:
        for f in self.faults:
            if f.kind == kind and f.active(self.tick, joint):
                return f
        return None

    def _write(self, bus: int, frame: bytes, delay: float = 0.0) -> None:
        if delay > 0:
            self._seq += 1
            heapq.heappush(self._pending, (time.monotonic() + delay, self._seq, bus, frame))
            return
        fd = self.links[bus].master
        view = memoryview(frame)
        while view:
            try:
                n = os.write(fd, view)
                view = view[n:]
            except BlockingIOError:
                select.select((), (fd,), (), 0.01)

    def _on_motor(self, bus: int, frame: bytes) -> None:
        try:
            cmd = go.decode_command(frame)
        except go.FrameError:
            self.bad_frames += 1
            return
        if cmd.motor_id == go.BROADCAST_ID:
            return
        if self.record_commands:
            self.commands.append((self.tick, bus, cmd))
        joint = self.joints[bus].get(cmd.motor_id)
        reply = self.model.motor_reply(bus, cmd)
        if reply is None or self._faults("drop", joint):
            return
        f = self._faults("error_flag", joint)
        if f:
            reply = go.GoReply(**{**reply.__dict__, "error": int(f.value)})
        f = self._faults("temperature", joint)
        if f:
            reply = go.GoReply(**{**reply.__dict__, "temperature": int(f.value)})
        out = go.encode_reply(reply)
        if self._faults("corrupt", joint):
            out = out[:5] + bytes([out[5] ^ 0x5A]) + out[6:]
        f = self._faults("delay", joint)
        self._write(bus, out, f.value if f else 0.0)

    def _on_imu(self, bus: int, frame: bytes) -> None:
        try:
            _, tick = imu_frame.decode_request(frame)
        except go.FrameError:
            self.bad_frames += 1
            return
        self.tick = tick
        sample = self.model.imu_sample(tick)
        out = imu_frame.encode_reply(sample)
        if self._faults("stale_imu", None) and self._last_imu is not None:
            out = self._last_imu
        self._last_imu = out
        if self._faults("drop", "imu"):
            return
        if self._faults("corrupt", "imu"):
            out = out[:20] + bytes([out[20] ^ 0x5A]) + out[21:]
        self._write(bus, out)

    def _parse(self, bus: int) -> None:
        buf = self.links[bus].buf
        while True:
            i_cmd = buf.find(go.CMD_HEADER)
            i_imu = buf.find(imu_frame.REQUEST_HEADER)
            candidates = [
                (i, s, h) for i, s, h in ((i_cmd, go.CMD_SIZE, 0), (i_imu, imu_frame.REQUEST_SIZE, 1)) if i >= 0
            ]
            if not candidates:
                if len(buf) > 1:
                    del buf[: len(buf) - 1]
                return
            i, size, kind = min(candidates)
            if i:
                del buf[:i]
            if len(buf) < size:
                return
            frame = bytes(buf[:size])
            del buf[:size]
            (self._on_imu if kind else self._on_motor)(bus, frame)

    def serve(self, should_stop=lambda: False, max_wait: float = 0.05) -> None:
        """Answer frames until ``should_stop()`` returns True (checked at least every ``max_wait`` s)."""
        fds = {link.master: i for i, link in enumerate(self.links)}
        while not should_stop():
            wait = self.model.idle()
            wait = max_wait if wait is None else min(wait, max_wait)
            if self._pending:
                wait = min(wait, max(0.0, self._pending[0][0] - time.monotonic()))
            ready, _, _ = select.select(list(fds), (), (), max(0.0, wait))
            for fd in ready:
                try:
                    data = os.read(fd, 4096)
                except (BlockingIOError, OSError):
                    continue
                bus = fds[fd]
                self.links[bus].buf += data
                self._parse(bus)
                self.consumed[bus] += len(data)
                self.on_progress(bus)
            now = time.monotonic()
            while self._pending and self._pending[0][0] <= now:
                _, _, bus, frame = heapq.heappop(self._pending)
                self._write(bus, frame)
                self.on_progress(bus)
