"""Ids as they are: any string or integer id, read as text, stored as sorted fixed-width bytes.

An id is the column's text (``85123A``, ``0108775015`` with its leading zero, a UUID, unicode);
an integer column's id is the integer without decimals (``13085``), and so is a whole number
written with a zero decimal part (``13085.0``, what a float column holding integer ids exports
as). An id is at most ``max_id_bytes`` UTF-8 bytes (:data:`models.schema.MAX_ID_BYTES`, 128, by
default) and never empty. A table's ids are stored as ``S<w>`` bytes, ``w`` the longest id of the
data, so the lookup stays a binary search over one fixed-width array.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from training.data.common import DataError, show
from training.data.convert import ColumnRead, to_text

_WHOLE = r"^([+-]?[0-9]+)\.0+$"


def id_text(values: pa.Array) -> pa.Array:
    """An id column of any type as text (see the module docstring); nulls stay null."""
    text = to_text(values)
    # Comparing the last two bytes is cheap (a regex over 31.8M H&M ids is not): most files skip it.
    if pc.any(pc.ends_with(text, ".0")).as_py():
        text = pc.replace_substring_regex(text, _WHOLE, r"\1")
    return text


ID = ColumnRead(pa.string(), to_text, "an id")
"""How an id column is read: as text, which :func:`id_text` then normalises (either format)."""


def check_ids(ids: pa.Array, column: str, max_bytes: int, where: Callable[[int], str]) -> None:
    """:class:`DataError` at the first empty id or the first longer than ``max_bytes``.

    Args:
        ids: ``(N,)`` text ids.
        column: the id column's name.
        max_bytes: the longest id allowed.
        where: the message prefix of row ``k`` (``customers.csv: line 3``).
    """
    empty = pc.fill_null(pc.equal(ids, ""), True)
    if pc.any(empty).as_py():
        raise DataError(f"{where(int(pc.index(empty, True).as_py()))}: empty {column}")
    lengths = pc.binary_length(ids).to_numpy(zero_copy_only=False)
    too_long = np.flatnonzero(lengths > max_bytes)
    if too_long.size:
        row = int(too_long[0])
        raise DataError(f"{where(row)}: {column} {show(ids[row].as_py())} is {lengths[row]} bytes, "
                        f"longer than {max_bytes}")


def fixed_width(ids: pa.Array) -> np.ndarray:
    """``(N,)`` ``S<w>`` copy of non-empty text ids, ``w`` the longest id's length in bytes.

    Built from the arrow buffers in numpy, without a Python object per id.
    """
    ids = ids.cast(pa.binary()) if len(ids) else ids
    if len(ids) == 0:
        return np.zeros(0, dtype="S1")
    offsets = np.frombuffer(ids.buffers()[1], np.int32)[ids.offset : ids.offset + len(ids) + 1]
    data = np.frombuffer(ids.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]
    lengths = np.diff(offsets)
    width = int(lengths.max())
    if np.all(lengths == width):
        return data.view(f"S{width}").copy()
    out = np.zeros((len(ids), width), dtype=np.uint8)
    rows = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
    columns = np.arange(len(data), dtype=np.int64) - np.repeat(offsets[:-1] - offsets[0], lengths)
    out[rows, columns] = data
    return out.view(f"S{width}").reshape(-1)
