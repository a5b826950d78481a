"""Where the model benchmark gets its batches: the sampler over a snapshot, or random trees."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from models.graph.features import gather_inputs, table_specs
from models.nn.inputs import ModelInputs, TableSpec
from models.schema import NEIGHBOUR_TYPE, EdgeType
from training.bench.random_batches import BENCH_FANOUTS, random_batches, random_tables, tree_max_sizes


@dataclass
class BatchSource:
    """Batches of one seed type, as training (``uniform``, past seed times) and serving (``last``,
    the snapshot's end time) would sample them.

    Args:
        name: what the batches come from.
        specs: per node type, its feature columns.
        max_sizes: worst-case sizes for :class:`models.graph.buckets.BucketLadder`.
        sample: ``(batch sizes, seed, train) -> inputs``, reproducible from ``seed``.
    """

    name: str
    specs: dict[str, TableSpec]
    max_sizes: Callable[[str, int], tuple[dict[str, int], dict[EdgeType, int]]]
    sample: Callable[[list[int], int, bool], list[ModelInputs]]

    @classmethod
    def open(cls, data: Path | None, seed_type: str, fill: float) -> BatchSource:
        """The snapshot at ``data``, or random trees whose fanouts fill to ``fill`` on average."""
        return cls.random(seed_type, fill) if data is None else cls.snapshot(data, seed_type)

    @classmethod
    def random(cls, seed_type: str, fill: float) -> BatchSource:
        tables = random_tables(20_000, 5_000)

        def sample(sizes: list[int], seed: int, train: bool) -> list[ModelInputs]:
            batches = random_batches(tables, seed_type, sizes, BENCH_FANOUTS, fill, seed)
            return [gather_inputs(tables, b) for b in batches]

        return cls(f"random trees (fill {fill})", table_specs(tables), tree_max_sizes(BENCH_FANOUTS), sample)

    @classmethod
    def snapshot(cls, directory: Path, seed_type: str) -> BatchSource:
        from models.graph.sampler import SamplerConfig, TemporalSampler
        from models.store.snapshot import GraphSnapshot

        snapshot = GraphSnapshot.open(directory)
        samplers = {train: TemporalSampler(snapshot, SamplerConfig(BENCH_FANOUTS, "uniform" if train
                                                                   else "last")) for train in (True, False)}
        rowptr = snapshot.adjacency[(seed_type, NEIGHBOUR_TYPE[seed_type])].rowptr

        def sample(sizes: list[int], seed: int, train: bool) -> list[ModelInputs]:
            gen = torch.Generator().manual_seed(seed)
            batches = []
            for n in sizes:
                # seeds weighted by activity, as the task tables pick recently active entities
                edge = torch.randint(0, int(rowptr[-1]), (n,), generator=gen)
                seeds = torch.searchsorted(rowptr, edge, right=True) - 1
                if train:
                    seed_time = torch.randint(snapshot.min_day + 28, snapshot.end_time + 1, (n,),
                                              generator=gen)
                else:
                    seed_time = torch.full((n,), snapshot.end_time)
                batch = samplers[train].sample(seed_type, seeds, seed_time, gen)
                batches.append(gather_inputs(snapshot, batch))
            return batches

        return cls(str(directory), table_specs(snapshot), samplers[True].max_sizes, sample)
