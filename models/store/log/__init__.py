"""The ingestion log, below both ``serve/`` and ``training/``: its record format and codec
(:mod:`.format`), the local write-ahead log (:mod:`.wal`, :mod:`.wal_records`), the Redis Streams
log (:mod:`.redis_log`, through redis-py), and the one way of replaying it into a graph, with one
error policy (:mod:`.replay`).

The server's write side appends to it (``serve/ingest``: HTTP, auth, the file drop); its workers,
``python -m training.compact`` and ``python -m training.fit --data STATE_DIR`` replay it.
"""

from __future__ import annotations

from pathlib import Path

from models.store.log.format import Log

WAL = "wal"  # the log named by ``--ingest-log wal``: the local write-ahead log
WAL_DIR = "wal"  # its directory in the state directory


def open_log(spec: str, state_dir: str | Path) -> Log:
    """A fresh connection to the log (one per process: never share one across a fork).

    Args:
        spec: ``wal`` (``state_dir/wal``) or a ``redis://`` / ``rediss://`` URL (:mod:`.redis_log`).
        state_dir: the server's state directory.
    """
    if spec == WAL:
        from models.store.log.wal import WriteAheadLog

        return WriteAheadLog(Path(state_dir) / WAL_DIR)
    from models.store.log.redis_log import RedisLog

    return RedisLog(spec)
