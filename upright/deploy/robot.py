"""The robot as the control loop sees it: send joint-space PD commands, get joint and IMU readings.

:class:`Robot` is the abstract interface (an MIT-style one: ``q*, dq*, kp, kd, tau`` out;
``q, dq, tau, temperature, error`` and the IMU back), so motor families other than GO-M8010-6 plug
in behind it. :class:`SerialRobot` implements it over :class:`~upright.deploy.bus.MotorBus` links
with the GO-M8010-6 frames and upright's IMU frame; the simulated robot
(:mod:`upright.deploy.sim_robot`) answers the same bytes over pseudo-terminals.

Everything here is joint side and in the robot config's joint order; :class:`SerialRobot` converts
to rotor side (gear, direction, zero offset) for the wire.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field

import numpy as np

from upright.deploy.bus import MotorBus
from upright.deploy.protocol import go_m8010 as go
from upright.deploy.protocol import imu_frame
from upright.deploy.robot_config import RobotConfig


@dataclass
class JointCommand:
    """One PD command per joint (joint side). Arrays have one entry per robot joint."""

    mode: np.ndarray
    """int: :class:`~upright.deploy.protocol.go_m8010.MotorMode` per motor."""
    q: np.ndarray
    dq: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    tau: np.ndarray

    @classmethod
    def zeros(cls, n: int) -> JointCommand:
        """FOC with zero gains: zero torque."""
        return cls(np.full(n, int(go.MotorMode.FOC)), *(np.zeros(n) for _ in range(5)))

    def copy_from(self, other: JointCommand) -> None:
        for name in ("mode", "q", "dq", "kp", "kd", "tau"):
            getattr(self, name)[:] = getattr(other, name)


@dataclass
class RobotReading:
    """What one I/O exchange returned. Per-motor values keep their last good value when a reply failed."""

    n: int
    q: np.ndarray = field(init=False)
    dq: np.ndarray = field(init=False)
    tau: np.ndarray = field(init=False)
    temperature: np.ndarray = field(init=False)
    error: np.ndarray = field(init=False)
    ok: np.ndarray = field(init=False)
    """bool per motor: a valid reply arrived in this exchange."""
    crc_error: np.ndarray = field(init=False)
    """bool per motor: a reply with a bad CRC (or header/id) arrived in this exchange."""
    timeout: np.ndarray = field(init=False)
    """bool per motor: no reply before the timeout in this exchange."""
    imu_quat: np.ndarray = field(init=False)
    imu_gyro: np.ndarray = field(init=False)
    imu_acc: np.ndarray = field(init=False)
    imu_seq: int = -1
    imu_time_us: int = -1
    imu_ok: bool = False
    imu_crc_error: bool = False
    imu_timeout: bool = False
    t_ns: int = 0
    """Monotonic time when the exchange finished."""

    def __post_init__(self):
        n = self.n
        self.q, self.dq, self.tau = np.zeros(n), np.zeros(n), np.zeros(n)
        self.temperature, self.error = np.zeros(n), np.zeros(n, np.int64)
        self.ok, self.crc_error, self.timeout = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
        self.imu_quat = np.array([1.0, 0.0, 0.0, 0.0])
        self.imu_gyro, self.imu_acc = np.zeros(3), np.zeros(3)


class Robot(abc.ABC):
    """A robot the daemon can drive."""

    joint_names: tuple[str, ...]

    @abc.abstractmethod
    def connect(self) -> None:
        """Open the links. Sends nothing that moves the robot."""

    @abc.abstractmethod
    def exchange(self, command: JointCommand, tick: int) -> RobotReading:
        """Send ``command`` to every motor, read every motor and the IMU; ``tick`` is the I/O cycle counter."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the links."""


