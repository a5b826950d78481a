"""The time column: dates or timestamps in whatever form the file has, bucketed to day numbers.

Every task is day-based, so a timestamp keeps only its day (days since 1970-01-01, see
:func:`models.schema.day_number`). Without a ``time_format`` the form is inferred from the first
values: ISO dates (``2010-12-01``), ISO dates and times (``2010-12-01 08:26:00``,
``2010-12-01T08:26``; with a zone offset or ``Z`` the UTC day is kept), dates and times written as
one number (``20101201``, ``20101201074500``, in text or an integer column), or integer epoch seconds
(milliseconds, microseconds or nanoseconds when the values are that large: event logs write
milliseconds).
A Parquet date or timestamp column is read as it is. Integer day numbers (day 1, 2, ... of a panel,
as some exports count time) are read with ``time_format = "days since YYYY-MM-DD"``, the date of
day 0; inferred, they would pass for epoch seconds of 1970-01-01 and put every line on one day, so
integers that small are refused with that advice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from training.data.common import DataError, show
from training.data.convert import ColumnRead, ConversionError, to_text
from training.data.files import PARQUET, SourceFile
from training.data.sources import first_values

ISO_DATE = "%Y-%m-%d"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?")
_DATETIME_ZONE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})")
_EPOCH = re.compile(r"-?\d+")
# Dates and times written as one number (20101201, 20101201074500): all-digit forms that epoch times
# in a shop's years never take (as epoch seconds 20101201 falls in 1970's August).
_YMD = r"(19|20)\d\d(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])"
_COMPACT = ((f"^{_YMD}$", "%Y%m%d"), (f"^{_YMD}([01]\\d|2[0-3])[0-5]\\d[0-5]\\d$", "%Y%m%d%H%M%S"))
_UNITS_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}
_SAMPLE = 1000
_EPOCH_DAYS = (-25_567, 84_006)  # 1900-01-01 .. 2200-01-01: beyond, epoch seconds were not meant
DAYS_SINCE = "days since"  # the time_format of integer day numbers: "days since YYYY-MM-DD"
# Epoch seconds all within 1970 are day numbers or counters, not the times of a shop's sales.
_FIRST_YEAR_SECONDS = 365 * 86_400


@dataclass(frozen=True)
class TimeForm:
    """How the time column is written.

    Args:
        arrow_type: what the CSV reader parses it as.
        words: what a value must be, for messages.
        time_format: the ``strptime`` format, if one is used.
        epoch: integer epoch times, in ``unit``.
        origin: day numbers: the day number (since 1970-01-01) of their day 0 (a fraction of a day,
            as spreadsheet serial dates hold the time of day, is dropped).
        unit: the unit of epoch times (``s``, ``ms``, ``us``, ``ns``).
    """

    arrow_type: pa.DataType
    words: str
    time_format: str | None = None
    epoch: bool = False
    origin: int | None = None
    unit: str = "s"

    def days(self, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """``(N,)`` int32 days since 1970-01-01 of the column's values (read by :meth:`column_read`)."""
        if self.origin is None:
            return day_numbers(values, self.unit)
        return (np.floor(values.cast(pa.float64()).to_numpy()) + self.origin).astype(np.int32)

    def column_read(self) -> ColumnRead:
        """The :class:`ColumnRead` of the column: native dates and timestamps of a Parquet file are
        kept, text is parsed in this form."""
        return ColumnRead(self.arrow_type, self._convert, self.words, self.time_format)

    def _convert(self, values: pa.Array) -> pa.Array:
        kind = values.type
        compact = self.time_format is not None and self.origin is None and pa.types.is_integer(kind)
        if not _is_text(kind) and not compact:  # a Parquet date, timestamp or epoch number: as it is
            return values
        text = to_text(values)
        if self.time_format is None or self.origin is not None:
            return _cast(text, self.arrow_type)
        parsed = pc.strptime(text, format=self.time_format, unit="s", error_is_null=True)
        bad = pc.and_(pc.is_null(parsed), pc.is_valid(text))
        if pc.any(bad).as_py():
            row = int(pc.index(bad, True).as_py())
            raise ConversionError(row, text[row].as_py())
        return parsed


def _cast(text: pa.Array, kind: pa.DataType) -> pa.Array:
    try:
        return text.cast(kind)
    except pa.ArrowInvalid:
        for row, value in enumerate(text.to_pylist()):
            try:
                pa.array([value], pa.string()).cast(kind)
            except pa.ArrowInvalid:
                raise ConversionError(row, str(value)) from None
        raise


DATE_FORM = TimeForm(pa.date32(), "a date (YYYY-MM-DD)")
DATETIME_FORM = TimeForm(pa.timestamp("us"), "a date or date and time (ISO 8601, e.g. 2010-12-01 08:26:00)")
ZONED_FORM = TimeForm(pa.timestamp("us", "UTC"), "a date and time with a zone offset (ISO 8601)")
EPOCH_FORM = TimeForm(pa.int64(), "an integer (epoch seconds)", epoch=True)
_UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


def epoch_form(first: pa.Array) -> TimeForm:
    """Integer epoch times in the unit their size says: the finest of seconds, milliseconds,
    microseconds and nanoseconds in which the largest of ``first`` (a few of the column's values)
    still falls before 2200 (times of 1900..2200 in one unit are out of reach in another)."""
    largest = (pc.max(pc.abs(first)).as_py() or 0) if len(first) else 0
    unit = next((u for u, per_day in _UNITS_PER_DAY.items() if largest <= _EPOCH_DAYS[1] * per_day), "ns")
    return TimeForm(pa.int64(), f"an integer (epoch {_UNIT_WORDS[unit]})", epoch=True, unit=unit)


