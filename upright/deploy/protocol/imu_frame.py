"""upright's IMU frame, carried on the same RS-485 link as the motors (bus 0 by default).

The GO-M8010-6 protocol has no IMU message, so upright defines one in the same style (two-byte
header, little-endian fields, CRC-16/CCITT over everything before the CRC). A real robot's IMU
gets its own driver behind :class:`upright.deploy.robot.Robot`; the simulated robot speaks this.

Request (host -> IMU), 9 bytes::

    0-1  FC EE     header
    2    address   (0x0E by default)
    3-6  tick      uint32, the host's I/O cycle counter (a lockstep simulator advances to tick·dt)
    7-8  CRC-16/CCITT of bytes 0-6

Reply (IMU -> host), 57 bytes::

    0-1   FB EE    header
    2     address
    3-6   seq      uint32, +1 per new sample (the host checks it for staleness)
    7-14  t_us     uint64, the IMU's clock, µs
    15-30 quat     4 x float32 (w, x, y, z), body-to-world
    31-42 gyro     3 x float32, rad/s, body frame
    43-54 acc      3 x float32, m/s², body frame
    55-56 CRC-16/CCITT of bytes 0-54
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from upright.deploy.protocol.crc import crc16_ccitt
from upright.deploy.protocol.go_m8010 import check_frame

REQUEST_HEADER = b"\xfc\xee"
REPLY_HEADER = b"\xfb\xee"
REQUEST_SIZE = 9
REPLY_SIZE = 57
DEFAULT_ADDRESS = 0x0E

_REQ = struct.Struct("<2sBI")
_REP = struct.Struct("<2sBIQ10f")
_CRC = struct.Struct("<H")


@dataclass(frozen=True)
class ImuSample:
    """One decoded IMU reply."""

    address: int
    seq: int
    t_us: int
    quat: tuple[float, float, float, float]
    gyro: tuple[float, float, float]
    acc: tuple[float, float, float]


def encode_request(tick: int, address: int = DEFAULT_ADDRESS) -> bytes:
    """Encode a 9-byte IMU request."""
    body = _REQ.pack(REQUEST_HEADER, address & 0xFF, tick & 0xFFFFFFFF)
    return body + _CRC.pack(crc16_ccitt(body))


def decode_request(frame: bytes) -> tuple[int, int]:
    """Decode a request into (address, tick). Raises FrameError / CrcError."""
    check_frame(frame, REQUEST_SIZE, REQUEST_HEADER)
    _, address, tick = _REQ.unpack_from(frame)
    return address, tick


def encode_reply(sample: ImuSample) -> bytes:
    """Encode a 57-byte IMU reply."""
    body = _REP.pack(
        REPLY_HEADER,
        sample.address & 0xFF,
        sample.seq & 0xFFFFFFFF,
        sample.t_us & 0xFFFFFFFFFFFFFFFF,
        *sample.quat,
        *sample.gyro,
        *sample.acc,
    )
    return body + _CRC.pack(crc16_ccitt(body))


def decode_reply(frame: bytes) -> ImuSample:
    """Decode a 57-byte IMU reply. Raises FrameError / CrcError."""
    check_frame(frame, REPLY_SIZE, REPLY_HEADER)
    v = _REP.unpack_from(frame)
    return ImuSample(address=v[1], seq=v[2], t_us=v[3], quat=tuple(v[4:8]), gyro=tuple(v[8:11]), acc=tuple(v[11:14]))
