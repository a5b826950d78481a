"""Training mini-batches: shuffled rows of a task table, sampled into model inputs and targets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from models.graph.features import gather_inputs
from models.graph.history import popular_now, segments, snapshot_history, snapshot_popularity
from models.graph.sampler import TemporalSampler
from models.nn.inputs import ModelInputs, PurchaseExtras
from models.schema import ARTICLE
from models.store.keyed import keyed_csr
from models.store.snapshot import GraphSnapshot
from training.fit import distributed
from training.tasks.table import TaskTable


class Batch(NamedTuple):
    """One training step's arguments (see :meth:`models.runtime.train_step.TrainStep.__call__`).

    Args:
        inputs: the seeds' sampled trees.
        target: ``(B,)`` labels, or for purchase the trees of each seed's positive article.
        log_q: purchase only: ``(B + M,)`` per key (the ``B`` positives, then ``M`` catalogue
            negatives) the log of how often its article at its seed time is expected among a
            batch's keys, in units of one epoch's draws (the sampling correction of the softmax).
        extras: purchase only: the positives' articles and popularity and the rows' own histories
            (:mod:`models.graph.history`, the same computation the server runs).
    """

    inputs: ModelInputs
    target: Tensor | ModelInputs
    log_q: Tensor | None = None
    extras: PurchaseExtras | None = None


class TrainBatches:
    """One epoch of ``(inputs, target)`` batches for :class:`models.runtime.train_step.TrainStep`.

    Every row is sampled at its own seed time, so its tree holds only edges before its cutoff.
    For a link table (purchase) the target is the sampled tree of one article the customer
    bought in the label window, drawn afresh each epoch, at the same seed time: the positive
    of the in-batch softmax, whose negatives are the other rows' positives; ``log_q`` counts how
    often each (article, seed time) was drawn this epoch, i.e. how often it serves as a negative.
    Each batch also brings ``negatives`` articles drawn uniformly from the whole catalogue (at the
    seed times of random rows of the batch), negatives for every row, so articles nobody buys are
    shown to the loss too (see :meth:`models.nn.heads.PurchaseHead.loss`).

    Args:
        snapshot: the graph.
        table: training rows (any number of cutoffs).
        sampler: the temporal sampler (``uniform`` for training).
        seed_type: node type of the table's entities.
        batch_size: rows per batch; the last batch of an epoch may be smaller.
        seed: seeds shuffling, the choice of positives and neighbour sampling.
        max_steps: most batches per epoch (``None``: every row once). When the table holds more
            rows, each epoch draws a fresh random subset of them, from every cutoff alike.
        shard: ``(rank, world)``: with ``world`` processes training together, every process draws
            the same batches (same ``seed``) and keeps its ``rank``-th of ``world`` near-equal parts
            of each, so a step's rows over all processes are the one-process batch and every
            process runs the same number of steps. Default: this process's
            (:func:`training.fit.distributed.shard`; ``(0, 1)`` without ``torchrun``).
        negatives: purchase only: catalogue negatives per batch (split over the processes).
        candidates: purchase only: the rows' histories also hold this many of the best sellers of
            the 7 days before their seed time (:func:`models.graph.history.popular_now`, found once
            per cutoff here).
    """

    def __init__(self, snapshot: GraphSnapshot, table: TaskTable, sampler: TemporalSampler, seed_type: str,
                 batch_size: int, seed: int = 0, max_steps: int | None = None,
                 shard: tuple[int, int] | None = None, negatives: int = 0, candidates: int = 0) -> None:
        self.snapshot = snapshot
        self.table = table
        self.sampler = sampler
        self.seed_type = seed_type
        self.batch_size = batch_size
        self.max_steps = max_steps
        self.rank, self.world = shard or distributed.shard()
        self.rng = np.random.default_rng(seed)  # the same on every rank: the same batches
        self.generator = torch.Generator().manual_seed(seed + self.rank)  # neighbour sampling: its own
        self.entity = torch.from_numpy(table.entity)
        self.seed_time = torch.from_numpy(table.seed_time)
        self.label = None if table.is_link else torch.from_numpy(table.label.astype(np.float32))
        self.negatives = -(-negatives // self.world) if table.is_link else 0  # this rank's share
        # a link table's cutoffs and rows per cutoff, for the catalogue negatives' expected draws
        self.times, self.rows_at = (np.unique(table.seed_time, return_counts=True) if table.is_link
                                    else (None, None))
        self.popular = (popular_now(keyed_csr(snapshot, ARTICLE), torch.from_numpy(self.times), candidates)
                        if table.is_link and candidates else None)

    def __len__(self) -> int:
        steps = -(-len(self.table) // self.batch_size)
        return steps if self.max_steps is None else min(steps, self.max_steps)

    def __iter__(self) -> Iterator[Batch]:
        order = torch.from_numpy(self.rng.permutation(len(self.table))[:len(self) * self.batch_size])
        positives = self.draw_positives() if self.table.is_link else None
        for rows in self.shards(order):
            yield self.batch(rows, positives)

    def shards(self, order: Tensor) -> Iterator[Tensor]:
        """This rank's rows of each batch of the epoch's row ``order`` ``(n,)``: its part of every
        ``batch_size`` rows; a batch smaller than the world is topped up from the epoch's first
        rows, so no rank is left without rows for a step."""
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            if self.world > 1 and len(rows) < self.world:
                rows = torch.cat([rows, order[:self.world - len(rows)]])
            yield rows.tensor_split(self.world)[self.rank]

    def batch(self, rows: Tensor, positives: Positives | None = None) -> Batch:
        """The batch of table rows ``rows`` ``(B,)``; purchase draws ``positives`` if not given."""
        seed_time, entity = self.seed_time.index_select(0, rows), self.entity.index_select(0, rows)
        inputs = self._inputs(self.seed_type, entity, seed_time)
        if not self.table.is_link:
            return Batch(inputs, self.label.index_select(0, rows))
        positives = positives if positives is not None else self.draw_positives()
        article = positives.article.index_select(0, rows)
        key_time, log_q = seed_time, positives.log_q(article, seed_time, self._expected_uniform(seed_time))
        negative = None
        if self.negatives:
            size, gen = (self.negatives,), self.generator
            drawn = torch.randint(self.snapshot.num_nodes[ARTICLE], size, generator=gen)
            at = seed_time.index_select(0, torch.randint(len(rows), size, generator=gen))
            log_q = torch.cat([log_q, positives.log_q(drawn, at, self._expected_uniform(at))])
            negative = torch.arange(len(article) + self.negatives) >= len(article)
            article, key_time = torch.cat([article, drawn]), torch.cat([seed_time, at])
        target = self._inputs(ARTICLE, article, key_time)
        candidates = None
        if self.popular is not None:
            cutoff = torch.from_numpy(np.searchsorted(self.times, seed_time.numpy()))
            candidates = self.popular.index_select(0, cutoff)
        history = snapshot_history(self.snapshot, entity, seed_time, candidates=candidates)
        extras = PurchaseExtras(article, snapshot_popularity(self.snapshot, article, key_time), history,
                                self._bought(rows, history.article), negative)
        return Batch(inputs, target, log_q, extras)

    def _inputs(self, seed_type: str, seeds: Tensor, seed_time: Tensor) -> ModelInputs:
        batch = self.sampler.sample(seed_type, seeds, seed_time, generator=self.generator)
        return gather_inputs(self.snapshot, batch)

    def _bought(self, rows: Tensor, article: Tensor) -> Tensor:
        """``(B, N)`` whether each history article of the rows is among the row's targets."""
        ptr = torch.from_numpy(self.table.target_ptr)
        start = ptr.index_select(0, rows)
        row, offset = segments(ptr.index_select(0, rows + 1) - start)
        items = torch.from_numpy(self.table.target_items).index_select(0, start.index_select(0, row) + offset)
        width = self.snapshot.num_nodes[ARTICLE]
        return torch.isin(torch.arange(len(rows)).unsqueeze(1) * width + article, row * width + items)

    def _expected_uniform(self, seed_time: Tensor) -> Tensor:
        """``(n,)`` how often one article at each seed time is expected among a batch's catalogue
        negatives, in the units of :class:`Positives`' counts (one epoch's draws over the batches)."""
        if not self.negatives:
            return torch.zeros(len(seed_time))
        at = self.rows_at[np.searchsorted(self.times, seed_time.numpy())]
        share = self.negatives * self.world / (self.batch_size * self.snapshot.num_nodes[ARTICLE])
        return torch.from_numpy(at * share)

    def draw_positives(self) -> Positives:
        """Per row, one target article drawn uniformly among the row's targets, with how many rows
        drew each (article, seed time)."""
        counts = self.table.num_targets()
        pick = self.table.target_ptr[:-1] + (self.rng.random(len(counts)) * counts).astype(np.int64)
        article = self.table.target_items[pick]
        width = self.snapshot.num_nodes[ARTICLE]
        pairs, drawn = np.unique(self.table.seed_time * width + article, return_counts=True)
        return Positives(torch.from_numpy(article), pairs, drawn, width)


class Positives(NamedTuple):
    """One epoch's drawn positive per row and how often each (article, seed time) was drawn.

    Args:
        article: ``(n,)`` int64 the positive of each table row.
        pairs: ``(P,)`` sorted ``seed_time * width + article`` of the drawn pairs.
        drawn: ``(P,)`` how many rows drew each pair.
        width: the number of articles.
    """

    article: Tensor
    pairs: np.ndarray
    drawn: np.ndarray
    width: int

    def log_q(self, article: Tensor, seed_time: Tensor, uniform: Tensor) -> Tensor:
        """``(n,)`` float32 log of how often each (article, seed time) is expected among a batch's
        keys: its draws as a positive plus ``uniform``, its expected draws as a catalogue negative."""
        key = seed_time.numpy() * self.width + article.numpy()
        at = np.minimum(np.searchsorted(self.pairs, key), len(self.pairs) - 1)
        drawn = np.where(self.pairs[at] == key, self.drawn[at], 0)
        return torch.from_numpy(np.log(drawn + uniform.numpy()).astype(np.float32))
