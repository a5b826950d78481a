"""Checking an :class:`models.store.records.IngestBatch` against the live graph and adding its rows.

All or nothing: every row of a batch is checked before any is added, and a bad row raises
:class:`BatchError` naming the batch, the row and the field.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.schema import ARTICLE, CUSTOMER, MAX_ID_BYTES
from models.store.ids import id_bytes
from models.store.live_nodes import NewNodes, NodeEncoder
from models.store.records import IngestBatch

TRANSACTION_COLUMNS = ("day", "customer_id", "article_id", "price")


class BatchError(ValueError):
    """A batch the live graph cannot apply; the message names the batch, row and field."""


@dataclass
class Pending:
    """Everything applied since the base: new nodes per type and the new transactions, in log order
    (chunks of ``(customer, article, day, price)`` arrays)."""

    nodes: dict[str, NewNodes]
    encoders: dict[str, NodeEncoder]
    customer: list[np.ndarray]
    article: list[np.ndarray]
    day: list[np.ndarray]
    price: list[np.ndarray]

    @classmethod
    def empty(cls, nodes: dict[str, NewNodes], encoders: dict[str, NodeEncoder]) -> Pending:
        return cls(nodes, encoders, [], [], [], [])

    def copy(self) -> Pending:
        """A copy to add to while the original stays what the current version was built from."""
        nodes = {t: dataclasses.replace(n, ids=list(n.ids), index=dict(n.index),
                                        categorical=list(n.categorical), numeric=list(n.numeric))
                 for t, n in self.nodes.items()}
        return Pending(nodes, self.encoders, list(self.customer), list(self.article), list(self.day),
                       list(self.price))

    def transactions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The new transactions as ``(customer, article, day, price)`` arrays."""
        if not self.day:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty, np.zeros(0, np.float32)
        return (np.concatenate(self.customer), np.concatenate(self.article), np.concatenate(self.day),
                np.concatenate(self.price))

    def __len__(self) -> int:
        return sum(len(d) for d in self.day)


def parse_batch(batch: IngestBatch, pending: Pending, id_columns: dict[str, str]) -> None:
    """Check every row of ``batch`` against ``pending``, then add them all to it.

    Raises:
        BatchError: a missing column, or a row with an unknown id or a bad value; ``pending`` is unchanged.
    """
    if batch.kind == "transactions":
        _transactions(batch, pending)
    else:
        _nodes(batch, CUSTOMER if batch.kind == "customers" else ARTICLE, pending, id_columns)


def _is_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _fail(batch: IngestBatch, row: int | None, message: str) -> BatchError:
    where = f"batch {batch.sequence}" + (f" row {row}" if row is not None else "")
    return BatchError(f"{where}: {message}")


def _transactions(batch: IngestBatch, pending: Pending) -> None:
    for column in TRANSACTION_COLUMNS:
        if column not in batch.rows:
            needed = ", ".join(TRANSACTION_COLUMNS)
            raise _fail(batch, None, f"no column {column!r} (transactions need {needed})")
    rows = batch.rows
    for i, (day, price) in enumerate(zip(rows["day"], rows["price"], strict=True)):
        if isinstance(day, bool) or not isinstance(day, (int, np.integer)):
            raise _fail(batch, i, f"day {day!r} is not a day number (int days since 1970-01-01)")
        number = isinstance(price, (int, float, np.number)) and not isinstance(price, bool)
        if not number or not math.isfinite(price):
            raise _fail(batch, i, f"price {price!r} is not a finite number")
    found = {}
    for node_type, column in ((CUSTOMER, "customer_id"), (ARTICLE, "article_id")):
        ids = rows[column]
        bad = next((i for i, v in enumerate(ids) if not _is_id(v)), None)
        if bad is not None:
            raise _fail(batch, bad, f"{column} {ids[bad]!r} is not an id (a string or an integer)")
        found[node_type] = pending.nodes[node_type].lookup(list(ids))
        missing = np.flatnonzero(found[node_type] < 0)
        if missing.size:
            i = int(missing[0])
            raise _fail(batch, i, f"{column} {ids[i]!r} is not a known {node_type} (add it first)")
    pending.customer.append(found[CUSTOMER].astype(np.int64))
    pending.article.append(found[ARTICLE].astype(np.int64))
    pending.day.append(np.asarray(rows["day"], dtype=np.int64))
    pending.price.append(np.asarray(rows["price"], dtype=np.float64).astype(np.float32))


def _nodes(batch: IngestBatch, node_type: str, pending: Pending, id_columns: dict[str, str]) -> None:
    column = id_columns[node_type]
    if column not in batch.rows:
        raise _fail(batch, None, f"no id column {column!r}")
    nodes, encoder = pending.nodes[node_type], pending.encoders[node_type]
    added: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
    for i, value in enumerate(batch.rows[column]):
        if not _is_id(value) or value == "":
            raise _fail(batch, i, f"{column} {value!r} is not an id (a non-empty string or an integer)")
        raw = id_bytes(value)
        if len(raw) > MAX_ID_BYTES:
            raise _fail(batch, i, f"{column} is longer than {MAX_ID_BYTES} bytes")
        if raw in added or nodes.lookup([raw])[0] >= 0:
            continue  # a node that exists keeps its row (documented: a repeated add is a no-op)
        row: dict[str, Any] = {c: values[i] for c, values in batch.rows.items()}
        added[raw] = encoder.encode(row)
    for raw, (codes, numeric) in added.items():
        nodes.add(raw, codes, numeric)