def formatted(time_format: str) -> TimeForm:
    """The form of times written in the ``strptime`` format ``time_format``, or integer day numbers
    for ``"days since YYYY-MM-DD"``.

    Raises:
        DataError: ``"days since"`` followed by anything but an ISO date.
    """
    text = time_format.strip()
    if not text.startswith(DAYS_SINCE):
        return TimeForm(pa.timestamp("s"), f"a time in the format {time_format}", time_format)
    day_0 = text.removeprefix(DAYS_SINCE).strip()
    try:
        origin = int(np.datetime64(day_0, "D").astype(np.int64)) if _DATE.fullmatch(day_0) else None
    except ValueError:  # 2019-13-45
        origin = None
    if origin is None:
        raise DataError(f"time_format {show(time_format)}: after 'days since' give the date of day 0 as "
                        "YYYY-MM-DD, e.g. 'days since 2020-01-01'")
    return TimeForm(pa.float64(), f"a day number ({time_format})", time_format, origin=origin)


def time_form(file: SourceFile, column: str, time_format: str | None) -> TimeForm:
    """The form of ``file``'s time ``column``: from ``time_format``, else inferred from its first values.

    Raises:
        DataError: no form fits the first values; the message asks for a ``time_format``.
    """
    if time_format == ISO_DATE:
        return DATE_FORM
    if time_format is not None:
        return formatted(time_format)
    first = first_values(file, column, _SAMPLE * 4)
    if file.format == PARQUET and not _is_text(first.type) and not pa.types.is_integer(first.type):
        floating = pa.types.is_floating(first.type)  # integers: as text below (20101201 is a date)
        return _epoch(file, column, pc.drop_null(first)) if floating else DATETIME_FORM
    values = [v for v in to_text(first).to_pylist() if v][:_SAMPLE]
    if not values:
        return DATE_FORM
    compact = compact_form(pa.array(values))
    if compact is not None:
        return compact
    for pattern, form in ((_DATE, DATE_FORM), (_DATETIME, DATETIME_FORM), (_DATETIME_ZONE, ZONED_FORM),
                          (_EPOCH, EPOCH_FORM)):
        if all(pattern.fullmatch(v) for v in values):
            return _epoch(file, column, pa.array([int(v) for v in values])) if form.epoch else form
    odd = next(v for v in values if not _DATETIME.fullmatch(v))
    raise DataError(f"{file.name}: cannot infer the form of time column {column} from {show(odd)}: set "
                    "time_format in [transactions] (a strptime format such as '%m/%d/%Y %H:%M')")


def compact_form(values: pa.Array) -> TimeForm | None:
    """The form of dates (and times) written as one number, if every one of ``values`` (text, no
    nulls) is one: ``20101201`` (``%Y%m%d``) or ``20101201074500`` (``%Y%m%d%H%M%S``)."""
    for pattern, time_format in _COMPACT:
        if len(values) and pc.all(pc.match_substring_regex(values, pattern)).as_py():
            return formatted(time_format)
    return None


def _epoch(file: SourceFile, column: str, first: pa.Array) -> TimeForm:
    """:func:`epoch_form`, unless the first values are all within 1970's first year of seconds."""
    low, high = (pc.min(first).as_py(), pc.max(first).as_py()) if len(first) else (None, None)
    if low is not None and low >= 0 and high < _FIRST_YEAR_SECONDS:
        raise DataError(f"{file.name}: time column {column} holds small numbers ({show(low)} .. "
                        f"{show(high)}): as epoch seconds every line would fall in 1970; if they count days, "
                        "set time_format = 'days since YYYY-MM-DD' (the date of day 0) in [transactions]")
    return epoch_form(first)


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def day_numbers(values: pa.Array | pa.ChunkedArray, unit: str = "s") -> np.ndarray:
    """``(N,)`` int32 days since 1970-01-01 of dates, timestamps (UTC day) or epoch times in ``unit``,
    no nulls."""
    kind = values.type
    if pa.types.is_date32(kind):
        return values.cast(pa.int32()).to_numpy()
    if pa.types.is_date64(kind):
        return values.cast(pa.date32()).cast(pa.int32()).to_numpy()
    if pa.types.is_timestamp(kind):
        ticks = values.cast(pa.int64()).to_numpy()
        return np.floor_divide(ticks, _UNITS_PER_DAY[kind.unit]).astype(np.int32)
    ticks = values.cast(pa.int64()).to_numpy() if pa.types.is_integer(kind) else None
    if ticks is not None:  # exact: a float of nanoseconds since 1970 has no room for them
        return np.floor_divide(ticks, _UNITS_PER_DAY[unit]).astype(np.int32)
    return np.floor(values.cast(pa.float64()).to_numpy() / _UNITS_PER_DAY[unit]).astype(np.int32)


def check_epoch_days(file: SourceFile, column: str, days: np.ndarray, rows: np.ndarray,
                     unit: str = "s") -> None:
    """:class:`DataError` if epoch times in ``unit`` fall outside 1900..2200, or, in a unit finer than
    seconds, before 1971 (a line in a coarser unit than the first values showed, most likely)."""
    low = _EPOCH_DAYS[0] if unit == "s" else 365
    outside = np.flatnonzero((days < low) | (days > _EPOCH_DAYS[1]))
    if outside.size:
        k = int(outside[0])
        years = "1900..2200" if unit == "s" else "1971..2200"
        raise DataError(f"{file.name}: {file.where(int(rows[k]))}: {column} is read as epoch "
                        f"{_UNIT_WORDS[unit]} (the unit of the first values) and falls outside the years "
                        f"{years}: one unit for the whole column")
