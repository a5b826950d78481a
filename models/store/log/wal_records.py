"""The records of the write-ahead log: a 20-byte header (magic ``RWL1``, payload length, sequence,
CRC-32 of length + sequence + payload) and the payload, and how a byte string parses into them.

:func:`parse` takes only whole records whose CRC matches, so a record still being written (or torn
by a crash) is never taken; :func:`valid_record_after` tells a torn tail (nothing valid follows it)
from corruption (valid records follow).
"""

from __future__ import annotations

import struct
import zlib

MAGIC = b"RWL1"
HEADER = struct.Struct("<4sIQI")  # magic, payload length, sequence, crc32
MAX_PAYLOAD = 256 << 20


def _checksum(length: int, sequence: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(struct.pack("<IQ", length, sequence)))


def frame(sequence: int, payload: bytes) -> bytes:
    """One record: header + payload."""
    return HEADER.pack(MAGIC, len(payload), sequence, _checksum(len(payload), sequence, payload)) + payload


def parse(buf: bytes) -> tuple[list[tuple[int, bytes, int]], int, bool]:
    """Whole, valid records at the start of ``buf``: ``([(sequence, payload, end)], stop, clean)``.

    ``stop`` is where parsing stopped; ``clean`` is false when bytes from ``stop`` on are not a
    whole valid record (still being written, torn, or corrupt).
    """
    records, pos = [], 0
    while pos < len(buf):
        if len(buf) - pos < HEADER.size:
            return records, pos, False
        magic, length, sequence, crc = HEADER.unpack_from(buf, pos)
        end = pos + HEADER.size + length
        if magic != MAGIC or length > MAX_PAYLOAD or end > len(buf):
            return records, pos, False
        payload = buf[pos + HEADER.size:end]
        if _checksum(length, sequence, payload) != crc:
            return records, pos, False
        records.append((sequence, payload, end))
        pos = end
    return records, pos, True


def valid_record_after(buf: bytes, start: int) -> bool:
    """Whether a whole valid record begins anywhere after ``start`` (then ``start`` is corruption)."""
    at = buf.find(MAGIC, start + 1)
    while at >= 0:
        if parse(buf[at:])[0]:
            return True
        at = buf.find(MAGIC, at + 1)
    return False
