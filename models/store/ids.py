"""Ids as they are in the data: sorted fixed-width bytes, found by one binary search, read back as text.

A node table's ids are any non-empty text of at most :data:`models.schema.MAX_ID_BYTES` UTF-8
bytes (an integer id is its decimal digits), stored sorted bytewise as ``S<w>``, ``w`` the data's
longest id: an id's dense index is its rank. Numpy pads a fixed-width string with NUL bytes and
drops them when reading one back, so no stored id ends in a NUL byte, and a query that does (or
that is longer than ``w``) is unknown rather than silently cut to a stored id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

Id = str | int | bytes
"""An id as a caller gives it: text, an integer (its decimal digits) or the stored bytes."""


def id_bytes(value: Id) -> bytes:
    """The stored form of one id: UTF-8 bytes.

    A lone surrogate (not UTF-8) is kept as the bytes ``surrogatepass`` gives, which are not UTF-8
    either and so match no stored id.
    """
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, bytes):
        return value
    if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
        return str(int(value)).encode()
    raise TypeError(f"an id is a str, an int or bytes, got {type(value).__name__}")


def _query_bytes(ids: np.ndarray | Sequence[Id]) -> list[bytes] | np.ndarray:
    """``ids`` as bytes: a list, or an ``S`` array when they come as a bytes or integer array."""
    if isinstance(ids, np.ndarray):
        if ids.dtype.kind == "S":
            return ids
        if ids.dtype.kind in "iu":
            return ids.astype("S21")  # decimal digits, vectorized (int64: at most 20 characters)
        ids = ids.tolist()
    # The common cases inline: no Python function call per id.
    return [i.encode("utf-8", "surrogatepass") if type(i) is str else str(i).encode() if type(i) is int
            else id_bytes(i) for i in ids]


def lookup_sorted(sorted_ids: np.ndarray, ids: np.ndarray | Sequence[Id]) -> np.ndarray:
    """Binary-search ``ids`` in a sorted fixed-width bytes array; ``-1`` for unknown ids.

    Args:
        sorted_ids: ``(N,)`` ``S<w>`` ids, sorted ascending, unique (may be memory-mapped).
        ids: ``(K,)`` ids as ``str``, ``int`` or ``bytes`` (see :func:`id_bytes`), or an ``S`` or
            integer array.

    Returns:
        ``(K,)`` int64 indices into ``sorted_ids``.
    """
    if not isinstance(ids, np.ndarray) and len(ids) == 1:  # a request's: no array of queries
        return np.array([_lookup_one(sorted_ids, ids[0])], dtype=np.int64)
    raw = _query_bytes(ids)
    if isinstance(raw, np.ndarray):
        lengths = np.char.str_len(raw)
    else:
        lengths = np.fromiter(map(len, raw), dtype=np.int64, count=len(raw))
    if len(sorted_ids) == 0 or len(raw) == 0:
        return np.full(len(raw), -1, dtype=np.int64)
    # Cut to the table's width: an id longer than it, or ending in NUL, no longer has its own
    # length once cut and padded, so comparing lengths rejects exactly those.
    query = np.asarray(raw, dtype=sorted_ids.dtype)
    exact = np.char.str_len(query) == lengths
    pos = np.searchsorted(sorted_ids, query)
    pos_c = np.minimum(pos, len(sorted_ids) - 1)
    found = exact & (pos < len(sorted_ids)) & (sorted_ids[pos_c] == query)
    return np.where(found, pos_c, -1).astype(np.int64)


def _lookup_one(sorted_ids: np.ndarray, value: Id) -> int:
    """The index of one id, ``-1`` if unknown: a scalar search, a fifth of the cost of the array path."""
    raw = value.encode("utf-8", "surrogatepass") if type(value) is str else id_bytes(value)
    if len(sorted_ids) == 0 or len(raw) > sorted_ids.dtype.itemsize:
        return -1
    pos = int(sorted_ids.searchsorted(np.array(raw, dtype=sorted_ids.dtype)))
    # The stored id comes back without its NUL padding: a query ending in NUL equals none, as it must.
    return pos if pos < len(sorted_ids) and sorted_ids[pos] == raw else -1


def id_text(raw: bytes) -> str:
    """One stored id as text (what an answer carries): its UTF-8 bytes decoded."""
    return raw.decode("utf-8")


def ids_text(ids: np.ndarray | Iterable[bytes]) -> list[str]:
    """Stored ids ``(K,)`` ``S<w>`` as text, in order (each decoded as :func:`id_text`)."""
    items = ids.tolist() if isinstance(ids, np.ndarray) else ids
    return [raw.decode("utf-8") for raw in items]
