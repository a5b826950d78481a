"""The feature columns of a customers or articles table: their types, inferred or given, and codes.

- ``categorical``: codes ``1..V`` in sorted value order, ``0`` = empty;
- ``numeric``: standardised, with a ``<name>_missing`` 0/1 column beside it;
- ``timestamp``: an ISO date or date and time (or integer epoch seconds, or text in the table's
  ``time_format``), as its day number, then numeric;
- ``text``: free text, skipped with a note (the model has no text encoder).

A column of type ``auto`` is read as text and typed by its values: integers are categorical when
at most :data:`MAX_INTEGER_CATEGORIES` distinct values occur, else numeric; other numbers are
numeric; ISO dates and times are timestamps; other strings are categorical, unless they are long
and mostly distinct (free text: on average at least :data:`TEXT_MIN_LENGTH` characters, and more
distinct values than half the rows that have one). An empty column is categorical.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from training.data.common import DataError, show
from training.data.convert import FLOAT64, TEXT, ColumnRead, ConversionError
from training.data.spec import AUTO, CATEGORICAL, NUMERIC, TIMESTAMP, Feature
from training.data.spec import TEXT as TEXT_TYPE
from training.data.times import DATETIME_FORM, compact_form, epoch_form, formatted

MAX_INTEGER_CATEGORIES = 64
TEXT_MIN_LENGTH = 20
_INTEGER = r"^[+-]?[0-9]+$"
_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_ISO_TIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?)?$"


@dataclass
class EncodedFeatures:
    """A table's features as the :class:`models.store.tables.NodeTable` arrays (rows in table order).

    Args:
        categorical: ``(N, C)`` int64 codes.
        categorical_names: the ``C`` columns.
        cardinalities: distinct values per categorical column.
        numeric: ``(N, F)`` float32.
        numeric_names: the ``F`` names (``age``, ``age_missing``, ...).
    """

    categorical: np.ndarray
    categorical_names: tuple[str, ...]
    cardinalities: tuple[int, ...]
    numeric: np.ndarray
    numeric_names: tuple[str, ...]


def feature_reads(features: tuple[Feature, ...]) -> dict[str, ColumnRead]:
    """How each feature column is read (a ``text`` column is not read at all)."""
    return {f.column: FLOAT64 if f.type == NUMERIC else TEXT for f in features if f.type != TEXT_TYPE}


def infer_type(values: pa.Array) -> str:
    """The type of a column read as text (see the module docstring)."""
    present = pc.drop_null(values)
    distinct = pc.unique(present)
    if len(distinct) == 0:
        return CATEGORICAL
    if pc.all(pc.match_substring_regex(distinct, _INTEGER)).as_py():
        return CATEGORICAL if len(distinct) <= MAX_INTEGER_CATEGORIES else NUMERIC
    if pc.all(pc.match_substring_regex(distinct, _NUMBER)).as_py():
        return NUMERIC
    if pc.all(pc.match_substring_regex(distinct, _ISO_TIME)).as_py():
        return TIMESTAMP
    mean_length = pc.mean(pc.utf8_length(present)).as_py()
    if mean_length >= TEXT_MIN_LENGTH and len(distinct) > len(present) / 2:
        return TEXT_TYPE
    return CATEGORICAL


def encode_features(table: pa.Table, features: tuple[Feature, ...], label: str,
                    note: Callable[[str], object], where: Callable[[int], str],
                    time_format: str | None = None) -> EncodedFeatures:
    """Type and encode ``features`` of ``table`` (read with :func:`feature_reads`).

    Args:
        table: the columns, one row per entity.
        features: the spec's feature columns.
        label: the table's name for notes (``articles``).
        note: receives one line per skipped column.
        where: the message prefix of row ``k``, for a timestamp that does not parse.
        time_format: the ``strptime`` format of the timestamp columns (``None``: ISO or epoch seconds).
    """
    types: Mapping[str, str] = {
        f.column: infer_type(table[f.column].combine_chunks()) if f.type == AUTO else f.type for f in features
    }
    declared = {f.column for f in features if f.type != AUTO}
    codes, names, numeric, numeric_names = [], [], [], []
    for column, kind in types.items():
        if kind == TEXT_TYPE:
            why = "it is declared text" if column in declared else "its values look like free text"
            note(f"{label}: {column} skipped, {why}: the model has no text encoder"
                 + ("" if column in declared else " (declare it categorical to use it)"))
        elif kind == CATEGORICAL:
            codes.append(categorical_codes(_text(table[column].combine_chunks())))
            names.append(column)
        else:
            values = table[column].combine_chunks()
            values = (_days(values, column, where, time_format) if kind == TIMESTAMP
                      else _floats(values, column, where))
            numeric.extend(standardise(values))
            numeric_names += [column, f"{column}_missing"]
    n = table.num_rows
    return EncodedFeatures(
        categorical=np.stack([c for c, _ in codes], axis=1) if codes else np.zeros((n, 0), np.int64),
        categorical_names=tuple(names),
        cardinalities=tuple(v for _, v in codes),
        numeric=np.stack(numeric, axis=1) if numeric else np.zeros((n, 0), np.float32),
        numeric_names=tuple(numeric_names),
    )


def _text(values: pa.Array) -> pa.Array:
    return values if pa.types.is_string(values.type) else values.cast(pa.string())


def _floats(values: pa.Array, column: str, where: Callable[[int], str]) -> pa.Array:
    try:
        return FLOAT64.convert(values)
    except ConversionError as err:
        what = f"cannot parse {column} value {show(err.value)} as a number"
        raise DataError(f"{where(err.row)}: {what}") from None


def _days(values: pa.Array, column: str, where: Callable[[int], str], time_format: str | None) -> pa.Array:
    """Day numbers (float64, null where empty) of ISO dates and times, dates written as one number
    (``20101201``), integer epoch times (seconds, or a finer unit when the values are that large), or
    text in ``time_format``."""
    present = pc.drop_null(values)
    integers = (time_format is None and len(present) > 0
                and pc.all(pc.match_substring_regex(present, _INTEGER)).as_py())
    compact = compact_form(present) if integers else None
    if integers and compact is None:
        values = values.cast(pa.int64())
        form = epoch_form(pc.drop_null(values))
    else:
        form = compact or (DATETIME_FORM if time_format is None else formatted(time_format))
        try:
            values = form.column_read().convert(values)
        except ConversionError as err:
            raise DataError(f"{where(err.row)}: cannot parse {column} value {show(err.value)} as "
                            f"{form.words}") from None
    days = np.full(len(values), np.nan)
    valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
    days[valid] = form.days(pc.drop_null(values))
    return pa.array(days)


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
