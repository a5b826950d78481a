"""Fast CSV writing from fixed-width byte columns, and the value formats of the real H&M files.

A table is a list of numpy ``S<w>`` (fixed-width bytes) columns. Each chunk of rows is laid
out as one ``(rows, line width)`` uint8 matrix; when every value fills its column width
(the transactions file: ids, dates and prices all have fixed widths) the matrix is written
as is, otherwise the padding bytes are dropped with one boolean mask. On 2M transaction rows
this is 3-4x faster than ``pyarrow.csv.write_csv`` given the same pre-formatted columns.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from models.schema import EPOCH

_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_HEX_PAIRS = np.stack([np.repeat(_HEX_DIGITS, 16), np.tile(_HEX_DIGITS, 16)], axis=1)  # byte -> 2 chars
PRICE_UNITS = 59_000  # prices are multiples of 1 / 59000, as in the real file (SEK / 59)


def random_hex_ids(rng: np.random.Generator, n: int, width: int = 64) -> np.ndarray:
    """``(n,)`` sorted, distinct lowercase hex strings of ``width`` characters, dtype ``S<width>``."""
    raw = rng.integers(0, 256, size=(n, width // 2), dtype=np.uint8)
    ids = np.ascontiguousarray(_HEX_PAIRS[raw].reshape(n, width)).view(f"S{width}").ravel()
    ids = np.unique(ids)
    if len(ids) != n:  # 2^-128 odds per pair; never expected, but an id must never repeat
        raise RuntimeError("random id collision; use another seed")
    return ids


def decimal_digits(values: np.ndarray, width: int) -> np.ndarray:
    """``(n,)`` ``S<width>``: non-negative integers zero-padded to ``width`` decimal digits."""
    values = np.asarray(values, dtype=np.int64)
    if values.size and (values.min() < 0 or values.max() >= 10**width):
        raise ValueError(f"values must lie in [0, 10**{width})")
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    digits = (values[:, None] // powers[None, :]) % 10 + ord("0")
    return np.ascontiguousarray(digits.astype(np.uint8)).view(f"S{width}").ravel()


def int_strings(values: np.ndarray, missing: np.ndarray | None = None) -> np.ndarray:
    """Integers as their shortest decimal text, ``b""`` where ``missing``; dtype ``S<w>``."""
    values = np.asarray(values, dtype=np.int64)
    lut_size = int(values.max(initial=0)) + 1
    if values.min(initial=0) < 0 or lut_size > 10_000_000:
        raise ValueError("int_strings expects small non-negative integers")
    lut = np.array([str(v).encode() for v in range(lut_size)])
    out = lut[values]
    return out if missing is None else np.where(missing, b"", out)


def price_table(max_units: int) -> np.ndarray:
    """``(max_units + 1,)`` ``S18``: entry ``u`` is ``u / PRICE_UNITS`` printed like the real file.

    The real file prints prices with sixteen decimals, e.g. ``0.0508474576271186``.
    """
    return np.array([f"{u / PRICE_UNITS:.16f}".encode() for u in range(max_units + 1)])


def date_strings(first_day: int, num_days: int) -> np.ndarray:
    """``(num_days,)`` ``S10`` ``YYYY-MM-DD`` for days ``first_day, first_day + 1, ...`` (days since 1970)."""
    start = EPOCH + dt.timedelta(days=first_day)
    return np.array([(start + dt.timedelta(days=i)).isoformat().encode() for i in range(num_days)])


def csv_field(text: str) -> str:
    """One CSV field with minimal quoting (RFC 4180), as pandas writes the real files."""
    if any(ch in text for ch in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def encode_rows(columns: Sequence[np.ndarray]) -> bytes | memoryview:
    """CSV lines (``,``-separated, ``\\n``-terminated) for equal-length ``S<w>`` columns."""
    n = len(columns[0])
    widths = [c.dtype.itemsize for c in columns]
    line = np.empty((n, sum(widths) + len(widths)), dtype=np.uint8)
    mask = None
    pos = 0
    for col, width in zip(columns, widths, strict=True):
        cells = np.ascontiguousarray(col).view(np.uint8).reshape(n, width)
        line[:, pos : pos + width] = cells
        line[:, pos + width] = ord(",")
        padded = cells[:, -1] == 0  # numpy pads short values with trailing NULs
        if padded.any():
            if mask is None:
                mask = np.ones(line.shape, dtype=bool)
            mask[:, pos : pos + width] = cells != 0
        pos += width + 1
    line[:, -1] = ord("\n")
    return memoryview(line).cast("B") if mask is None else line[mask].tobytes()


def write_csv(
    path: Path,
    header: Sequence[str],
    num_rows: int,
    make_columns: Callable[[int, int], Sequence[np.ndarray]],
    chunk_rows: int = 1 << 20,
    on_chunk: Callable[[int], None] | None = None,
) -> None:
    """Write a CSV file chunk by chunk.

    Args:
        path: output file.
        header: column names of the first line.
        num_rows: rows to write.
        make_columns: ``(start, stop) -> columns`` of rows ``[start, stop)`` as ``S<w>`` arrays.
        chunk_rows: rows per chunk (bounds memory).
        on_chunk: called with the number of rows after each chunk (progress bars).
    """
    with open(path, "wb") as f:
        f.write((",".join(header) + "\n").encode())
        for start in range(0, num_rows, chunk_rows):
            stop = min(start + chunk_rows, num_rows)
            f.write(encode_rows(make_columns(start, stop)))
            if on_chunk is not None:
                on_chunk(stop - start)
