"""Unitree GO-M8010-6 RS-485 frames: the 17-byte command and the 16-byte reply.

All multi-byte fields are little-endian. Values on the wire are **rotor side** (the motor's gear
ratio is :data:`GEAR_RATIO`); :mod:`upright.deploy.bus` converts to and from joint side.

Command (host -> motor), 17 bytes::

    0-1   FE EE                 header
    2     mode byte             bits 0-3 motor id (15 = broadcast, no reply), bits 4-6 mode, bit 7 reserved
    3-4   tau   int16           feed-forward torque, N·m x 256
    5-6   dq    int16           velocity target, rad/s x 256/(2π)
    7-10  q     int32           position target, rad x 32768/(2π)
    11-12 kp    uint16          position stiffness x 32768/25.6 (0 .. 25.6)
    13-14 kd    uint16          velocity damping  x 32768/25.6 (0 .. 25.6)
    15-16 CRC-16/CCITT of bytes 0-14

Reply (motor -> host), 16 bytes::

    0-1   FD EE                 header
    2     mode byte             as in the command
    3-4   tau   int16           measured torque, N·m x 256
    5-6   dq    int16           measured velocity, rad/s x 256/(2π)
    7-10  q     int32           measured position, rad x 32768/(2π)
    11    temp  int8            winding temperature, °C
    12-13 uint16                bits 0-2 error (1 overheat, 2 overcurrent, 3 overvoltage, 4 encoder),
                                bits 3-14 foot force (raw 12 bit), bit 15 reserved
    14-15 CRC-16/CCITT of bytes 0-13

The motor runs τ = tau + kp·(q* − q) + kd·(dq* − dq) on the rotor side. Scalings follow the header
comments of Unitree's SDK (github.com/unitreerobotics/unitree_actuator_sdk, ``motor_msg_GO-M8010-6.h``)
and community reimplementations of it; they still need checking on a real motor. Encoding rounds to
nearest (ties away from zero) and saturates at the field range, so an out-of-range value can never
wrap around.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from enum import IntEnum

from upright.deploy.protocol.crc import crc16_ccitt

CMD_HEADER = b"\xfe\xee"
REPLY_HEADER = b"\xfd\xee"
CMD_SIZE = 17
REPLY_SIZE = 16
BROADCAST_ID = 15
GEAR_RATIO = 6.33
"""GO-M8010-6 reduction (rotor turns per output turn)."""

TAU_SCALE = 256.0
DQ_SCALE = 256.0 / (2.0 * math.pi)
Q_SCALE = 32768.0 / (2.0 * math.pi)
K_SCALE = 32768.0 / 25.6
"""kp and kd: 1280 counts per unit (range 0 .. 25.6 rotor side)."""

_CMD = struct.Struct("<2sBhhiHH")
_REPLY = struct.Struct("<2sBhhibH")
_CRC = struct.Struct("<H")

ERROR_NAMES = {0: "ok", 1: "overheat", 2: "overcurrent", 3: "overvoltage", 4: "encoder"}
"""Reply error codes (3 bits)."""


class MotorMode(IntEnum):
    """Mode field (3 bits) of the mode byte."""

    BRAKE = 0
    """Motor off (no PD); upright never uses it while running: damping is FOC with kp = 0, kd > 0."""
    FOC = 1
    """Closed-loop FOC: the PD law above."""
    CALIBRATE = 2
    """Encoder calibration (never sent by upright)."""


class FrameError(ValueError):
    """A frame is malformed: wrong length, wrong header or bad CRC."""


class CrcError(FrameError):
    """The CRC of a frame does not match its bytes."""


@dataclass(frozen=True)
class GoCommand:
    """One command, rotor side, in physical units."""

    motor_id: int
    mode: int
    tau: float
    dq: float
    q: float
    kp: float
    kd: float


@dataclass(frozen=True)
class GoReply:
    """One reply, rotor side, in physical units."""

    motor_id: int
    mode: int
    tau: float
    dq: float
    q: float
    temperature: int
    error: int
    foot_force: int


def _quant(x: float, scale: float, lo: int, hi: int) -> int:
    """Round ``x * scale`` to nearest (ties away from zero), saturated to [lo, hi]. NaN maps to 0."""
    v = x * scale
    if v != v:  # NaN: never reaches a motor through the safety layer; encode as 0 if it ever does
        return 0
    if v >= hi:
        return hi
    if v <= lo:
        return lo
    return int(math.floor(v + 0.5)) if v >= 0 else -int(math.floor(-v + 0.5))


def mode_byte(motor_id: int, mode: int) -> int:
    """Pack id (0..15) and mode (0..7) into the mode byte."""
    if not 0 <= motor_id <= 15:
        raise ValueError(f"motor id must be 0..15, got {motor_id}")
    if not 0 <= mode <= 7:
        raise ValueError(f"mode must be 0..7, got {mode}")
    return (motor_id & 0x0F) | ((mode & 0x07) << 4)


def encode_command_values(motor_id: int, mode: int, tau: float, dq: float, q: float, kp: float, kd: float) -> bytes:
    """Encode one command frame (17 bytes) from rotor-side values (the fast path of :func:`encode_command`)."""
    body = _CMD.pack(
        CMD_HEADER,
        mode_byte(motor_id, mode),
        _quant(tau, TAU_SCALE, -32768, 32767),
        _quant(dq, DQ_SCALE, -32768, 32767),
        _quant(q, Q_SCALE, -(2**31), 2**31 - 1),
        _quant(kp, K_SCALE, 0, 32767),
        _quant(kd, K_SCALE, 0, 32767),
    )
    return body + _CRC.pack(crc16_ccitt(body))


def encode_command(cmd: GoCommand) -> bytes:
    """Encode ``cmd`` into a 17-byte frame."""
    return encode_command_values(cmd.motor_id, cmd.mode, cmd.tau, cmd.dq, cmd.q, cmd.kp, cmd.kd)


def check_frame(frame: bytes, size: int, header: bytes) -> None:
    """Check a frame's length, header and trailing CRC-16/CCITT (little-endian).

    Raises:
        FrameError: wrong length or header; CrcError: bad CRC.
    """
    if len(frame) != size:
        raise FrameError(f"frame is {len(frame)} bytes, expected {size}")
    if frame[:2] != header:
        raise FrameError(f"bad header {frame[:2].hex(' ')}, expected {header.hex(' ')}")
    crc = _CRC.unpack_from(frame, size - 2)[0]
    calc = crc16_ccitt(frame[: size - 2])
    if crc != calc:
        raise CrcError(f"CRC {crc:#06x} != computed {calc:#06x}")


def decode_command(frame: bytes) -> GoCommand:
    """Decode a 17-byte command frame (the motor's side; used by the simulated robot).

    Raises:
        FrameError: wrong length or header; CrcError: bad CRC.
    """
    check_frame(frame, CMD_SIZE, CMD_HEADER)
    _, mb, tau, dq, q, kp, kd = _CMD.unpack_from(frame)
    return GoCommand(
        motor_id=mb & 0x0F,
        mode=(mb >> 4) & 0x07,
        tau=tau / TAU_SCALE,
        dq=dq / DQ_SCALE,
        q=q / Q_SCALE,
        kp=kp / K_SCALE,
        kd=kd / K_SCALE,
    )


def encode_reply(reply: GoReply) -> bytes:
    """Encode a 16-byte reply frame (the motor's side; used by the simulated robot)."""
    return encode_reply_values(
        reply.motor_id, reply.mode, reply.tau, reply.dq, reply.q, reply.temperature, reply.error, reply.foot_force
    )


def encode_reply_values(
    motor_id: int, mode: int, tau: float, dq: float, q: float, temperature: int, error: int, foot_force: int = 0
) -> bytes:
    """Encode a reply frame from rotor-side values (fast path of :func:`encode_reply`)."""
    temp = max(-128, min(127, int(temperature)))
    flags = (int(error) & 0x07) | ((int(foot_force) & 0x0FFF) << 3)
    body = _REPLY.pack(
        REPLY_HEADER,
        mode_byte(motor_id, mode),
        _quant(tau, TAU_SCALE, -32768, 32767),
        _quant(dq, DQ_SCALE, -32768, 32767),
        _quant(q, Q_SCALE, -(2**31), 2**31 - 1),
        temp,
        flags,
    )
    return body + _CRC.pack(crc16_ccitt(body))


def decode_reply(frame: bytes) -> GoReply:
    """Decode a 16-byte reply frame.

    Raises:
        FrameError: wrong length or header; CrcError: bad CRC.
    """
    check_frame(frame, REPLY_SIZE, REPLY_HEADER)
    _, mb, tau, dq, q, temp, flags = _REPLY.unpack_from(frame)
    return GoReply(
        motor_id=mb & 0x0F,
        mode=(mb >> 4) & 0x07,
        tau=tau / TAU_SCALE,
        dq=dq / DQ_SCALE,
        q=q / Q_SCALE,
        temperature=temp,
        error=flags & 0x07,
        foot_force=(flags >> 3) & 0x0FFF,
    )
