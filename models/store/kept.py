"""The sampler's ``per_day`` candidate list over a time-sorted CSR: the last edges of each (node, day).

Kept here, beside the CSR it indexes, so that the live graph (:mod:`models.store.live`) can build
the same structure over its delta and combine it with the base's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


@dataclass(frozen=True)
class KeptEdges:
    """The last ``per_day`` edges of every (node, day) group of a CSR, as a sub-list of positions.

    ``positions`` ``(K,)`` int64 are the kept CSR positions in order; ``cumulative`` ``(E + 1,)``
    int64 counts kept edges before each CSR position, so the kept edges of CSR range ``[s, e)`` are
    ``positions[cumulative[s]:cumulative[e]]``, still sorted by day.
    """

    positions: Tensor
    cumulative: Tensor

    @classmethod
    def build(cls, day: np.ndarray, rowptr: np.ndarray, per_day: int) -> KeptEdges:
        """Over a CSR's ``(E,)`` edge days and ``(N + 1,)`` row pointers."""
        num = len(day)
        last_of_group = np.ones(num, dtype=bool)  # the edge ends its (node, day) group
        if num:
            last_of_group[:-1] = day[1:] != day[:-1]
            ends = rowptr[1:][np.diff(rowptr) > 0] - 1
            last_of_group[ends] = True
        group_end = np.flatnonzero(last_of_group)
        end_of = group_end[np.searchsorted(group_end, np.arange(num))]  # each edge's group end
        keep = (end_of - np.arange(num)) < per_day
        cumulative = np.concatenate([[0], np.cumsum(keep)])
        return cls(torch.from_numpy(np.flatnonzero(keep)), torch.from_numpy(cumulative))
