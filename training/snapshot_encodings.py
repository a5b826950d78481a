"""``encodings.json`` beside a snapshot: how its node tables encoded raw values, for new nodes.

The live graph (:mod:`models.store.live_nodes`) encodes a customer or article added at serving time
as the loader encoded the base's: a categorical value gets its code (``1..V`` in sorted value order),
a numeric value is standardised with the column's mean and standard deviation. The snapshot's
arrays hold only codes and standardised values, so this file records the vocabularies and the
statistics, read back from the entity files. Best effort: a column whose values cannot be read back
exactly (a table derived from the transactions, a count that differs from the snapshot's cardinality,
a timestamp column) is left out, and its new values encode as missing. A partial attribute file is
read back for the ids the snapshot holds only, as the loader encoded it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from models.files import atomic_write
from models.store.ids import ids_text
from models.store.live_nodes import ENCODINGS_FILE
from models.store.tables import NodeTable, RelTables
from training.data.common import DataError
from training.data.convert import FLOAT64, TEXT, ConversionError
from training.data.files import resolve_files
from training.data.ids import ID, id_text
from training.data.sources import read_table
from training.data.spec import DatasetSpec, NodeSpec


def table_encodings(data_dir: Path, spec: NodeSpec, table: NodeTable) -> dict[str, Any]:
    """``{"id_column", "categorical": {column: values in code order}, "numeric": {column: {mean, std}}}``."""
    out: dict[str, Any] = {"id_column": spec.id, "categorical": {}, "numeric": {}}
    if spec.file is None:
        return out
    numeric = [n for n in table.numeric_names if f"{n}_missing" in table.numeric_names]
    reads = {spec.id: ID} | {c: TEXT for c in table.categorical_names} | {c: TEXT for c in numeric}
    try:
        files = resolve_files(data_dir, spec.file, spec.options)
        columns = pa.concat_tables([read_table(f, reads) for f in files])
    except (DataError, OSError, pa.ArrowException):
        return out
    if spec.partial:  # only the rows of the ids the snapshot holds were encoded
        held = pa.array(ids_text(table.ids), pa.string())
        columns = columns.filter(pc.is_in(id_text(columns[spec.id].combine_chunks()), value_set=held))
    for column, cardinality in zip(table.categorical_names, table.cardinalities, strict=True):
        values = pc.unique(pc.drop_null(columns[column].combine_chunks()))
        values = pc.take(values, pc.sort_indices(values)).to_pylist()
        if len(values) == cardinality:
            out["categorical"][column] = values
    for column in numeric:
        try:
            floats = FLOAT64.convert(columns[column].combine_chunks())
        except (ConversionError, pa.ArrowException):
            continue  # a timestamp column (days) or text: new values encode as missing
        x = floats.to_numpy(zero_copy_only=False).astype(np.float64)
        present = x[np.isfinite(x)]
        if present.size:
            out["numeric"][column] = {"mean": float(present.mean()), "std": float(present.std()) or 1.0}
    return out


def write_encodings(directory: Path, data_dir: Path, spec: DatasetSpec, tables: RelTables) -> None:
    """Write ``directory/encodings.json`` for both node tables (see the module docstring)."""
    document = {"customer": table_encodings(data_dir, spec.customers, tables.customers),
                "article": table_encodings(data_dir, spec.articles, tables.articles)}
    atomic_write(Path(directory) / ENCODINGS_FILE, json.dumps(document, indent=1, sort_keys=True) + "\n")
