"""Request bodies of the ingestion routes: JSON, NDJSON or CSV, into a list of row dicts.

* ``application/json``: ``{"rows": [{...}, ...]}``, optionally with ``"batch_id"`` (an idempotency
  key, like the ``Idempotency-Key`` header);
* ``application/x-ndjson`` (also ``application/jsonl``): one JSON object per line;
* ``text/csv``: a header line with the column names, then one row per line (UTF-8; values are
  text, an empty value is missing).

Anything else is a 415; a body that does not parse is a 422 saying where.

The JSON body's shape, as the OpenAPI description states it, is in :mod:`serve.ingest.body_schema`.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

from serve.ingest.problems import BatchRejected, Problem, show

JSON_TYPES = ("application/json",)
NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines")
CSV_TYPES = ("text/csv", "application/csv")
ACCEPTED = "application/json, application/x-ndjson or text/csv"


@dataclass(frozen=True)
class ParsedBody:
    """The rows of a body; ``text``: values are text (CSV); ``batch_id``: a key given in the body."""

    rows: list[Any]
    text: bool = False
    batch_id: str | None = None


def _refuse(message: str, status: int = 422, field: str | None = "body") -> BatchRejected:
    return BatchRejected([Problem(None, field, message)], status)


def media_type(content_type: str | None) -> str | None:
    return None if content_type is None else content_type.split(";", 1)[0].strip().lower()


def parse_body(body: bytes, content_type: str | None) -> ParsedBody:
    """Raises :class:`serve.ingest.problems.BatchRejected` (415 or 422)."""
    kind = media_type(content_type)
    if kind is None or not (kind in JSON_TYPES or kind.endswith("+json") or kind in NDJSON_TYPES
                            or kind in CSV_TYPES):
        got = "none" if content_type is None else show(content_type)
        raise _refuse(f"Content-Type must be {ACCEPTED}, got {got}", 415)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _refuse(f"not UTF-8: byte {e.start} is {body[e.start]:#04x}") from None
    if kind in CSV_TYPES:
        return ParsedBody(_csv_rows(text), text=True)
    if kind in NDJSON_TYPES:
        lines = [(n, line) for n, line in enumerate(text.splitlines()) if line.strip()]
        return ParsedBody([_json(line, f"line {n + 1}") for n, line in lines])
    document = _json(text, "body")
    if not isinstance(document, dict):
        raise _refuse('must be a JSON object {"rows": [...]}')
    unexpected = sorted(set(document) - {"rows", "batch_id"})
    if unexpected:
        raise _refuse("unexpected field", field=str(unexpected[0]))
    if "rows" not in document:
        raise _refuse("field required", field="rows")
    if not isinstance(document["rows"], list):
        raise _refuse(f"must be a list of objects, got {type(document['rows']).__name__}", field="rows")
    batch_id = document.get("batch_id")
    if batch_id is not None and not isinstance(batch_id, str):
        raise _refuse(f"must be a string, got {type(batch_id).__name__}", field="batch_id")
    return ParsedBody(document["rows"], batch_id=batch_id)


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _refuse(f"{where} is not valid JSON ({e.msg} at character {e.pos})") from None
    except (RecursionError, ValueError) as e:  # nested too deeply, or an integer too long
        raise _refuse(f"{where} is not valid JSON ({type(e).__name__})") from None


def _csv_rows(text: str) -> list[dict[str, str]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header or not any(h.strip() for h in header):
            raise _refuse("CSV has no header line")
        names = [h.strip() for h in header]
        if len(set(names)) != len(names):
            raise _refuse("CSV header names a column twice")
        rows = []
        for values in reader:
            if not values:
                continue
            if len(values) != len(names):
                problem = Problem(len(rows), None, f"{len(values)} values for {len(names)} columns")
                raise BatchRejected([problem])
            rows.append(dict(zip(names, values, strict=True)))
        return rows
    except csv.Error as e:
        raise _refuse(f"not valid CSV ({e})") from None

