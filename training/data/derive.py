"""Customers and articles derived from a flat transactions table: one row per id, attributes inline.

A derived table has one row per id that occurs in the (filtered) transaction lines; each feature
column takes the id's most frequent non-empty value among its lines, ties going to the value seen
first. One pass over the lines keeps only per-(id, value) counts and first rows, merged as it
goes, so memory follows the distinct pairs, not the lines. The same pass collects the ids of a
partial attribute table (:mod:`training.data.partial`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from models.store.tables import NodeTable
from training.data.features import feature_reads
from training.data.ids import check_ids
from training.data.lines import transaction_lines
from training.data.nodes import node_table
from training.data.partial import partial_entities
from training.data.spec import DatasetSpec, Feature, NodeSpec

COMPACT_ROWS = 4_000_000  # merge the partial counts once they hold this many (id, value) pairs
_FILE_ROWS = 1 << 40  # (file number, row) -> one int64 order key


@dataclass(frozen=True)
class DerivedRows:
    """Row positions of a derived table, for messages (it has no file lines of its own).

    Args:
        label: ``customers (derived from transactions.csv)``.
        ids: the table's ids in row order.
    """

    label: str
    ids: pa.Array

    def where(self, row: int) -> str:
        return f"{self.label}: id {self.ids[row].as_py()!r}"

    def both(self, first: int, second: int) -> str:
        return f"ids {self.ids[first].as_py()!r} and {self.ids[second].as_py()!r}"


class _Modes:
    """Running (id, value) -> (count, first row) counts of one attribute column."""

    def __init__(self) -> None:
        self.parts: list[pa.Table] = []
        self.rows = 0

    def add(self, ids: pa.ChunkedArray, values: pa.ChunkedArray, order: np.ndarray) -> None:
        table = pa.table({"id": ids, "v": values, "r": order}).filter(pc.is_valid(values))
        self._append(table.group_by(["id", "v"], use_threads=False).aggregate([("r", "min"), ("r", "count")])
                     .rename_columns(["id", "v", "first", "count"]))

    def _append(self, part: pa.Table) -> None:
        self.parts.append(part)
        self.rows += part.num_rows
        if self.rows > COMPACT_ROWS and len(self.parts) > 1:
            self.parts = [self.merged()]
            self.rows = self.parts[0].num_rows

    def merged(self) -> pa.Table:
        table = pa.concat_tables(self.parts)
        if len(self.parts) == 1:
            return table
        merged = table.group_by(["id", "v"], use_threads=False).aggregate(
            [("first", "min"), ("count", "sum")])
        return merged.rename_columns(["id", "v", "first", "count"])

    def best(self, ids: pa.Array) -> pa.Array:
        """Per id of ``ids``, its most frequent value (ties: first seen), null if it has none."""
        table = self.merged() if self.parts else None
        if table is None or table.num_rows == 0:
            return pa.nulls(len(ids), table["v"].type if table is not None else pa.string())
        table = table.sort_by([("id", "ascending"), ("count", "descending"), ("first", "ascending")])
        id_column = table["id"].combine_chunks()
        leader = np.ones(len(id_column), dtype=bool)
        leader[1:] = pc.not_equal(id_column.slice(1), id_column.slice(0, len(id_column) - 1)).to_numpy(
            zero_copy_only=False)
        winners = table.filter(pa.array(leader))
        return winners["v"].take(pc.index_in(ids, value_set=winners["id"].combine_chunks()))


def derive_entities(data_dir: Path, spec: DatasetSpec, note: Callable[[str], object],
                    progress: bool = True) -> dict[str, NodeTable]:
    """The node tables of ``spec`` whose ids are the transactions' (``customers``, ``articles`` or
    both), from one pass: derived ones with their features, partial ones with the features of their
    file (:func:`training.data.partial.partial_entities`).

    Raises:
        DataError: as :func:`training.data.lines.transaction_lines`, and an empty or too long id.
    """
    tx = spec.transactions
    from_lines = [n for n in (spec.customers, spec.articles) if n.ids_from_transactions]
    features = {n.table: (n.features or ()) if n.derived else () for n in from_lines}
    reads = {}
    for columns in features.values():
        reads |= feature_reads(columns)
    ids: dict[str, list[pa.Array]] = {n.table: [] for n in from_lines}
    modes = {(n.table, f.column): _Modes()
             for n in from_lines for f in features[n.table] if f.column in reads}
    file_numbers: dict[Path, int] = {}
    for group in transaction_lines(data_dir, tx, reads, progress, desc=f"{tx.file} (derive tables)"):
        number = file_numbers.setdefault(group.file.path, len(file_numbers))
        order = number * _FILE_ROWS + group.rows
        for node in from_lines:
            column = group.customer if node is spec.customers else group.article
            check_ids(column.combine_chunks(), node.id, node.max_id_bytes,
                      lambda k, g=group: f"{g.file.name}: {g.file.where(int(g.rows[k]))}")
            ids[node.table].append(pc.unique(column))
            for f in features[node.table]:
                if f.column in reads:
                    modes[node.table, f.column].add(column, group.extra[f.column], order)
    return {node.table: _table(node, features[node.table], ids[node.table], modes, note, tx.file)
            if node.derived else partial_entities(data_dir, node, _unique(ids[node.table]), note, progress)
            for node in from_lines}


def _unique(parts: list[pa.Array]) -> pa.Array:
    return pc.unique(pa.chunked_array(parts, pa.string()).combine_chunks())


def _table(node: NodeSpec, features: tuple[Feature, ...], parts: list[pa.Array],
           modes: dict[tuple[str, str], _Modes], note: Callable[[str], object], source: str) -> NodeTable:
    ids = _unique(parts)
    columns = {node.id: ids}
    for f in features:
        if (node.table, f.column) in modes:
            columns[f.column] = modes[node.table, f.column].best(ids)
    table = pa.table(columns)
    return node_table(table, node, features, DerivedRows(f"{node.table} (derived from {source})", ids), note)
