"""A customers or articles table as a :class:`models.store.tables.NodeTable`: ids sorted, features coded.

The table is a file of its own (:func:`read_entities`, all of its rows at once: entity tables are
small next to the transactions) or derived from the transactions table
(:mod:`training.data.derive`); either way :func:`node_table` turns its columns into the arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

from models.progress import progress_bar
from models.store.tables import NodeTable
from training.data.common import DataError, show
from training.data.features import encode_features, feature_reads
from training.data.files import resolve_files
from training.data.ids import ID, check_ids, fixed_width, id_text
from training.data.origins import RowOrigins
from training.data.sources import read_table
from training.data.spec import Feature, NodeSpec


class Origins(Protocol):
    """Where a table's rows came from, for messages (:class:`training.data.origins.RowOrigins`)."""

    label: str

    def where(self, row: int) -> str: ...

    def both(self, first: int, second: int) -> str: ...


def read_entities(data_dir: Path, spec: NodeSpec, note: Callable[[str], object],
                  progress: bool = True) -> NodeTable:
    """Load the entity table of ``spec`` (a file table) from its file or files.

    Args:
        data_dir: the data directory the spec's file names are under.
        spec: the customers or articles table (``spec.file`` set).
        note: receives one line per feature column skipped.
        progress: show a progress bar (read, encode) on stderr when it is a terminal.

    Raises:
        DataError: a missing file or column, no rows, an empty, too long or repeated id, or a
            value that does not parse as its type.
    """
    with progress_bar(total=2, desc=spec.file, unit="step", enabled=progress) as bar:
        table, features, origins = read_file_table(data_dir, spec)
        bar.update()
        nodes = node_table(table, spec, features, origins, note)
        bar.update()
    return nodes


def read_file_table(data_dir: Path, spec: NodeSpec) -> tuple[pa.Table, tuple[Feature, ...], RowOrigins]:
    """The id and feature columns of ``spec``'s file or files, the features, and the rows' origins.

    Raises:
        DataError: a missing file or column, no rows, or a value that does not parse as its type.
    """
    assert spec.file is not None, "a derived table is built by training.data.derive"
    files = resolve_files(data_dir, spec.file, spec.options)
    features = spec.features
    if features is None:
        features = tuple(Feature(c) for c in files[0].columns() if c != spec.id)
    reads = {spec.id: ID} | feature_reads(features)
    parts = [read_table(file, reads) for file in files]
    origins = RowOrigins.of(spec.file, files, [p.num_rows for p in parts])
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if table.num_rows == 0:
        raise DataError(f"{origins.label}: no data rows (only a header)")
    return table, features, origins


def node_table(table: pa.Table, spec: NodeSpec, features: tuple[Feature, ...], origins: Origins,
               note: Callable[[str], object]) -> NodeTable:
    """Ids and features of ``table`` (one row per entity) as a :class:`NodeTable` sorted by id.

    Args:
        table: the id column ``spec.id`` and the feature columns, as :func:`feature_reads` reads them.
        spec: the table's spec (id column, id length bound, name for notes).
        features: the feature columns to encode.
        origins: where each row came from, for messages.
        note: receives one line per feature column skipped.
    """
    raw_ids = id_text(table[spec.id].combine_chunks())
    check_ids(raw_ids, spec.id, spec.max_id_bytes, origins.where)
    ids = fixed_width(raw_ids)
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    check_unique(origins, spec.id, ids, order)
    encoded = encode_features(table, features, spec.table, note, origins.where, spec.time_format)
    return NodeTable(
        ids=ids,
        categorical=np.ascontiguousarray(encoded.categorical[order]),
        numeric=np.ascontiguousarray(encoded.numeric[order]),
        categorical_names=encoded.categorical_names,
        numeric_names=encoded.numeric_names,
        cardinalities=encoded.cardinalities,
    )


def check_unique(origins: Origins, name: str, sorted_ids: np.ndarray, order: np.ndarray) -> None:
    """:class:`DataError` if the sorted ids repeat, naming one repeated id and two of its rows."""
    repeats = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if repeats.size:
        k = int(repeats[0])
        first, second = sorted(int(r) for r in order[k : k + 2])
        distinct = np.unique(sorted_ids[repeats]).size
        raise DataError(
            f"{origins.label}: {distinct} {name} value{'s occur' if distinct > 1 else ' occurs'} more than "
            f"once (first: {show(sorted_ids[k].decode('utf-8', 'replace'))} at {origins.both(first, second)})"
        )
