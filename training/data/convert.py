"""How a column is read: the type pyarrow parses from CSV text, and the same conversion of a Parquet
column of any type, so that a CSV file and a Parquet file of the same data read the same.

Values become text as a CSV file would hold them: integers without decimals (``13085``), whole
floats too (``13085.0`` -> ``13085``, what a float column holding integer ids exports as), NaN as
empty, other numbers in their shortest form, dates as ISO text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

Converter = Callable[[pa.Array], pa.Array]


class ConversionError(ValueError):
    """A value that cannot be converted; ``row`` is its 0-based position in the array converted.

    Args:
        row: the first value that failed.
        value: that value as text.
    """

    def __init__(self, row: int, value: str) -> None:
        super().__init__(f"row {row}: {value!r}")
        self.row, self.value = row, value


@dataclass(frozen=True)
class ColumnRead:
    """One column's reading.

    Args:
        csv_type: the type pyarrow parses the CSV field as (``None`` for a column only checked).
        convert: turns a Parquet column (any type) into the type CSV reading gives; raises
            :class:`ConversionError` at the first value it cannot convert.
        words: what a value must be, for messages (``a number``).
        timestamp_format: a ``strptime`` format the CSV reader parses timestamps with.
    """

    csv_type: pa.DataType
    convert: Converter
    words: str
    timestamp_format: str | None = None


def to_text(values: pa.Array) -> pa.Array:
    """``values`` of any type as a string array (nulls kept)."""
    kind = values.type
    if pa.types.is_dictionary(kind):
        return to_text(values.dictionary_decode())
    if pa.types.is_string(kind):
        return values
    if pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return _checked(values, pa.string())
    if pa.types.is_floating(kind):
        # NaN is how a float column (a customer number with gaps) marks a missing value: empty, not 'nan'.
        values = pc.if_else(pc.is_nan(values), pa.scalar(None, kind), values)
        whole = pc.fill_null(pc.equal(pc.floor(values), values), False)
        if pc.all(pc.or_(whole, pc.is_null(values))).as_py():
            return values.cast(pa.int64()).cast(pa.string())  # 13085.0 -> "13085"
    return values.cast(pa.string())


def to_float(values: pa.Array, kind: pa.DataType) -> pa.Array:
    """``values`` (numbers, or text of numbers) as ``kind``; empty text is null."""
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        values = pc.if_else(pc.equal(values, ""), pa.scalar(None, values.type), values)
    if pa.types.is_boolean(values.type):
        values = values.cast(pa.int8())
    return _checked(values, kind)


def _checked(values: pa.Array, kind: pa.DataType) -> pa.Array:
    """``values.cast(kind)``; :class:`ConversionError` naming the first value that fails."""
    try:
        return values.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    step = 1024
    for start in range(0, len(values), step):
        chunk = values.slice(start, step)
        try:
            chunk.cast(kind)
            continue
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for k in range(len(chunk)):
                try:
                    chunk.slice(k, 1).cast(kind)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise ConversionError(start + k, str(chunk[k].as_py())) from None
    raise ConversionError(0, str(values[0].as_py()))


TEXT = ColumnRead(pa.string(), to_text, "text")
FLOAT32 = ColumnRead(pa.float32(), lambda v: to_float(v, pa.float32()), "a number")
FLOAT64 = ColumnRead(pa.float64(), lambda v: to_float(v, pa.float64()), "a number")
