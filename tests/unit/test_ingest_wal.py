"""The local write-ahead log: numbering, compare-and-append, torn-record recovery, corruption, segments,
and writers in several processes."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest

from models.store.log.format import LogConflict, LogError
from models.store.log.wal import WriteAheadLog, segment_name
from models.store.log.wal_records import HEADER, frame, parse
from models.store.records import IngestBatch


def batch(i: int, key: str | None = None) -> IngestBatch:
    return IngestBatch(0, "transactions", {"day": [18500 + i], "customer_id": [f"c{i}"], "article_id": ["a"],
                                           "price": [0.01 * i], "sales_channel_id": [1]}, key=key,
                       received_at=1000.0 + i)


def fill(log: WriteAheadLog, n: int) -> None:
    for i in range(n):
        assert log.append(batch(i, key=f"k{i}"), i) == i + 1


def test_append_numbers_batches_and_a_fresh_reader_gets_them_back(tmp_path: Path) -> None:
    fill(WriteAheadLog(tmp_path), 5)
    reader = WriteAheadLog(tmp_path)
    batches = reader.read(0)
    assert [b.sequence for b in batches] == [1, 2, 3, 4, 5]
    assert batches[2].rows == batch(2).rows and batches[2].key == "k2" and batches[2].received_at == 1002.0
    assert [b.sequence for b in reader.read(3)] == [4, 5]
    assert [b.sequence for b in reader.read(0, limit=2)] == [1, 2]
    assert reader.read(5) == [] and reader.last_sequence() == 5


def test_append_refuses_a_batch_validated_against_an_older_sequence(tmp_path: Path) -> None:
    first, second = WriteAheadLog(tmp_path), WriteAheadLog(tmp_path)
    fill(first, 2)
    with pytest.raises(LogConflict) as conflict:
        second.append(batch(9), 1)
    assert (conflict.value.expected, conflict.value.actual) == (1, 2)
    assert second.append(batch(9), 2) == 3


@pytest.mark.parametrize("cut", ["header", "payload", "last byte"])
def test_a_torn_last_record_is_dropped_with_a_warning(tmp_path: Path, cut: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    fill(WriteAheadLog(tmp_path), 3)
    path = tmp_path / segment_name(1)
    size = path.stat().st_size
    end_of_second = _record_ends(path)[1]
    keep = {"header": end_of_second + HEADER.size // 2, "payload": end_of_second + HEADER.size + 5,
            "last byte": size - 1}[cut]
    assert end_of_second < keep < size
    os.truncate(path, keep)

    reader = WriteAheadLog(tmp_path)
    assert [b.sequence for b in reader.read(0)] == [1, 2]  # a reader stops at the torn record
    with caplog.at_level(logging.WARNING, logger="relserve.ingest"):
        assert WriteAheadLog(tmp_path).recover() == 2
    assert "dropping a torn record" in caplog.text and "never acknowledged" in caplog.text
    assert path.stat().st_size == end_of_second
    assert WriteAheadLog(tmp_path).append(batch(7), 2) == 3
    assert [b.rows["customer_id"] for b in reader.read(0)] == [["c0"], ["c1"], ["c7"]]


def test_a_writer_recovers_a_torn_tail_left_by_a_dead_writer_before_appending(tmp_path: Path) -> None:
    fill(WriteAheadLog(tmp_path), 2)
    with open(tmp_path / segment_name(1), "ab") as f:
        f.write(frame(3, b'{"half": 1}')[:25])
    assert WriteAheadLog(tmp_path).append(batch(3), 2) == 3
    assert [b.sequence for b in WriteAheadLog(tmp_path).read(0)] == [1, 2, 3]


def test_corruption_before_valid_records_is_refused_not_dropped(tmp_path: Path) -> None:
    fill(WriteAheadLog(tmp_path), 3)
    path = tmp_path / segment_name(1)
    data = bytearray(path.read_bytes())
    data[HEADER.size + 3] ^= 0xFF  # inside the first record's payload
    path.write_bytes(bytes(data))
    with pytest.raises(LogError, match="corrupt record"):
        WriteAheadLog(tmp_path).read(0)
    with pytest.raises(LogError, match="refusing to drop acknowledged batches"):
        WriteAheadLog(tmp_path).recover()
    assert path.stat().st_size == len(data)


def test_a_reader_never_takes_a_record_that_is_still_being_written(tmp_path: Path) -> None:
    fill(WriteAheadLog(tmp_path), 1)
    reader = WriteAheadLog(tmp_path)
    assert len(reader.read(0)) == 1
    record = frame(2, b'{"sequence":2,"kind":"customers","rows":{"customer_id":["n"]}}')
    with open(tmp_path / segment_name(1), "ab") as f:
        f.write(record[:len(record) // 2])
        f.flush()
        assert reader.read(1) == []
        f.write(record[len(record) // 2:])
    assert [b.rows for b in reader.read(1)] == [{"customer_id": ["n"]}]


def test_segments_rotate_and_pruned_batches_cannot_be_read(tmp_path: Path) -> None:
    log = WriteAheadLog(tmp_path, segment_bytes=400)
    fill(log, 12)
    firsts = log.segments()
    assert len(firsts) > 2 and firsts[0] == 1
    reader = WriteAheadLog(tmp_path)
    assert [b.sequence for b in reader.read(0, limit=100)] == list(range(1, 13))
    through = firsts[2] - 1
    assert log.prune(through) == firsts[:2]
    assert log.oldest() == firsts[2]
    with pytest.raises(LogError, match="pruned"):
        WriteAheadLog(tmp_path).read(0)
    assert WriteAheadLog(tmp_path).read(through)[0].sequence == through + 1
    assert log.append(batch(99), 12) == 13


def _writer(directory: str, name: str, count: int) -> None:
    log = WriteAheadLog(directory)
    for i in range(count):
        while True:
            try:
                log.append(IngestBatch(0, "customers", {"customer_id": [f"{name}-{i}"]}), log.last_sequence())
                break
            except LogConflict:
                continue


def test_writers_in_several_processes_never_lose_or_repeat_a_batch(tmp_path: Path) -> None:
    context = mp.get_context("fork")
    writers = [context.Process(target=_writer, args=(str(tmp_path), name, 25)) for name in "ab"]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    batches = WriteAheadLog(tmp_path).read(0, limit=1000)
    assert [b.sequence for b in batches] == list(range(1, 51))
    ids = [b.rows["customer_id"][0] for b in batches]
    assert sorted(ids) == sorted(f"{n}-{i}" for n in "ab" for i in range(25))
    assert [i for i in ids if i.startswith("a")] == [f"a-{i}" for i in range(25)]  # each writer's order kept


def _record_ends(path: Path) -> list[int]:
    return [end for _, _, end in parse(path.read_bytes())[0]]


def _append_later(directory: str, delay_s: float) -> None:
    time.sleep(delay_s)
    WriteAheadLog(directory).append(batch(1), 1)


def test_a_reader_waits_for_the_next_append_of_any_process(tmp_path: Path) -> None:
    """``wait`` returns at an append by another process (its doorbell), else after its timeout; a
    ring with no one waiting is lost harmlessly (the reader reads the log when it wakes anyway)."""
    reader = WriteAheadLog(tmp_path)
    WriteAheadLog(tmp_path).append(batch(9), 0)  # no waiter yet: nothing blocks, nothing fails
    started = time.monotonic()
    reader.wait(0.2)
    assert time.monotonic() - started >= 0.15  # nothing appended since the bell was first waited on
    writer = mp.get_context("fork").Process(target=_append_later, args=(str(tmp_path), 0.3))
    writer.start()
    started = time.monotonic()
    reader.wait(30)
    woke = time.monotonic() - started
    writer.join(30)
    assert writer.exitcode == 0 and woke < 10  # the append woke it, not the 30 s timeout
    assert [b.sequence for b in reader.read(0)] == [1, 2]
    reader.close()
