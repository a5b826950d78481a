"""The file drop (``--ingest-dir DIR``): bulk files picked up, ingested and moved to ``done/``.

Put a file into ``DIR/customers/``, ``DIR/articles/`` or ``DIR/transactions/`` (write it elsewhere,
or under a name starting with ``.`` or ending in ``.tmp``/``.part``, and rename it in when complete).
Each look (every second) takes the files of customers, then articles, then transactions, each in
order of modification time: ``.csv``, ``.ndjson``/``.jsonl`` or ``.parquet``, in the columns of the
HTTP routes. A file is validated as a whole first (all or nothing, like one request; no row limit),
then appended in batches of ``--ingest-max-rows`` (transactions sorted by day, so the lateness rule
cannot refuse a later batch of a file whose first ones went in). Each batch's idempotency key is
derived from the file's content, so a file whose ingestion was cut short by a crash is completed,
not duplicated, when it is picked up again; the same content dropped twice is ingested once.

A file that went in moves to ``done/``; one that was refused moves to ``failed/`` beside a
``<name>.error.json`` holding the answer a request would have had. A log that cannot be written
leaves the file where it is, for the next look.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from models.store.log.format import LogError
from serve.ingest.bodies import parse_body
from serve.ingest.problems import BatchRejected, Problem
from serve.ingest.writer import Ingestor

log = logging.getLogger("relserve.ingest")

ORDER = ("customers", "articles", "transactions")
TYPES = {".csv": "text/csv", ".ndjson": "application/x-ndjson", ".jsonl": "application/x-ndjson"}
PARQUET = ".parquet"


def _skipped(path: Path) -> bool:
    return path.name.startswith(".") or path.suffix in (".tmp", ".part") or not path.is_file()


def read_rows(path: Path, data: bytes) -> tuple[list[Any], bool]:
    """The rows of a dropped file and whether their values are text (CSV)."""
    if path.suffix.lower() == PARQUET:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(pa.BufferReader(data))
        except (pa.ArrowException, OSError) as e:
            raise BatchRejected([Problem(None, "body", f"not a readable Parquet file ({e})")]) from None
        return [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()}
                for row in table.to_pylist()], False
    parsed = parse_body(data, TYPES[path.suffix.lower()])
    return parsed.rows, parsed.text


class FileDrop:
    """Watches ``directory`` and feeds its files to ``ingestor`` (see the module docstring)."""

    def __init__(self, directory: str | Path, ingestor: Ingestor) -> None:
        self.directory = Path(directory)
        self.ingestor = ingestor
        for kind in ORDER:
            for sub in ("", "done", "failed"):
                (self.directory / kind / sub).mkdir(parents=True, exist_ok=True)

    def pending(self) -> list[tuple[str, Path]]:
        """Files waiting, in the order they are taken."""
        suffixes = (*TYPES, PARQUET)
        return [(kind, path) for kind in ORDER
                for path in sorted((p for p in (self.directory / kind).iterdir()
                                    if not _skipped(p) and p.suffix.lower() in suffixes),
                                   key=lambda p: (p.stat().st_mtime, p.name))]

    def scan(self) -> int:
        """Take every waiting file once; returns how many went in."""
        done = 0
        for kind, path in self.pending():
            try:
                done += self.take(kind, path)
            except LogError as e:
                log.warning("file drop: %s stays for the next look: the log is unavailable (%s)", path, e)
                return done
        return done

    def take(self, kind: str, path: Path) -> bool:
        """Ingest one file and move it to ``done/`` (``True``) or ``failed/`` (``False``)."""
        data = path.read_bytes()
        content = hashlib.sha256(data).hexdigest()[:32]
        try:
            rows, text = read_rows(path, data)
            if kind == "transactions":
                rows.sort(key=lambda row: str(row.get("t_dat", "")) if isinstance(row, dict) else "")
            size = self.ingestor.max_rows
            starts = range(0, max(len(rows), 1), size)
            chunks = [(f"file:{content}:{n}", start) for n, start in enumerate(starts)]
            # Batches already in (a look cut short by a crash) are a prefix; the rest is checked as one.
            todo = [(key, start) for key, start in chunks if not self.ingestor.has_key(key)]
            if todo:
                self._check(kind, rows[todo[0][1]:], text, todo[0][1])
            for key, start in todo:
                self.ingestor.ingest(kind, rows[start:start + size], key=key, text=text,
                                     source=f"file:{path.name}")
        except BatchRejected as e:
            target = self._move(path, "failed")
            target.with_name(target.name + ".error.json").write_text(json.dumps(e.body(), indent=1) + "\n")
            log.warning("file drop: %s refused (%s); moved to %s", path.name, e.detail, target.parent)
            return False
        self._move(path, "done")
        log.info("file drop: %s ingested (%d %s rows)", path.name, len(rows), kind)
        return True

    def _check(self, kind: str, rows: list[Any], text: bool, offset: int) -> None:
        """Validate rows ``offset..`` of a file as one batch; problems name rows of the whole file."""
        try:
            self.ingestor.check(kind, rows, text)
        except BatchRejected as e:
            shifted = [Problem(None if p.row is None else p.row + offset, p.field, p.message, p.reason)
                       for p in e.problems]
            raise BatchRejected(shifted, e.status) from None

    def _move(self, path: Path, where: str) -> Path:
        target = self.directory / path.parent.name / where / path.name
        if target.exists():
            target = target.with_name(f"{path.stem}.{time.strftime('%Y%m%dT%H%M%S')}{path.suffix}")
        os.replace(path, target)
        return target