class SerialRobot(Robot):
    """GO-M8010-6 motors and the upright IMU on one or more RS-485 links (:class:`RobotConfig`).

    Within an exchange the buses are interleaved: one command per bus is written, then the replies
    are read, so the exchange takes as long as the busiest bus, not the sum of all buses. A missing
    reply costs ``config.reply_timeout_s``; the next exchange on that bus first drops stale input.
    """

    def __init__(self, config: RobotConfig):
        config.validate()
        self.config = config
        self.joint_names = config.joint_names
        self.buses = [MotorBus(b.port, b.baudrate, b.name) for b in config.buses]
        n = len(self.joint_names)
        self.reading = RobotReading(n)
        gear, direction = config.array("gear"), config.array("direction")
        self._gear_dir = gear * direction
        self._offset = config.array("offset")
        self._gear2 = gear * gear
        self._timeout_ns = int(config.reply_timeout_s * 1e9)
        # (bus index, global motor index, motor id) per round: round r holds the r-th motor of every bus
        start, per_bus = 0, []
        for b in config.buses:
            per_bus.append([(start + k, m.motor_id) for k, m in enumerate(b.motors)])
            start += len(b.motors)
        self._rounds = [
            [(bi, *per_bus[bi][r]) for bi in range(len(per_bus)) if r < len(per_bus[bi])]
            for r in range(max(len(p) for p in per_bus))
        ]
        self._imu_bus = next(i for i, b in enumerate(config.buses) if b.has_imu)
        self._dirty = [False] * len(self.buses)
        self.stale_replies = 0
        self._raw = [(0.0, 0.0, 0.0, 0.0, 0)] * n
        """Replies skipped because they answered an earlier request (arrived after their timeout)."""

    def connect(self) -> None:
        for bus in self.buses:
            bus.open()

    def close(self) -> None:
        for bus in self.buses:
            bus.close()

    def exchange(self, command: JointCommand, tick: int) -> RobotReading:
        rd = self.reading
        rd.ok[:] = False
        rd.crc_error[:] = False
        rd.timeout[:] = False
        for i, bus in enumerate(self.buses):
            if self._dirty[i]:
                bus.flush_input()
                self._dirty[i] = False
        self._exchange_imu(tick)
        gd, off, g2 = self._gear_dir, self._offset, self._gear2
        modes = command.mode.tolist()
        r_q = ((command.q - off) * gd).tolist()
        r_dq = (command.dq * gd).tolist()
        r_tau = (command.tau / gd).tolist()
        r_kp = (command.kp / g2).tolist()
        r_kd = (command.kd / g2).tolist()
        raw = self._raw
        for rnd in self._rounds:
            for bi, j, mid in rnd:
                self.buses[bi].send(
                    go.encode_command_values(mid, modes[j], r_tau[j], r_dq[j], r_q[j], r_kp[j], r_kd[j])
                )
            for bi, j, mid in rnd:
                rep = self._receive_reply(bi, j, mid)
                if rep is not None:
                    raw[j] = (rep.q, rep.dq, rep.tau, rep.temperature, rep.error)
                    rd.ok[j] = True
        ok = rd.ok
        if ok.any():
            raw_arr = np.array(raw)
            rd.q[ok] = raw_arr[ok, 0] / gd[ok] + off[ok]
            rd.dq[ok] = raw_arr[ok, 1] / gd[ok]
            rd.tau[ok] = raw_arr[ok, 2] * gd[ok]
            rd.temperature[ok] = raw_arr[ok, 3]
            rd.error[ok] = raw_arr[ok, 4].astype(np.int64)
        rd.t_ns = time.monotonic_ns()
        return rd

    def _receive_reply(self, bi: int, j: int, mid: int) -> go.GoReply | None:
        """The reply of motor ``mid``; replies of other ids (late ones from a previous round) are skipped."""
        bus, rd = self.buses[bi], self.reading
        deadline = time.monotonic_ns() + self._timeout_ns
        while True:
            frame = bus.receive(go.REPLY_SIZE, go.REPLY_HEADER, deadline)
            if frame is None:
                rd.timeout[j] = True
                self._dirty[bi] = True
                return None
            try:
                rep = go.decode_reply(frame)
            except go.FrameError:
                rd.crc_error[j] = True
                self._dirty[bi] = True
                return None
            if rep.motor_id == mid:
                return rep
            self.stale_replies += 1

    def _exchange_imu(self, tick: int) -> None:
        rd = self.reading
        bus = self.buses[self._imu_bus]
        bus.send(imu_frame.encode_request(tick))
        frame = bus.receive(imu_frame.REPLY_SIZE, imu_frame.REPLY_HEADER, time.monotonic_ns() + self._timeout_ns)
        rd.imu_ok = rd.imu_crc_error = rd.imu_timeout = False
        if frame is None:
            rd.imu_timeout = True
            self._dirty[self._imu_bus] = True
            return
        try:
            s = imu_frame.decode_reply(frame)
        except go.FrameError:
            rd.imu_crc_error = True
            self._dirty[self._imu_bus] = True
            return
        rd.imu_quat[:] = s.quat
        rd.imu_gyro[:] = s.gyro
        rd.imu_acc[:] = s.acc
        rd.imu_seq, rd.imu_time_us, rd.imu_ok = s.seq, s.t_us, True
