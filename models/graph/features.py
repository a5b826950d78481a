"""Model inputs: the feature rows and graph of one sampled batch, gathered from a snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from models.feature_definitions import NUM_TEMPORAL
from models.graph.subgraph import SubgraphBatch
from models.graph.temporal_cache import TemporalCache
from models.graph.temporal_features import temporal_features
from models.nn.inputs import ModelInputs, TableSpec


class FeatureSource(Protocol):
    """Anything holding per-type feature tables, e.g. :class:`models.store.snapshot.GraphSnapshot`
    (``temporal``) or the random tables of :mod:`training.bench.random_batches` (not ``temporal``)."""

    categorical: Mapping[str, Tensor | np.ndarray]
    numeric: Mapping[str, Tensor | np.ndarray]
    cardinalities: Mapping[str, tuple[int, ...]]

    @property
    def temporal(self) -> bool:
        """Whether the source holds time-stamped edges, so that every node also gets the
        :data:`models.feature_definitions.NUM_TEMPORAL` aggregates of
        :mod:`models.graph.temporal_features` (a wider numeric input)."""
        ...


def table_specs(source: FeatureSource) -> dict[str, TableSpec]:
    """Per node type, the :class:`TableSpec` of ``source``'s feature tables (with the temporal
    aggregates of :mod:`models.graph.temporal_features` when ``source.temporal``)."""
    extra = NUM_TEMPORAL if source.temporal else 0
    return {
        t: TableSpec(tuple(int(c) for c in source.cardinalities[t]), int(source.numeric[t].shape[1]) + extra)
        for t in source.categorical
    }


def _take(table: Tensor | np.ndarray, index: Tensor) -> Tensor:
    if isinstance(table, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(table[index.numpy()]))
    return table.index_select(0, index)


def _temporal(source: FeatureSource, batch: SubgraphBatch, node_type: str,
              cache: TemporalCache | None) -> Tensor:
    times = batch.seed_time
    if cache is not None and times.numel() and bool((times == times[0]).all()):
        return cache.features(source, node_type, batch.node_ids[node_type], int(times[0]))
    return temporal_features(source, node_type, batch.node_ids[node_type],
                             times.index_select(0, batch.batch[node_type]))


def gather_inputs(source: FeatureSource, batch: SubgraphBatch,
                  cache: TemporalCache | None = None) -> ModelInputs:
    """Look up the feature rows of every sampled node.

    Args:
        source: feature tables indexed by the batch's global node ids (a snapshot).
        batch: the sampler's output.
        cache: temporal features kept between versions of a live graph, for a batch whose trees all
            share one seed time (:meth:`models.graph.sampler.TemporalSampler.sample_shared`).

    Returns:
        Unpadded inputs with ``seed_rows == num_seeds``.
    """
    rel_time = batch.rel_time()
    num = {t: _take(source.numeric[t], ids).float() for t, ids in batch.node_ids.items()}
    if source.temporal:
        # Each node's aggregates are taken at its tree's seed time: the model sees, for every node,
        # its history up to the prediction time and nothing after.
        num = {t: torch.cat([v, _temporal(source, batch, t, cache)], dim=1) for t, v in num.items()}
    return ModelInputs(
        cat={t: _take(source.categorical[t], ids) for t, ids in batch.node_ids.items()},
        num=num,
        rel_time={t: rel_time[t].float() for t in batch.node_ids},
        edge_index=dict(batch.edge_index),
        seed_type=batch.seed_type,
        num_seeds=batch.num_seeds,
        seed_rows=batch.num_seeds,
    )
