"""Read an entity file (customers.csv, articles.csv) into a :class:`models.store.tables.NodeTable`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from models.progress import progress_bar
from models.schema import (
    ARTICLE_CATEGORICAL,
    ARTICLE_ID_LEN,
    ARTICLE_NUMERIC,
    ARTICLES_CSV,
    CUSTOMER_CATEGORICAL,
    CUSTOMER_ID_LEN,
    CUSTOMER_NUMERIC,
    CUSTOMERS_CSV,
)
from models.store.tables import NodeTable
from training.data.common import (
    DataError,
    check_columns,
    convert_options,
    data_file,
    line_number,
    read_header,
    read_options,
    require_present,
    show,
)
from training.data.locate import located_errors


@dataclass(frozen=True)
class NodeFileSpec:
    """Which columns of an entity file are read, and how.

    Args:
        file_name: the CSV file inside the data directory.
        id_column: the primary key; read as text, stored as ``S<id_width>`` bytes.
        id_width: the largest id length in bytes.
        categorical: columns encoded as codes ``1..V`` (``0`` = empty).
        numeric: columns standardised, each with a ``<name>_missing`` 0/1 column beside it.
    """

    file_name: str
    id_column: str
    id_width: int
    categorical: tuple[str, ...]
    numeric: tuple[str, ...]


CUSTOMERS = NodeFileSpec(
    CUSTOMERS_CSV, "customer_id", CUSTOMER_ID_LEN, CUSTOMER_CATEGORICAL, CUSTOMER_NUMERIC
)
ARTICLES = NodeFileSpec(ARTICLES_CSV, "article_id", ARTICLE_ID_LEN, ARTICLE_CATEGORICAL, ARTICLE_NUMERIC)


def read_node_table(data_dir: Path, spec: NodeFileSpec, progress: bool = True) -> NodeTable:
    """Load one entity file: ids sorted bytewise, every feature row permuted to match.

    Args:
        data_dir: directory holding ``spec.file_name``.
        spec: :data:`CUSTOMERS` or :data:`ARTICLES`.
        progress: show a tqdm bar (read, index, encode) on stderr when it is a terminal.

    Raises:
        DataError: missing file or column, no rows, an empty, too long or repeated id,
            or an unparseable numeric value.
    """
    path = data_file(data_dir, spec.file_name)
    header = read_header(path)
    types = {spec.id_column: pa.string()}
    types |= {c: pa.string() for c in spec.categorical} | {c: pa.float64() for c in spec.numeric}
    check_columns(path, header, tuple(types))
    with progress_bar(total=3, desc=spec.file_name, unit="step", enabled=progress) as bar:
        with located_errors(path, header):
            table = pa_csv.read_csv(path, read_options=read_options(), convert_options=convert_options(types))
        if table.num_rows == 0:
            raise DataError(f"{path.name}: no data rows (only a header)")
        bar.update()
        raw_ids = table[spec.id_column].combine_chunks()
        require_present(path, raw_ids, spec.id_column)
        ids = fixed_width_ids(path, spec.id_column, raw_ids, spec.id_width)
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        check_unique(path, spec.id_column, ids, order)
        bar.update()
        codes = [categorical_codes(table[c].combine_chunks()) for c in spec.categorical]
        numeric_cols: list[np.ndarray] = []
        for column in spec.numeric:
            numeric_cols.extend(standardise(table[column].combine_chunks()))
        bar.update()
    n = len(ids)
    categorical = np.stack([c for c, _ in codes], axis=1) if codes else np.zeros((n, 0), np.int64)
    numeric = np.stack(numeric_cols, axis=1) if numeric_cols else np.zeros((n, 0), np.float32)
    return NodeTable(
        ids=ids,
        categorical=np.ascontiguousarray(categorical[order]),
        numeric=np.ascontiguousarray(numeric[order]),
        categorical_names=spec.categorical,
        numeric_names=tuple(name for c in spec.numeric for name in (c, f"{c}_missing")),
        cardinalities=tuple(v for _, v in codes),
    )


def fixed_width_ids(path: Path, name: str, ids: pa.Array, width: int) -> np.ndarray:
    """``(N,)`` ``S<width>`` copy of a string column; :class:`DataError` if an id is longer."""
    lengths = pc.binary_length(ids).to_numpy()
    too_long = np.flatnonzero(lengths > width)
    if too_long.size:
        row = int(too_long[0])
        raise DataError(
            f"{path.name}: line {line_number(row)}: {name} {show(ids[row].as_py())} is "
            f"{lengths[row]} bytes, longer than {width}"
        )
    if np.all(lengths == width):  # the real files: the characters are already a fixed-width array
        offsets = np.frombuffer(ids.buffers()[1], np.int32)[ids.offset : ids.offset + len(ids) + 1]
        data = np.frombuffer(ids.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]
        return data.view(f"S{width}").copy()
    return np.array(ids.cast(pa.binary()).to_pylist(), dtype=f"S{width}")


def check_unique(path: Path, name: str, sorted_ids: np.ndarray, order: np.ndarray) -> None:
    """:class:`DataError` if the sorted ids repeat, naming one repeated id and two of its lines."""
    repeats = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if repeats.size:
        k = int(repeats[0])
        first, second = sorted(line_number(r) for r in order[k : k + 2])
        distinct = np.unique(sorted_ids[repeats]).size
        raise DataError(
            f"{path.name}: {distinct} {name} value{'s occur' if distinct > 1 else ' occurs'} more than once "
            f"(first: {show(sorted_ids[k].decode('utf-8', 'replace'))} at lines {first} and {second})"
        )


def categorical_codes(values: pa.Array) -> tuple[np.ndarray, int]:
    """Codes ``1..V`` in sorted value order (``0`` = empty field) and ``V``.

    Args:
        values: ``(N,)`` string column with nulls for empty fields.

    Returns:
        ``(N,)`` int64 codes, and the number of distinct values ``V``.
    """
    encoded = values.dictionary_encode()
    num_values = len(encoded.dictionary)
    # Codes follow the sorted values, not first appearance, so they do not depend on row order.
    lookup = np.zeros(num_values + 1, dtype=np.int64)  # the extra last slot maps null (-1) to 0
    lookup[pc.sort_indices(encoded.dictionary).to_numpy()] = np.arange(1, num_values + 1)
    indices = pc.fill_null(encoded.indices, -1).to_numpy()
    return lookup[indices], num_values


def standardise(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Zero-mean unit-variance values over the present ones, and the 0/1 missing flag.

    Args:
        values: ``(N,)`` float64 column with nulls for empty fields.

    Returns:
        ``(N,)`` float32 standardised values (``0`` where missing) and ``(N,)`` float32 flags.
    """
    x = values.to_numpy(zero_copy_only=False).astype(np.float64)
    missing = ~np.isfinite(x)
    present = x[~missing]
    mean = float(present.mean()) if present.size else 0.0
    std = float(present.std()) if present.size else 1.0
    scaled = np.where(missing, 0.0, (x - mean) / (std if std > 0 else 1.0))
    return scaled.astype(np.float32), missing.astype(np.float32)
