"""Random but valid feature tables and sampled trees, for tests and benchmarks without data.

The trees have the sampler's exact layout: seeds first, then each hop's children appended per
node type, edges ``(child, parent)`` per edge type, node times strictly before the seed time.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from models.feature_definitions import HISTORY_SLOTS, NUM_PAIR, NUM_PAIR_VALUE, NUM_POPULARITY
from models.graph.buckets import BucketLadder, MaxSizes
from models.graph.sampler import max_tree_sizes
from models.graph.subgraph import SubgraphBatch
from models.nn.inputs import PurchaseExtras, PurchaseHistory
from models.registry import BINARY, TASKS
from models.schema import (
    ARTICLE,
    ARTICLE_CATEGORICAL,
    CUSTOMER,
    CUSTOMER_CATEGORICAL,
    EDGE_TYPES,
    INCOMING,
    NEIGHBOUR_TYPE,
)

BENCH_FANOUTS = (12, 8)
"""The fanouts of the benchmarks' batches (BENCHMARKS.md's sampler and compile figures): one hop
wider than what training.fit samples (:class:`models.graph.sampler.SamplerConfig`'s default)."""


@dataclass
class RandomTables:
    """Snapshot-shaped feature tables (see :class:`models.graph.features.FeatureSource`).

    Args:
        categorical: per node type ``(N_t, C_t)`` int64 codes in ``0..cardinality``.
        numeric: per node type ``(N_t, F_t)`` float32.
        cardinalities: per node type, per column, the largest code.
    """

    categorical: dict[str, Tensor]
    numeric: dict[str, Tensor]
    cardinalities: dict[str, tuple[int, ...]]
    temporal: ClassVar[bool] = False  # no edges: the inputs carry no temporal aggregates


def random_tables(num_customers: int = 2000, num_articles: int = 500, seed: int = 0) -> RandomTables:
    """Customers with the schema's categorical columns and ``age`` + ``age_missing``; articles
    with categorical columns only (as the H&M schema has)."""
    gen = torch.Generator().manual_seed(seed)
    cards = {
        CUSTOMER: tuple(int(c) for c in torch.randint(2, 6, (len(CUSTOMER_CATEGORICAL),), generator=gen)),
        ARTICLE: tuple(int(c) for c in torch.randint(5, 60, (len(ARTICLE_CATEGORICAL),), generator=gen)),
    }
    sizes = {CUSTOMER: num_customers, ARTICLE: num_articles}
    categorical = {
        t: torch.stack([torch.randint(0, c + 1, (sizes[t],), generator=gen) for c in cards[t]], dim=1)
        for t in sizes
    }
    age = torch.randn(num_customers, 1, generator=gen)
    missing = (torch.rand(num_customers, 1, generator=gen) < 0.1).float()
    numeric = {CUSTOMER: torch.cat([age * (1 - missing), missing], dim=1),
               ARTICLE: torch.zeros(num_articles, 0)}
    return RandomTables(categorical, numeric, cards)


def random_batch(tables: RandomTables, seed_type: str, num_seeds: int,
                 fanouts: tuple[int, ...] = BENCH_FANOUTS, fill: float = 0.5,
                 generator: torch.Generator | None = None) -> SubgraphBatch:
    """One batch of disjoint trees; each node has ``Binomial(fanout, fill)`` children.

    Args:
        tables: node counts come from here.
        seed_type: node type of the seeds.
        num_seeds: number of seeds ``B``.
        fanouts: children per node at each hop, at most.
        fill: expected fraction of each fanout that is sampled (``1``: the worst case).
        generator: random source.
    """
    gen = generator or torch.Generator().manual_seed(0)
    sizes = {t: v.shape[0] for t, v in tables.categorical.items()}
    seeds = torch.randint(0, sizes[seed_type], (num_seeds,), generator=gen)
    seed_time = torch.randint(18_000, 18_500, (num_seeds,), generator=gen)
    parts = {t: ([], [], []) for t in sizes}  # ids, times, tree index
    for part, value in zip(parts[seed_type], (seeds, seed_time, torch.arange(num_seeds)), strict=True):
        part.append(value)
    edges = {e: [] for e in EDGE_TYPES}
    count = {t: 0 for t in sizes}
    count[seed_type] = num_seeds
    parent_type, parent_tree, parent_local = seed_type, torch.arange(num_seeds), torch.arange(num_seeds)
    for fanout in fanouts:
        child_type = NEIGHBOUR_TYPE[parent_type]
        num_children = torch.binomial(torch.full((parent_tree.numel(),), float(fanout)),
                                      torch.full((parent_tree.numel(),), fill), generator=gen).long()
        parent = torch.repeat_interleave(torch.arange(parent_tree.numel()), num_children)
        child_tree = parent_tree[parent]
        child_ids = torch.randint(0, sizes[child_type], (parent.numel(),), generator=gen)
        child_time = seed_time[child_tree] - 1 - torch.randint(0, 365, (parent.numel(),), generator=gen)
        child_local = torch.arange(count[child_type], count[child_type] + parent.numel())
        for part, value in zip(parts[child_type], (child_ids, child_time, child_tree), strict=True):
            part.append(value)
        edges[INCOMING[parent_type]].append(torch.stack([child_local, parent_local[parent]]))
        count[child_type] += parent.numel()
        parent_type, parent_tree, parent_local = child_type, child_tree, child_local

    def cat(values: list[Tensor]) -> Tensor:
        return torch.cat(values) if values else torch.zeros(0, dtype=torch.long)

    return SubgraphBatch(
        seed_type=seed_type,
        num_seeds=num_seeds,
        node_ids={t: cat(p[0]) for t, p in parts.items()},
        node_time={t: cat(p[1]) for t, p in parts.items()},
        batch={t: cat(p[2]) for t, p in parts.items()},
        seed_time=seed_time,
        edge_index={e: torch.cat(v, dim=1) if v else torch.zeros(2, 0, dtype=torch.long)
                    for e, v in edges.items()},
    )


def tree_max_sizes(fanouts: tuple[int, ...] = BENCH_FANOUTS) -> MaxSizes:
    """Worst case of :func:`random_batch` (every fanout full): the sampler's own worst case."""
    return functools.partial(max_tree_sizes, fanouts)


def tree_ladder(seed_type: str, max_seeds: int, factor: float = 2.0,
                fanouts: tuple[int, ...] = BENCH_FANOUTS) -> BucketLadder:
    """The geometric bucket ladder over :func:`tree_max_sizes` (benchmarks and tests on random trees)."""
    return BucketLadder.geometric(tree_max_sizes(fanouts), seed_type, max_seeds, factor)


def random_batches(tables: RandomTables, seed_type: str, batch_sizes: list[int],
                   fanouts: tuple[int, ...] = BENCH_FANOUTS, fill: float = 0.5, seed: int = 0
                   ) -> Iterator[SubgraphBatch]:
    """One :func:`random_batch` per entry of ``batch_sizes``, reproducible from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    for num_seeds in batch_sizes:
        yield random_batch(tables, seed_type, num_seeds, fanouts, fill, gen)


def random_targets(task: str, num_seeds: int, seed: int = 0) -> Tensor:
    """``(B,)`` float32 labels of the right kind: 0/1 for a binary task, else >= 0 (ranking has none)."""
    gen = torch.Generator().manual_seed(seed)
    if TASKS[task].task_type == BINARY:
        return (torch.rand(num_seeds, generator=gen) < 0.3).float()
    return torch.rand(num_seeds, generator=gen).pow(3) * 2.0


def random_purchase_extras(tables: RandomTables, num_seeds: int, seed: int = 0) -> PurchaseExtras:
    """Random purchase-loss extras for ``num_seeds`` rows: histories with a random number of filled
    slots (distinct articles of ``tables``), about half the positives among their row's history."""
    gen = torch.Generator().manual_seed(seed)
    num_articles = int(tables.categorical[ARTICLE].shape[0])
    slots = min(HISTORY_SLOTS, num_articles)
    article = torch.stack([torch.randperm(num_articles, generator=gen)[:slots] for _ in range(num_seeds)])
    mask = torch.arange(slots) < torch.randint(0, slots + 1, (num_seeds, 1), generator=gen)
    features = torch.rand(num_seeds, slots, NUM_PAIR, generator=gen) * mask.unsqueeze(-1)
    positive = torch.randint(num_articles, (num_seeds,), generator=gen)
    own = (torch.rand(num_seeds, generator=gen) < 0.5) & mask[:, 0]
    positive = torch.where(own, article[:, 0], positive)
    popularity = torch.rand(num_seeds, NUM_POPULARITY, generator=gen)
    article = article * mask
    codes = tables.categorical[ARTICLE][article] * mask.unsqueeze(-1)
    bought = (torch.rand(num_seeds, slots, generator=gen) < 0.2) & mask
    bought[:, 0] |= own
    value = torch.rand(num_seeds, slots, NUM_PAIR_VALUE, generator=gen) * mask.unsqueeze(-1)
    history = PurchaseHistory(article, mask, features, codes, value)
    return PurchaseExtras(positive, popularity, history, bought)
