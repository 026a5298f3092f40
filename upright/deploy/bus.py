"""One RS-485 link on pyserial: send a frame, receive a fixed-size frame before a deadline.

pyserial opens and configures the port (raw 8N1, the baud rate, low-latency mode where the driver
supports it, exclusive access). The hot path then uses the port's file descriptor directly:
``Serial.write`` adds a ``select`` per call (~30 µs here), ``os.write`` of a 17-byte frame does not.
Reads poll the port's file descriptor with ``select`` and keep a byte buffer, so a
reply split over several reads, garbage before a header, or a late reply from the previous cycle is
handled: :meth:`MotorBus.receive` scans for the expected header and returns exactly one frame.
"""

from __future__ import annotations

import os
import select
import time

import serial


class MotorBus:
    """A serial link to a chain of devices (motors, the IMU).

    Args:
        port: serial device (``/dev/ttyUSB0``, or a pty's slave path).
        baudrate: bits per second (GO-M8010-6: 4 000 000).
        name: label used in messages.
    """

    def __init__(self, port: str, baudrate: int = 4_000_000, name: str = ""):
        self.port = port
        self.baudrate = baudrate
        self.name = name or port
        self.serial: serial.Serial | None = None
        self._fd = -1
        self._buf = bytearray()

    def open(self) -> None:
        """Open and configure the port.

        Raises:
            serial.SerialException: the port cannot be opened (the message names it).
        """
        self.serial = serial.Serial(self.port, self.baudrate, timeout=0, write_timeout=0.05, exclusive=True)
        try:  # FTDI adapters default to a 16 ms latency timer; ask the driver for low latency
            self.serial.set_low_latency_mode(True)
        except (AttributeError, OSError, ValueError):
            pass  # a pty or a driver without ASYNC_LOW_LATENCY
        self._fd = self.serial.fileno()
        self._buf.clear()

    def close(self) -> None:
        if self.serial is not None:
            self.serial.close()
            self.serial = None
            self._fd = -1

    def send(self, frame: bytes) -> None:
        """Write one frame (waits, at most 50 ms, only if the driver's buffer is full).

        Raises:
            serial.SerialTimeoutException: the frame could not be queued within 50 ms.
        """
        view = memoryview(frame)
        deadline = time.monotonic() + 0.05
        while view:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise serial.SerialTimeoutException(f"{self.name}: write timed out") from None
                select.select((), (self._fd,), (), 0.001)

    def flush_input(self) -> None:
        """Drop every byte received and not yet read (stale replies after a timeout)."""
        self.serial.reset_input_buffer()
        self._buf.clear()

    def _fill(self, timeout_s: float) -> bool:
        r, _, _ = select.select((self._fd,), (), (), max(0.0, timeout_s))
        if not r:
            return False
        data = os.read(self._fd, 4096)
        if not data:
            return False
        self._buf += data
        return True

    def receive(self, size: int, header: bytes, deadline_ns: int) -> bytes | None:
        """The next ``size``-byte frame starting with ``header``, or None at ``deadline_ns`` (monotonic).

        Bytes before a header are discarded. The returned frame's CRC is not checked here.
        """
        buf = self._buf
        while True:
            i = buf.find(header)
            if i < 0:
                if len(buf) > 1:  # keep a possible first header byte at the end
                    del buf[: len(buf) - 1]
            else:
                if i:
                    del buf[:i]
                if len(buf) >= size:
                    frame = bytes(buf[:size])
                    del buf[:size]
                    return frame
            remaining = (deadline_ns - time.monotonic_ns()) / 1e9
            if remaining <= 0 and not self._fill(0.0):
                return None
            if remaining > 0 and not self._fill(remaining) and time.monotonic_ns() >= deadline_ns:
                return None
