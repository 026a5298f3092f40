"""CRC-16/CCITT as the Unitree GO-M8010-6 frames use it.

Reflected polynomial 0x8408 (0x1021 bit-reversed), initial value 0x0000, no final XOR: the variant
catalogued as CRC-16/KERMIT (check value ``crc16_ccitt(b"123456789") == 0x2189``). The two CRC
bytes follow the covered bytes little-endian.
"""

from __future__ import annotations


def _make_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x8408 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


def crc16_ccitt(data: bytes | bytearray | memoryview, crc: int = 0x0000) -> int:
    """CRC-16/CCITT (reflected, poly 0x8408, init ``crc``) of ``data``, as an int in [0, 0xFFFF]."""
    table = _TABLE
    for b in data:
        crc = (crc >> 8) ^ table[(crc ^ b) & 0xFF]
    return crc
