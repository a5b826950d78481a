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

import torch
from torch import Tensor

BEFORE, HEAD, DELTA, AFTER = 0, 1, 2, 3


@dataclass(frozen=True)
class Overlay:
    """How a virtual index space (positions, or ranks in a sub-list of them) splits into base and delta.

    Per dirty row ``j`` (``K`` of them, in row order): its virtual start, its base head (kept from the
    base, first), then its delta segment; the base tail it replaces is skipped.

    Args:
        start: ``(K,)`` virtual index where dirty row ``j`` begins.
        head: ``(K,)`` length of its base head.
        length: ``(K,)`` length of its delta segment.
        base_start: ``(K,)`` index of row ``j``'s start in the base space.
        delta_start: ``(K,)`` index of row ``j``'s delta segment in the delta space.
        shift: ``(K + 1,)`` virtual minus base index of the base rows before dirty row ``j``
            (``shift[K]``: after the last).
    """

    start: Tensor
    head: Tensor
    length: Tensor
    base_start: Tensor
    delta_start: Tensor
    shift: Tensor

    @classmethod
    def build(cls, base_start: Tensor, head: Tensor, tail: Tensor, delta_start: Tensor,
              length: Tensor) -> Overlay:
        """From each dirty row's base start, head and replaced tail lengths, and delta segment."""
        gained = length - tail
        shift = torch.zeros(len(gained) + 1, dtype=torch.long)
        torch.cumsum(gained, 0, out=shift[1:])
        return cls(base_start + shift[:-1], head, length, base_start, delta_start, shift)

    def locate(self, index: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Where virtual ``index`` ``(F,)`` lies.

        Returns:
            ``(row, case, base_index, delta_index)``: the last dirty row starting at or before it
            (clamped to 0), :data:`BEFORE` / :data:`HEAD` / :data:`DELTA` / :data:`AFTER` it, and the
            index in the base space (meaningful unless ``DELTA``) and in the delta space (for ``DELTA``).
        """
        if self.start.numel() == 0:
            zero = torch.zeros_like(index)
            return zero, torch.full_like(index, BEFORE), index, zero
        row = torch.searchsorted(self.start, index, right=True) - 1
        some = row >= 0
        row = row.clamp(min=0)
        head_end = self.start.index_select(0, row) + self.head.index_select(0, row)
        delta_end = head_end + self.length.index_select(0, row)
        case = torch.where(index < head_end, HEAD, torch.where(index < delta_end, DELTA, AFTER))
        case = torch.where(some, case, BEFORE)
        shift = self.shift.index_select(0, row + (case == AFTER).long())
        base_index = index - torch.where(case == BEFORE, 0, shift)
        delta_index = self.delta_start.index_select(0, row) + (index - head_end)
        return row, case, base_index, delta_index

    def head_end(self, row: Tensor) -> Tensor:
        """Virtual index where dirty row ``row``'s delta segment begins."""
        return self.start.index_select(0, row) + self.head.index_select(0, row)


def take(base: Tensor, delta: Tensor, in_delta: Tensor, base_index: Tensor, delta_index: Tensor) -> Tensor:
    """``base[base_index]`` where not ``in_delta``, else ``delta[delta_index]`` (rows of 1-d or 2-d)."""
    out = base.index_select(0, base_index.clamp(0, max(base.shape[0] - 1, 0)))
    if delta.shape[0] and bool(in_delta.any()):
        picked = delta.index_select(0, delta_index.clamp(0, delta.shape[0] - 1))
        mask = in_delta.view(-1, *([1] * (out.dim() - 1)))
        out = torch.where(mask, picked.to(out.dtype), out)
    return out


@dataclass(frozen=True)
class VirtualArray:
    """A per-edge array (``col``, ``day``) read at virtual positions: ``index_select`` only."""

    overlay: Overlay
    base: Tensor
    delta: Tensor
    size: int

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        assert dim == 0
        _, case, base_index, delta_index = self.overlay.locate(index)
        return take(self.base, self.delta, case == DELTA, base_index, delta_index)

    def numel(self) -> int:
        return self.size

    @property
    def shape(self) -> tuple[int]:
        return (self.size,)


@dataclass(frozen=True)
class VirtualCumulative:
    """A cumulative array (``(E + 1,)``: prefix sums, kept counts) read at virtual boundaries.

    Args:
        overlay: the position overlay.
        base: the base's cumulative array (memory-mapped).
        delta: the delta's, over its own positions.
        correction: ``(K + 1,)`` what the dirty rows before row ``j`` add over the base (their delta
            segment's total minus their replaced tail's).
        size: ``E + 1`` of the virtual CSR.
    """

    overlay: Overlay
    base: Tensor
    delta: Tensor
    correction: Tensor
    size: int

    @classmethod
    def build(cls, overlay: Overlay, base: Tensor, delta: Tensor, tail: Tensor,
              size: int) -> VirtualCumulative:
        o = overlay
        head_end = o.base_start + o.head
        delta_total = delta.index_select(0, o.delta_start + o.length) - delta.index_select(0, o.delta_start)
        tail_total = base.index_select(0, head_end + tail) - base.index_select(0, head_end)
        wide = torch.float64 if base.is_floating_point() else torch.long
        correction = torch.zeros(len(head_end) + 1, dtype=wide)
        torch.cumsum((delta_total.to(wide) - tail_total.to(wide)), 0, out=correction[1:])
        return cls(overlay, base, delta, correction, size)

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        assert dim == 0
        o = self.overlay
        if o.start.numel() == 0:  # no dirty row: the base's own values
            return self.base.index_select(0, index).to(self.correction.dtype)
        row, case, base_index, delta_index = o.locate(index)
        in_delta = case == DELTA
        # Within a delta segment: the base up to the row's head end, plus the delta's own sum so far.
        base_index = torch.where(in_delta, o.base_start.index_select(0, row) + o.head.index_select(0, row),
                                 base_index)
        wide = self.correction.dtype
        value = self.base.index_select(0, base_index.clamp(0, self.base.shape[0] - 1)).to(wide)
        correction = self.correction.index_select(0, row + (case == AFTER).long())
        value = value + torch.where(case == BEFORE, torch.zeros((), dtype=wide), correction)
        if self.delta.shape[0] > 1 and bool(in_delta.any()):
            start = o.delta_start.index_select(0, row)
            within = (self.delta.index_select(0, delta_index.clamp(0, self.delta.shape[0] - 1))
                      - self.delta.index_select(0, start.clamp(0, self.delta.shape[0] - 1))).to(wide)
            value = value + torch.where(in_delta, within, torch.zeros((), dtype=wide))
        return value

    def numel(self) -> int:
        return self.size

    @property
    def shape(self) -> tuple[int]:
        return (self.size,)
