"""How a column is read: the type pyarrow parses from CSV text, and the same conversion of a Parquet
column of any type, so that a CSV file and a Parquet file of the same data read the same.

Values become text as a CSV file would hold them: integers without decimals (``13085``), whole
floats too (``13085.0`` -> ``13085``, what a float column holding integer ids exports as), NaN as
empty, other numbers in their shortest form, dates as ISO text.
"""

from __future__ import annotations

import re
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
    """``values`` (numbers, or text of numbers) as ``kind``; empty text is null. Text that is no plain
    number is read as :func:`plain_numbers` with a decimal point writes it (``$1,234.50``), and the
    words exports write for a missing number (:data:`MISSING_NUMBERS`, any case) are null."""
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    text = pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
    if text:
        values = pc.if_else(pc.equal(values, ""), pa.scalar(None, values.type), values)
    if pa.types.is_boolean(values.type):
        values = values.cast(pa.int8())
    if not text:
        return _checked(values, kind)
    try:
        return values.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    plain = plain_numbers(values, ".")
    missing = pc.is_in(pc.utf8_lower(pc.utf8_trim_whitespace(plain)), value_set=MISSING_NUMBERS)
    try:
        return _checked(pc.if_else(missing, pa.scalar(None, plain.type), plain), kind)
    except ConversionError as err:  # named as the file holds it
        raise ConversionError(err.row, str(values[err.row].as_py())) from None


# What exports write for a missing number (databases, spreadsheets, pandas): null in a numeric
# column, where no text is a value (ids and categories keep them as written).
MISSING_NUMBERS = pa.array(["na", "n/a", "nan", "null", "none", "\\n", "-", "--", "#n/a", "?"])

# Around a number: a currency sign (any of Unicode's: $ £ € ¥ ...) or an ISO code (USD, EUR), before
# or after it, with or without a space; a minus may stand before the sign (-$3.00).
_CURRENCY_BEFORE = r"^([+-]?)\s*(?:\p{Sc}|[A-Z]{3})\s*"
_CURRENCY_AFTER = r"\s*(?:\p{Sc}|[A-Z]{3})$"
# A number: its thousands grouped or not, by the mark that is not the decimal one, a space, a no-break
# space or an apostrophe (1,234.5 / 1 234,5 / 1'234.5); a first group has no leading zero, so 0,250
# is no grouped 250.
_SPACES = "'\u00a0\u202f "
_GROUPS = {".": ",", ",": "."}  # per decimal mark, the mark that groups thousands
_NUMBER = {mark: (rf"^[+-]?(([1-9][0-9]{{0,2}}([{group}{_SPACES}][0-9]{{3}})+|[0-9]+)"
                  rf"({re.escape(mark)}[0-9]*)?|{re.escape(mark)}[0-9]+)$")
           for mark, group in _GROUPS.items()}


def plain_numbers(values: pa.Array, decimal: str) -> pa.Array:
    """Text numbers as a shop's export may write them (a currency sign or code, thousands grouped,
    ``decimal`` the decimal mark: ``.`` or ``,``) in plain form (``1234.5``); other values as they are.

    ``$1,234.50``, ``1,234.50 USD`` and ``-£3`` are ``1234.50``, ``1234.50`` and ``-3`` with a decimal
    point; ``1.234,50 €`` and ``1 234,5`` are ``1234.50`` and ``1234.5`` with a decimal comma.
    """
    trimmed = pc.utf8_trim_whitespace(values)
    bare = pc.replace_substring_regex(pc.replace_substring_regex(trimmed, _CURRENCY_BEFORE, r"\1"),
                                      _CURRENCY_AFTER, "")
    number = pc.fill_null(pc.match_substring_regex(bare, _NUMBER[decimal]), False)
    group_marks = f"[{_GROUPS[decimal]}{_SPACES}]"
    plain = pc.replace_substring_regex(bare, group_marks, "")
    if decimal == ",":
        plain = pc.replace_substring(plain, ",", ".")
    return pc.if_else(number, plain, values)


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
