"""A partial attribute table: the ids are those the transactions name, the features come from a file
that covers only some of them.

A spec section with ``from = "transactions"``, ``file`` and ``id`` (docs/dataset-spec.md) means
exactly this: real shops know demographics for a share of their customers and have a product file
that misses a few of the codes they sold. Every id of the transactions becomes a node; an id the
file lacks gets empty features (categorical code 0, numeric missing); a file row whose id no
transaction names is dropped. The loader's note counts both.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from models.progress import progress_bar
from models.store.tables import NodeTable
from training.data.ids import check_ids, fixed_width, id_text
from training.data.nodes import check_unique, node_table, read_file_table
from training.data.spec import NodeSpec


class _JoinedRows:
    """Row positions of the joined table, for messages: the id, and the file it came from.

    Args:
        label: the file's name (or the spec's glob).
        ids: the joined table's ids in row order.
    """

    def __init__(self, label: str, ids: pa.Array) -> None:
        self.label = label
        self.ids = ids

    def where(self, row: int) -> str:
        return f"{self.label}: id {self.ids[row].as_py()!r}"

    def both(self, first: int, second: int) -> str:
        return f"ids {self.ids[first].as_py()!r} and {self.ids[second].as_py()!r}"


def partial_entities(data_dir: Path, spec: NodeSpec, ids: pa.Array, note: Callable[[str], object],
                     progress: bool = True) -> NodeTable:
    """The node table of the transactions' ``ids`` with the features of ``spec``'s file.

    Args:
        data_dir: the data directory the spec's file names are under.
        spec: a partial table (``spec.file`` set, ``spec.ids_from_transactions``).
        ids: ``(N,)`` distinct text ids the (filtered) transactions name.
        note: receives the counts of ids without a file row and of file rows dropped, and one line
            per feature column skipped.
        progress: show a progress bar on stderr when it is a terminal.

    Raises:
        DataError: a missing file or column, no rows, an empty, too long or repeated id in the file,
            or a value that does not parse as its type.
    """
    with progress_bar(total=2, desc=spec.file, unit="step", enabled=progress) as bar:
        table, features, origins = read_file_table(data_dir, spec)
        file_ids = id_text(table[spec.id].combine_chunks())
        check_ids(file_ids, spec.id, spec.max_id_bytes, origins.where)
        stored = fixed_width(file_ids)
        order = np.argsort(stored, kind="stable")
        check_unique(origins, spec.id, stored[order], order)
        bar.update()
        row = pc.index_in(ids, value_set=file_ids)  # the file row of each id, null where it has none
        joined = table.drop_columns([spec.id]).take(row).add_column(0, spec.id, ids)
        missing = row.null_count
        dropped = table.num_rows - (len(ids) - missing)
        note(f"{spec.table}: {missing:,} of {len(ids):,} ids have no row in {origins.label}: empty features"
             + (f"; {dropped:,} rows of it name no id of the transactions: dropped" if dropped else ""))
        nodes = node_table(joined, spec, features, _JoinedRows(origins.label, ids), note)
        bar.update()
    return nodes
