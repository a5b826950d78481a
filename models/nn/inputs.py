"""What the network reads: the per-type feature tables' shapes, one batch's inputs, and the purchase
history rows. Plain containers of tensors, built by :mod:`models.graph` and consumed by :mod:`models.nn`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from models.schema import EdgeType


@dataclass(frozen=True)
class TableSpec:
    """What the encoder of one node type must accept.

    Args:
        cardinalities: per categorical column, the largest code (codes run ``0..cardinality``).
        num_numeric: number of numeric feature columns.
    """

    cardinalities: tuple[int, ...]
    num_numeric: int


@dataclass
class ModelInputs:
    """Everything the model reads for one batch; real nodes first, optional padding after.

    Args:
        cat: per node type, ``(N_t, C_t)`` int64 categorical codes.
        num: per node type, ``(N_t, F_t)`` float32 numeric features.
        rel_time: per node type, ``(N_t,)`` float32 days from the node's time to its seed time.
        edge_index: per edge type, ``(2, E)`` int64 local ``(src, dst)`` indices.
        seed_type: node type of the seeds; seeds are its first ``num_seeds`` rows.
        num_seeds: number of real seeds ``B``.
        seed_rows: rows of ``seed_type`` the model returns (``B``, or a bucket's seed capacity).
    """

    cat: dict[str, Tensor]
    num: dict[str, Tensor]
    rel_time: dict[str, Tensor]
    edge_index: dict[EdgeType, Tensor]
    seed_type: str
    num_seeds: int
    seed_rows: int

    def num_nodes(self) -> dict[str, int]:
        return {t: int(v.shape[0]) for t, v in self.cat.items()}

    def num_edges(self) -> dict[EdgeType, int]:
        return {e: int(v.shape[1]) for e, v in self.edge_index.items()}

    def to(self, device: torch.device | str) -> ModelInputs:
        """These inputs with every tensor on ``device`` (``self`` if already there)."""
        device = torch.device(device)
        tensors = (*self.cat.values(), *self.num.values(), *self.rel_time.values(), *self.edge_index.values())
        if all(v.device == device for v in tensors):
            return self

        def move(d: dict) -> dict:
            return {k: v.to(device, non_blocking=True) for k, v in d.items()}

        return ModelInputs(move(self.cat), move(self.num), move(self.rel_time), move(self.edge_index),
                           self.seed_type, self.num_seeds, self.seed_rows)


class PurchaseHistory(NamedTuple):
    """Each customer's most recent distinct past articles with their pair features.

    Args:
        article: ``(B, N)`` int64 article index per slot, most recent first (``0`` in empty slots).
        mask: ``(B, N)`` bool, the slot holds a real past article.
        features: ``(B, N, NUM_PAIR)`` float32 pair features (zero in empty slots).
        codes: ``(B, N, C)`` int64 the slot article's categorical codes (its attributes).
        value: ``(B, N, NUM_PAIR_VALUE)`` float32 what the pair's lines were worth (zero in empty
            slots; see :func:`models.graph.history.customer_history`).
    """

    article: Tensor
    mask: Tensor
    features: Tensor
    codes: Tensor
    value: Tensor


class PurchaseExtras(NamedTuple):
    """What the purchase loss reads besides queries and keys (see :meth:`models.nn.heads.PurchaseHead.loss`).

    Args:
        article: ``(S',)`` int64 article of each key: row ``i``'s positive for ``i < S``, then any
            catalogue negatives.
        popularity: ``(S', NUM_POPULARITY)`` each key article's :func:`article_popularity` at its seed time.
        history: the ``S`` rows' :class:`PurchaseHistory`.
        bought: ``(S, N)`` bool, the slot's article is among the row's targets (every one is a positive).
        negative: ``(S',)`` bool, the key is a catalogue negative (drawn uniformly from every
            article, a negative for every row), or ``None`` when there are none.
    """

    article: Tensor
    popularity: Tensor
    history: PurchaseHistory
    bought: Tensor
    negative: Tensor | None = None

    def to(self, device: torch.device) -> PurchaseExtras:
        return PurchaseExtras(self.article.to(device), self.popularity.to(device),
                              PurchaseHistory(*(t.to(device) for t in self.history)), self.bought.to(device),
                              None if self.negative is None else self.negative.to(device))

    def padded(self, rows: int, key_rows: int) -> PurchaseExtras:
        """Zero-padded to ``rows`` history rows and ``key_rows`` key rows (padded buckets)."""
        history = PurchaseHistory(*(_pad(t, rows) for t in self.history))
        negative = None if self.negative is None else _pad(self.negative, key_rows)
        return PurchaseExtras(_pad(self.article, key_rows), _pad(self.popularity, key_rows), history,
                              _pad(self.bought, rows), negative)


def _pad(values: Tensor, rows: int) -> Tensor:
    return torch.cat([values, values.new_zeros((rows - values.shape[0], *values.shape[1:]))])
