"""Index arithmetic of the live graph: one virtual edge numbering over a base CSR and a small delta.

The live graph's adjacency is, row by row, exactly the CSR a rebuild would write: every row keeps
its base edges before a per-row *split* day (its *head*), and the rows the delta touches (*dirty*
rows) continue with the delta's edges from the split day on (the base's own edges from that day,
copied, then the new ones in log order). Edges are numbered in that merged order (*virtual*
positions), so the sampler, the temporal features and the purchase history, which only ever do
``start + offset`` within a row, read base + delta as one CSR without a line of their own.

:class:`Overlay` maps a virtual index to the base or the delta (and back), row segment by row
segment: between dirty rows a virtual position is a base position plus a constant shift (the edges
the dirty rows before it gained); nothing of the size of the base is built or copied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from models.store.live_merged import Layout

BEFORE, HEAD, DELTA, AFTER = 0, 1, 2, 3


def as_numpy(values: Tensor | np.ndarray) -> np.ndarray:
    """A tensor's numpy view (memory-mapped base arrays stay mapped: nothing is copied)."""
    return values.numpy() if isinstance(values, Tensor) else values


def as_tensor(values: np.ndarray) -> Tensor:
    return torch.from_numpy(np.ascontiguousarray(values))


def _bound(index: np.ndarray, last: int) -> np.ndarray:
    """``index`` clamped to ``[0, last]`` (``np.clip`` costs several times more on small arrays)."""
    return np.minimum(np.maximum(index, 0), max(last, 0))


