"""The local write-ahead log: append-only segment files in ``STATE_DIR/wal/``, fsynced before the ack.

Each record is a header with its length, sequence and CRC-32, then the batch as JSON
(:mod:`models.store.log.wal_records`, :func:`models.store.log.format.encode_batch`). A segment file is
named by the sequence of its first record; a new one starts once the current one passes
``segment_bytes``, and whole segments below a compacted snapshot can be removed (:meth:`prune`).

A reader waits for the next append on a doorbell beside the segments (:meth:`WriteAheadLog.wait`,
:mod:`models.store.log.doorbell`) instead of looking again and again.

Durability policy: :meth:`WriteAheadLog.append` writes the record with one ``write`` and returns only
after ``fdatasync`` (and, for a new segment, an ``fsync`` of the directory), so every acknowledged
batch survives a process crash and a power loss. Writers in several processes (API servers, the
file drop) take an exclusive ``flock`` on ``wal/LOCK`` around append; readers (every worker) take
no lock and read only whole records whose CRC matches, so a record being written is never half-read.

Recovery: a writer holding the lock finds at most one torn record, at the very end (its writer died
between ``write`` and the ack, so it was never acknowledged); it drops it with a warning. A bad record
followed by a good one is corruption, not a torn write: the log refuses to go on (:class:`LogError`)
rather than drop acknowledged batches.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from models.files import fsync_path
from models.store.log.doorbell import Doorbell
from models.store.log.format import READ_LIMIT, LogConflict, LogError, decode_batch, encode_batch, numbered
from models.store.log.wal_records import frame, parse, valid_record_after
from models.store.records import IngestBatch

log = logging.getLogger("relserve.ingest")

SEGMENT_BYTES = 64 << 20
SUFFIX = ".wal"
LOCK_FILE = "LOCK"
DOORBELL = "doorbell"


def segment_name(first: int) -> str:
    return f"{first:020d}{SUFFIX}"


class WriteAheadLog:
    """A :class:`models.store.log.format.Log` in ``directory`` (see the module docstring).

    Args:
        directory: the log's directory (created if missing).
        segment_bytes: size past which the next record starts a new segment.
        sync: fsync before acknowledging (only tests of the format turn it off).
    """

    def __init__(self, directory: str | Path, segment_bytes: int = SEGMENT_BYTES, sync: bool = True) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.sync = sync
        self._lock = threading.Lock()
        self._first: int | None = None  # the cursor: segment (by first sequence), offset in it,
        self._offset = 0                # and the sequence of the last record before the offset
        self._sequence = 0
        self._read_fd: int | None = None
        self._write_fd: int | None = None
        self.doorbell = Doorbell(self.directory / DOORBELL)

    wakes_on_append = True  # :meth:`wait` returns at an append by any process of this machine

    def segments(self) -> list[int]:
        """First sequences of the segment files, ascending."""
        return sorted(int(p.name[:-len(SUFFIX)]) for p in self.directory.glob(f"*{SUFFIX}")
                      if p.name[:-len(SUFFIX)].isdigit())

    def oldest(self) -> int:
        """Sequence of the oldest record still held (1 unless :meth:`prune` removed segments)."""
        return (self.segments() or [1])[0]

    def read(self, after: int, limit: int = READ_LIMIT) -> list[IngestBatch]:
        with self._lock:
            if self._first is None or after < self._sequence:
                oldest = self.oldest()
                if after < oldest - 1:
                    raise LogError(f"{self.directory}: batches up to {oldest - 1} were pruned; "
                                   f"cannot read after {after}")
                self._rewind(after)
            return [decode_batch(payload, sequence)
                    for sequence, payload in self._records(limit_after=(after, limit))]

    def last_sequence(self) -> int:
        with self._lock:
            if self._first is None:
                self._rewind(0)
            for _ in self._records():
                pass
            return self._sequence

    def append(self, batch: IngestBatch, expected: int) -> int:
        with self._lock, self._exclusive():
            if self._first is None:
                self._rewind(0)
            for _ in self._records(recover=True):
                pass
            if self._sequence != expected:
                raise LogConflict(expected, self._sequence)
            sequence = expected + 1
            record = frame(sequence, encode_batch(numbered(batch, sequence)))
            if self._first is None or (self._offset > 0 and self._offset + len(record) > self.segment_bytes):
                self._start_segment(sequence)
            fd = self._writer()
            written = 0
            while written < len(record):
                written += os.write(fd, record[written:])
            if self.sync:
                os.fdatasync(fd)
            self._offset += len(record)
            self._sequence = sequence
        self.doorbell.ring()
        return sequence

    def wait(self, timeout: float) -> None:
        """Block until a batch is appended (rung by :meth:`append`) or ``timeout`` seconds pass."""
        self.doorbell.wait(timeout)

    def recover(self) -> int:
        """Drop a torn last record, if any (with a warning); returns the last sequence."""
        with self._lock, self._exclusive():
            self._rewind(0)
            for _ in self._records(recover=True):
                pass
            return self._sequence

    def prune(self, through: int) -> list[int]:
        """Remove the segments holding only batches up to ``through`` (never the last segment);
        returns their first sequences."""
        with self._lock, self._exclusive():
            firsts = self.segments()
            gone = [first for first, following in itertools.pairwise(firsts) if following <= through + 1]
            for first in gone:
                (self.directory / segment_name(first)).unlink()
            if gone:
                self._sync_directory()
                self._close_fds()
                self._first = None
            return gone

    def close(self) -> None:
        with self._lock:
            self._close_fds()
        self.doorbell.close()

    # The cursor.

    def _rewind(self, after: int) -> None:
        """Put the cursor at the start of the segment holding ``after + 1``."""
        self._close_fds()
        firsts = self.segments()
        holding = [f for f in firsts if f <= after + 1]
        first = holding[-1] if holding else (firsts[0] if firsts else None)
        self._first, self._offset = first, 0
        self._sequence = (first or 1) - 1

    def _records(self, limit_after: tuple[int, int] | None = None,
                 recover: bool = False) -> Iterator[tuple[int, bytes]]:
        """Advance the cursor over whole records, yielding those past ``limit_after``'s sequence
        (at most its limit); ``recover``: the caller holds the write lock, so a bad tail is torn."""
        after, limit = limit_after or (None, 0)
        yielded = 0
        while self._first is not None:
            start = self._offset
            buf = self._pending()
            records, stop, clean = parse(buf)
            for sequence, payload, end in records:
                if sequence != self._sequence + 1:
                    raise LogError(f"{self._path()}: sequence {sequence} where {self._sequence + 1} was due")
                if after is not None and yielded >= limit:
                    return
                self._offset, self._sequence = start + end, sequence
                if after is not None and sequence > after:
                    yielded += 1
                    yield sequence, payload
            if not clean:
                self._bad_tail(buf, stop, recover)
                return
            following = segment_name(self._sequence + 1)
            if following == segment_name(self._first) or not (self.directory / following).exists():
                return
            self._close_fds()
            self._first, self._offset = self._sequence + 1, 0

    def _pending(self) -> bytes:
        """The bytes of the cursor's segment from the cursor to its end."""
        if self._read_fd is None:
            self._read_fd = os.open(self._path(), os.O_RDONLY)
        size = os.fstat(self._read_fd).st_size
        return os.pread(self._read_fd, size - self._offset, self._offset) if size > self._offset else b""

    def _bad_tail(self, buf: bytes, stop: int, recover: bool) -> None:
        if valid_record_after(buf, stop):
            raise LogError(f"{self._path()}: corrupt record at byte {self._offset} followed by valid ones; "
                           "refusing to drop acknowledged batches")
        if not recover:
            return  # still being written, or torn: the next writer drops it
        log.warning("write-ahead log: dropping a torn record at the end of %s (byte %d, %d bytes); "
                    "its batch was never acknowledged", self._path(), self._offset, len(buf) - stop)
        os.truncate(self._path(), self._offset)
        if self.sync:
            fsync_path(self._path())

    # Writing.

    def _path(self) -> Path:
        return self.directory / segment_name(self._first)

    def _start_segment(self, first: int) -> None:
        self._close_fds()
        fd = os.open(self.directory / segment_name(first), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.close(fd)
        self._sync_directory()
        self._first, self._offset = first, 0

    def _writer(self) -> int:
        if self._write_fd is None:
            self._write_fd = os.open(self._path(), os.O_WRONLY | os.O_APPEND)
        return self._write_fd

    def _sync_directory(self) -> None:
        if self.sync:
            fsync_path(self.directory)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _close_fds(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            if fd is not None:
                os.close(fd)
        self._read_fd = self._write_fd = None
