"""Copying a live graph's version into virtual order (a merged :class:`models.store.live_csr.LiveCSR`).

:class:`Layout` places every virtual index of an :class:`models.store.overlay.Overlay` at once, so
that whole arrays are copied (in slices, or by one gather) rather than mapped per read;
:class:`Merged` is what the next version continues from (the arrays and the log rows they hold,
:func:`step` finds the rows logged since); :class:`Buffers` recycles the arrays of versions no one
reads any more.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from models.store.csr import TemporalCSR
from models.store.delta import DeltaCSR
from models.store.snapshot_prefix import EdgePrefix

if TYPE_CHECKING:
    from models.store.overlay import Overlay

PIECES_MAX_ROWS = 512  # up to this many dirty rows, copy contiguous slices; past it, one gather


@dataclass(frozen=True)
class Layout:
    """Where every virtual index ``0 .. S - 1`` lies, for copying whole arrays into virtual order.

    The virtual space is a run of base *pieces* (the base indices before the first dirty row's
    delta segment, between two dirty rows' delta segments, after the last), each shifted by a
    constant, with dirty row ``j``'s delta segment after piece ``j``: :meth:`Overlay.locate` puts
    each index in the same place. Few dirty rows: the pieces are copied as slices (memory speed);
    many: through ``source``, one gather, since a Python loop over thousands of slices costs more.

    Args:
        base_first: ``(K + 1,)`` int64 where each base piece begins in the base space.
        virtual_first: ``(K + 1,)`` int64 where it begins in the virtual space.
        head_end: ``(K,)`` int64 where each delta segment begins (base piece ``j`` ends).
        length: ``(K,)`` int64 the delta segments' lengths.
        source: ``(S,)`` int64 base index of each virtual index (``0`` inside delta segments), or
            ``None`` (copy slices).
        in_delta: ``(M,)`` int64 the virtual indices inside delta segments, in delta order.
        delta_index: ``(M,)`` int64 their delta indices.
        delta_row: ``(M,)`` int64 their dirty rows.
    """

    base_first: np.ndarray
    virtual_first: np.ndarray
    head_end: np.ndarray
    length: np.ndarray
    source: np.ndarray | None
    in_delta: np.ndarray
    delta_index: np.ndarray
    delta_row: np.ndarray

    @classmethod
    def build(cls, o: Overlay, size: int) -> Layout:
        k, head_end = len(o.start), o.start + o.head
        tail = o.length - np.diff(o.shift)
        base_first = np.concatenate([np.zeros(1, dtype=np.int64), o.base_start + o.head + tail])
        virtual_first = base_first + o.shift
        delta_row = np.repeat(np.arange(k, dtype=np.int64), o.length)
        first = np.cumsum(o.length) - o.length
        within = np.arange(len(delta_row), dtype=np.int64) - np.repeat(first, o.length)
        in_delta = head_end[delta_row] + within
        source = None
        if k > PIECES_MAX_ROWS:
            lengths = np.empty(2 * k + 1, dtype=np.int64)  # base piece j, then delta segment j
            lengths[0::2] = np.append(head_end, size) - virtual_first
            lengths[1::2] = o.length
            offset = np.zeros(2 * k + 1, dtype=np.int64)
            offset[0::2] = -o.shift
            source = np.arange(size, dtype=np.int64)
            source += np.repeat(offset, lengths)
            source[in_delta] = 0
        return cls(base_first, virtual_first, head_end, o.length, source, in_delta,
                   o.delta_start[delta_row] + within, delta_row)

    def base_part(self, base: np.ndarray, add: np.ndarray | None, size: int, dtype,
                  out: np.ndarray | None = None) -> np.ndarray:
        """``(size,)``: base piece ``j`` (plus ``add[j]``) at its virtual place, in ``dtype`` (into
        ``out`` when given); the delta segments are left for the caller to fill."""
        ends = np.append(self.head_end, size)
        out = np.empty(size, dtype=dtype) if out is None else out
        if add is not None:
            add = add.astype(dtype)  # one type in each addition: no casting per element
        if self.source is not None:
            if base.dtype == dtype:
                np.take(base, self.source[:size], out=out)
            else:
                out[:] = base[self.source[:size]]
            if add is not None:  # per base piece; the delta segments' values are replaced after
                lengths = np.empty(2 * len(self.length) + 1, dtype=np.int64)
                lengths[0::2], lengths[1::2] = ends - self.virtual_first, self.length
                values = np.zeros(len(lengths), dtype=add.dtype)
                values[0::2] = add
                out += np.repeat(values, lengths)
            return out
        pieces = zip(self.base_first.tolist(), self.virtual_first.tolist(), ends.tolist(), strict=True)
        for j, (b, v, stop) in enumerate(pieces):
            if add is None:
                out[v:stop] = base[b:b + stop - v]
            else:
                np.add(base[b:b + stop - v], add[j], out=out[v:stop])
        return out


MERGED, BUFFERS = "merged", "buffers"  # kept_cache entries: the last merged version, Buffers


class Buffers:
    """Arrays of earlier versions' merged CSRs that nothing reads any more, refilled for the next
    version: fresh memory costs more to fault in than to fill (~1 ms per 2 MB measured here, a
    third of an apply). An array is free when no version, view or tensor refers to it: a tensor
    made from it, or from a view of it, holds a reference, so the count tells."""

    KEEP = 3  # per name: the current version, one a request may still read, the next

    def __init__(self) -> None:
        self._arrays: dict[str, list[np.ndarray]] = {}

    def get(self, name: str, dtype, size: int) -> np.ndarray:
        """A ``(size,)`` array of ``dtype`` that no one else holds (contents undefined)."""
        arrays = self._arrays.setdefault(name, [])
        for array in arrays:
            # Referenced only by the list, the loop variable and getrefcount's argument: free.
            if array.dtype == dtype and len(array) >= size and sys.getrefcount(array) == 3:
                return array[:size]
        array = np.empty(size + size // 32 + 64, dtype=dtype)  # room for a few more batches
        arrays.append(array)
        del arrays[:-self.KEEP]
        return array[:size]


STEP_MAX_ROWS = 4096  # more log rows since the last version: merge from the base instead


@dataclass(frozen=True)
class Merged:
    """A version's CSR and prefix sums in virtual order, and the log rows they hold (where the next
    version of the same live graph continues from).

    Args:
        csr, prefix: the merged arrays.
        num_rows: source nodes.
        log: ``(T,)`` source node, destination, day and price of every log row, in log order.
    """

    csr: TemporalCSR
    prefix: EdgePrefix
    num_rows: int
    log: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def log_rows(d: DeltaCSR) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The delta's new edges back in log order: ``(T,)`` source, destination, day, price (``None``: a
    delta without :attr:`DeltaCSR.log_index`)."""
    if d.log_index is None:
        return None
    index = d.log_index.numpy()
    new = index >= 0
    place = index[new]
    source = np.repeat(d.nodes.numpy(), np.diff(d.csr.rowptr.numpy()))
    out = []
    for values in (source, d.csr.col.numpy(), d.csr.day.numpy(), d.price.numpy()):
        rows = np.empty(d.new_edges, dtype=values.dtype)
        rows[place] = values[new]
        out.append(rows)
    return tuple(out)


def step(previous: Merged | None, log: tuple | None, num_rows: int) -> tuple[Merged, tuple] | None:
    """``(previous, the log rows after it)`` when this version is ``previous`` plus a few more log
    rows (the same rows first, no node removed), else ``None``."""
    if previous is None or log is None or previous.num_rows > num_rows:
        return None
    count, total = len(previous.log[0]), len(log[0])
    if not count <= total <= count + STEP_MAX_ROWS:
        return None
    if not all(np.array_equal(now[:count], then) for now, then in zip(log, previous.log, strict=True)):
        return None
    return previous, tuple(now[count:] for now in log)