@dataclass(frozen=True)
class Overlay:
    """How a virtual index space (positions, or ranks in a sub-list of them) splits into base and delta.

    Per dirty row ``j`` (``K`` of them, in row order): its virtual start, its base head (kept from the
    base, first), then its delta segment; the base tail it replaces is skipped. All arrays are numpy
    int64: a query holds tens to hundreds of indices, where numpy's per-call cost is a fraction of
    torch's.

    Args:
        start: ``(K,)`` virtual index where dirty row ``j`` begins.
        head: ``(K,)`` length of its base head.
        length: ``(K,)`` length of its delta segment.
        base_start: ``(K,)`` index of row ``j``'s start in the base space.
        delta_start: ``(K,)`` index of row ``j``'s delta segment in the delta space.
        shift: ``(K + 1,)`` virtual minus base index of the base rows before dirty row ``j``
            (``shift[K]``: after the last).
    """

    start: np.ndarray
    head: np.ndarray
    length: np.ndarray
    base_start: np.ndarray
    delta_start: np.ndarray
    shift: np.ndarray

    @classmethod
    def build(cls, base_start: np.ndarray, head: np.ndarray, tail: np.ndarray, delta_start: np.ndarray,
              length: np.ndarray) -> Overlay:
        """From each dirty row's base start, head and replaced tail lengths, and delta segment."""
        base_start, head, tail, delta_start, length = (np.asarray(a, dtype=np.int64) for a in
                                                       (base_start, head, tail, delta_start, length))
        shift = np.zeros(len(length) + 1, dtype=np.int64)
        np.cumsum(length - tail, out=shift[1:])
        return cls(base_start + shift[:-1], head, length, base_start, delta_start, shift)

    @property
    def empty(self) -> bool:
        return not len(self.start)

    def locate_tensor(self, index: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`locate` of a tensor's values, remembered for the same tensor object: the temporal
        features read ``spend`` and ``day_starts`` at one tensor of positions, one after the other."""
        last = self.__dict__.get("_last")
        if last is not None and last[0] is index:
            return last[1]
        found = self.locate(as_numpy(index))
        object.__setattr__(self, "_last", (index, found))  # one tuple: read whole by another thread
        return found

    def locate(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Where virtual ``index`` ``(F,)`` lies.

        Returns:
            ``(row, case, base_index, delta_index)``: the last dirty row starting at or before it
            (clamped to 0), :data:`BEFORE` / :data:`HEAD` / :data:`DELTA` / :data:`AFTER` it, and the
            index in the base space (meaningful unless ``DELTA``) and in the delta space (for ``DELTA``).
        """
        if self.empty:
            zero = np.zeros_like(index)
            return zero, np.full_like(index, BEFORE), index, zero
        row = np.searchsorted(self.start, index, side="right") - 1
        some = row >= 0
        row = np.maximum(row, 0)
        head_end = self.start[row] + self.head[row]
        case = np.where(index < head_end, HEAD, np.where(index < head_end + self.length[row], DELTA, AFTER))
        case[~some] = BEFORE
        shift = np.where(some, self.shift[row + (case == AFTER)], 0)
        return row, case, index - shift, self.delta_start[row] + (index - head_end)

    def head_end(self, row: np.ndarray) -> np.ndarray:
        """Virtual index where dirty row ``row``'s delta segment begins."""
        return self.start[row] + self.head[row]

    def layout(self, size: int) -> Layout:
        """Every virtual index ``0 .. size - 1`` located at once (:class:`models.store.live_merged.Layout`),
        to copy whole arrays into virtual order without a binary search per index."""
        return Layout.build(self, size)


def take(base: np.ndarray, delta: np.ndarray, in_delta: np.ndarray, base_index: np.ndarray,
         delta_index: np.ndarray) -> np.ndarray:
    """``base[base_index]`` where not ``in_delta``, else ``delta[delta_index]`` (rows of 1-d arrays)."""
    out = base[_bound(base_index, len(base) - 1)]
    if len(delta) and in_delta.any():
        out = np.where(in_delta, delta[_bound(delta_index, len(delta) - 1)].astype(out.dtype), out)
    return out


@dataclass(frozen=True)
class VirtualArray:
    """A per-edge array (``col``, ``day``) read at virtual positions: ``index_select`` only."""

    overlay: Overlay
    base: np.ndarray
    delta: np.ndarray
    size: int

    @property
    def dtype(self) -> np.dtype:
        return np.result_type(self.base, self.delta)

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        assert dim == 0
        _, case, base_index, delta_index = self.overlay.locate_tensor(index)
        return as_tensor(take(self.base, self.delta, case == DELTA, base_index, delta_index))

    def numel(self) -> int:
        return self.size

    @property
    def shape(self) -> tuple[int]:
        return (self.size,)

    def merged(self, layout: Layout, out: np.ndarray | None = None) -> np.ndarray:
        """The whole array in virtual order: what ``index_select`` gives at ``0 .. size - 1``
        (``layout``: of ``size`` or more indices; ``out``: where, else a new array)."""
        if len(self.base):
            out = layout.base_part(self.base, None, self.size, self.dtype, out)
        elif out is None:  # every edge is new
            out = np.empty(self.size, dtype=self.delta.dtype)
        out[layout.in_delta] = self.delta[layout.delta_index]
        return out


@dataclass(frozen=True)
class VirtualCumulative:
    """A cumulative array (``(E + 1,)``: prefix sums, kept counts) read at virtual boundaries.

    Args:
        overlay: the position overlay.
        base: the base's cumulative array (memory-mapped).
        delta: the delta's, over its own positions.
        correction: ``(K + 1,)`` what the dirty rows before row ``j`` add over the base (their delta
            segment's total minus their replaced tail's), float64 or int64.
        size: ``E + 1`` of the virtual CSR.
    """

    overlay: Overlay
    base: np.ndarray
    delta: np.ndarray
    correction: np.ndarray
    size: int

    @classmethod
    def build(cls, overlay: Overlay, base: Tensor | np.ndarray, delta: Tensor | np.ndarray,
              tail: np.ndarray, size: int) -> VirtualCumulative:
        base, delta, o = as_numpy(base), as_numpy(delta), overlay
        head_end = o.base_start + o.head
        wide = np.float64 if np.issubdtype(base.dtype, np.floating) else np.int64
        delta_total = delta[o.delta_start + o.length].astype(wide) - delta[o.delta_start].astype(wide)
        tail_total = base[head_end + tail].astype(wide) - base[head_end].astype(wide)
        correction = np.zeros(len(head_end) + 1, dtype=wide)
        np.cumsum(delta_total - tail_total, out=correction[1:])
        return cls(overlay, base, delta, correction, size)

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        assert dim == 0
        o, wide = self.overlay, self.correction.dtype
        if o.empty:  # no dirty row: the base's own values
            return as_tensor(self.base[as_numpy(index)].astype(wide))
        row, case, base_index, delta_index = o.locate_tensor(index)
        in_delta = case == DELTA
        # Within a delta segment: the base up to the row's head end, plus the delta's own sum so far.
        base_index = np.where(in_delta, o.base_start[row] + o.head[row], base_index)
        value = self.base[_bound(base_index, len(self.base) - 1)].astype(wide)
        value += np.where(case == BEFORE, 0, self.correction[row + (case == AFTER)])
        if len(self.delta) > 1 and in_delta.any():
            last = len(self.delta) - 1
            within = (self.delta[_bound(delta_index, last)].astype(wide)
                      - self.delta[_bound(o.delta_start[row], last)].astype(wide))
            value += np.where(in_delta, within, 0)
        return as_tensor(value)

    def merged(self, layout: Layout, out: np.ndarray | None = None) -> np.ndarray:
        """The whole array in virtual order, the same values, bit for bit, as ``index_select`` at
        ``0 .. size - 1``: the same additions in the same order (counts in :meth:`dtype`; ``out``:
        where, else a new array)."""
        o, wide, row = self.overlay, self.correction.dtype, layout.delta_row
        value = layout.base_part(self.base, self.correction, self.size, self.dtype, out)
        # A delta segment: the base up to the row's head end, plus the delta's own sum so far.
        start = o.base_start[row] + o.head[row]
        in_delta = self.base[start].astype(wide) + self.correction[row]
        in_delta += self.delta[layout.delta_index].astype(wide) - self.delta[o.delta_start[row]].astype(wide)
        value[layout.in_delta] = in_delta
        return value

    @property
    def dtype(self) -> np.dtype:
        """Of :meth:`merged`: counts stay in the base's integer type (they count at most the edges,
        which it holds), sums in float64."""
        return self.base.dtype if self.base.dtype.kind == "i" else self.correction.dtype

    def numel(self) -> int:
        return self.size

    @property
    def shape(self) -> tuple[int]:
        return (self.size,)
