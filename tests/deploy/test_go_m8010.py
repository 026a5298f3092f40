"""GO-M8010-6 and IMU frames against golden frames worked out by hand (field by field, below)."""

from __future__ import annotations

import math

import pytest

from upright.deploy.protocol import go_m8010 as go
from upright.deploy.protocol import imu_frame
from upright.deploy.protocol.crc import crc16_ccitt


def crc_bitwise(data: bytes) -> int:
    """Reference CRC-16/CCITT (reflected 0x8408, init 0), bit by bit: independent of the table version."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x8408 if crc & 1 else crc >> 1
    return crc


def test_crc_check_value_and_reference():
    assert crc16_ccitt(b"123456789") == 0x2189  # CRC-16/KERMIT check value
    for data in (b"", b"\x00", b"\xfe\xee\x11", bytes(range(256))):
        assert crc16_ccitt(data) == crc_bitwise(data)


# Command 1: id 1, FOC, tau 1 N·m, dq 0, q 1 rad, kp 1, kd 0.5 (rotor side)
#   mode byte  = 1 | 1 << 4                   = 0x11
#   tau        = 1.0 * 256                    = 256   = 0x0100      -> 00 01
#   dq         = 0                                                   -> 00 00
#   q          = 1.0 * 32768 / 2π = 5215.19   -> 5215 = 0x0000145F  -> 5F 14 00 00
#   kp         = 1.0 * 32768 / 25.6           = 1280  = 0x0500      -> 00 05
#   kd         = 0.5 * 1280                   = 640   = 0x0280      -> 80 02
#   CRC-16/CCITT of the 15 bytes = 0xEA6E                            -> 6E EA
GOLDEN_CMD_1 = bytes.fromhex("fe ee 11 00 01 00 00 5f 14 00 00 00 05 80 02 6e ea")

# Command 2: id 14, FOC, tau -2.5, dq -10 rad/s, q -3 rad, kp 0, kd 25.6 (saturates)
#   mode byte  = 14 | 1 << 4 = 0x1E
#   tau        = -2.5 * 256 = -640 = 0xFD80                          -> 80 FD
#   dq         = -10 * 256 / 2π = -407.44 -> -407 = 0xFE69           -> 69 FE
#   q          = -3 * 5215.19 = -15645.57 -> -15646 = 0xFFFFC2E2     -> E2 C2 FF FF
#   kp         = 0                                                   -> 00 00
#   kd         = 25.6 * 1280 = 32768 > 32767 -> 32767 = 0x7FFF       -> FF 7F
#   CRC = 0xCCAC                                                     -> AC CC
GOLDEN_CMD_2 = bytes.fromhex("fe ee 1e 80 fd 69 fe e2 c2 ff ff 00 00 ff 7f ac cc")

# Reply: id 3, FOC, tau 0.5, dq 2π rad/s, q π rad, 40 °C, error 1 (overheat), foot force 100
#   mode 0x13; tau 128 -> 80 00; dq 256 -> 00 01; q 16384 -> 00 40 00 00; temp 40 -> 28
#   flags = 1 | 100 << 3 = 801 = 0x0321 -> 21 03; CRC over 14 bytes = 0xBAF6 -> F6 BA
GOLDEN_REPLY = bytes.fromhex("fd ee 13 80 00 00 01 00 40 00 00 28 21 03 f6 ba")


def test_encode_golden_commands():
    assert go.encode_command(go.GoCommand(1, go.MotorMode.FOC, 1.0, 0.0, 1.0, 1.0, 0.5)) == GOLDEN_CMD_1
    assert go.encode_command_values(14, 1, -2.5, -10.0, -3.0, 0.0, 25.6) == GOLDEN_CMD_2
    assert len(GOLDEN_CMD_1) == go.CMD_SIZE == 17
    assert crc_bitwise(GOLDEN_CMD_1[:15]) == int.from_bytes(GOLDEN_CMD_1[15:], "little")


def test_decode_golden_command():
    cmd = go.decode_command(GOLDEN_CMD_2)
    assert (cmd.motor_id, cmd.mode) == (14, go.MotorMode.FOC)
    assert cmd.tau == -2.5 and cmd.kp == 0.0
    assert cmd.dq == pytest.approx(-407 * 2 * math.pi / 256)
    assert cmd.q == pytest.approx(-15646 * 2 * math.pi / 32768)
    assert cmd.kd == pytest.approx(32767 / 1280)


def test_golden_reply_both_ways():
    rep = go.decode_reply(GOLDEN_REPLY)
    assert (rep.motor_id, rep.mode, rep.temperature, rep.error, rep.foot_force) == (3, 1, 40, 1, 100)
    assert rep.tau == 0.5 and rep.dq == pytest.approx(2 * math.pi) and rep.q == pytest.approx(math.pi)
    assert go.encode_reply(rep) == GOLDEN_REPLY
    assert len(GOLDEN_REPLY) == go.REPLY_SIZE == 16


def test_bad_frames_are_rejected():
    bad_crc = bytearray(GOLDEN_REPLY)
    bad_crc[7] ^= 0x01
    with pytest.raises(go.CrcError):
        go.decode_reply(bytes(bad_crc))
    with pytest.raises(go.FrameError, match="header"):
        go.decode_reply(b"\xfe" + GOLDEN_REPLY[1:])
    with pytest.raises(go.FrameError, match="bytes"):
        go.decode_reply(GOLDEN_REPLY[:-1])
    with pytest.raises(ValueError):
        go.encode_command_values(16, 1, 0, 0, 0, 0, 0)


def test_saturation_never_wraps():
    frame = go.encode_command_values(0, 1, 1e9, -1e9, 1e12, -5.0, 1e3)
    cmd = go.decode_command(frame)
    assert cmd.tau == pytest.approx(32767 / 256) and cmd.dq == pytest.approx(-32768 / go.DQ_SCALE)
    assert cmd.q == pytest.approx((2**31 - 1) / go.Q_SCALE) and cmd.kp == 0.0 and cmd.kd == pytest.approx(32767 / 1280)


def test_imu_frames():
    # request: FC EE, address 0x0E, tick 42 = 2A 00 00 00, CRC 0xAF3F -> 3F AF
    assert imu_frame.encode_request(42) == bytes.fromhex("fc ee 0e 2a 00 00 00 3f af")
    assert imu_frame.decode_request(bytes.fromhex("fc ee 0e 2a 00 00 00 3f af")) == (0x0E, 42)
    s = imu_frame.ImuSample(0x0E, 7, 123456789012, (1.0, 0.0, -0.5, 0.25), (0.1, 0.2, 0.3), (0.0, 0.0, 9.75))
    frame = imu_frame.encode_reply(s)
    assert len(frame) == imu_frame.REPLY_SIZE and frame[:2] == b"\xfb\xee"
    assert frame[3:7] == (7).to_bytes(4, "little") and frame[7:15] == (123456789012).to_bytes(8, "little")
    back = imu_frame.decode_reply(frame)
    assert back.seq == 7 and back.t_us == 123456789012 and back.quat == (1.0, 0.0, -0.5, 0.25)
    assert back.gyro == pytest.approx((0.1, 0.2, 0.3)) and back.acc == pytest.approx((0.0, 0.0, 9.75))
    with pytest.raises(go.CrcError):
        imu_frame.decode_reply(frame[:20] + bytes([frame[20] ^ 1]) + frame[21:])
