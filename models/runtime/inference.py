"""Predictions for one task from its bundle: sample -> gather -> pad -> compiled forward -> head.

The one inference path shared by serving and offline evaluation, so the server's answer for an
id is by construction the offline prediction for the same id and time.

The graph is a :class:`models.store.snapshot.GraphSnapshot` or a :class:`models.store.live.LiveGraph`
(base snapshot + ingested batches). Each call reads one version of a live graph from start to end,
and answers at its ``now_day`` unless given seed times. The purchase task's article keys depend on
the graph and the seed day: :meth:`TaskInference.article_keys_stale` says when they are out of date
and :meth:`TaskInference.refresh_article_keys` recomputes them off the request path and swaps them
in with one assignment; answers never wait for it (until then they rank with the previous keys).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor
from torch._inductor.runtime.cache_dir_utils import cache_dir

from models.graph.buckets import BucketLadder
from models.graph.features import gather_inputs
from models.graph.history import snapshot_history
from models.graph.sampler import SamplerConfig, TemporalSampler
from models.graph.temporal_cache import TemporalCache
from models.nn.inputs import ModelInputs, PurchaseHistory, TableSpec
from models.nn.model import TaskModel
from models.nn.ranking import RankParts
from models.registry import TASKS
from models.runtime.bundle import BundleConfig, compile_cache_dirs, compile_cache_path, load_bundle
from models.runtime.compile import CompileConfig, Predictor, compiled_graph_count
from models.runtime.compile_cache import CompileCacheRecorder, load_compile_cache
from models.runtime.kernel_files import repair_kernel_cache
from models.runtime.serving_state import (
    Serving,
    ServingGraph,
    current_version,
    graph_version,
)
from models.schema import ARTICLE
from models.store.snapshot import GraphSnapshot

if TYPE_CHECKING:
    from models.store.live import LiveGraph

log = logging.getLogger(__name__)

# Rows ranked at a time: a batch scorer's (B, A) score matrix (1024 x 105k articles, 430 MB) was
# page-faulted afresh for every batch; in chunks of 128 rows ranking took 27 % less CPU at full size.
RANK_ROWS = 128
# What a worker keeps of its answers' temporal features (models.graph.temporal_cache): ~350,000
# nodes; the demo graph's 22,000 fit many times, a full-size one's hot nodes do.
ANSWER_TEMPORAL_BYTES = 64 << 20


@dataclass
class WarmupReport:
    """What :meth:`TaskInference.warm_up` did: seconds, buckets run, and whether the cache hit."""

    seconds: float
    buckets: int
    cache_hit: bool
    cache_saved: bool = False


@dataclass
class InferenceResult:
    """Predictions for a batch of ``B`` entities.

    Args:
        values: ``(B,)`` probabilities or values (``None`` for a ranking task).
        scores: ``(B, k)`` ranking scores, descending (``None`` otherwise).
        articles: ``(B, k)`` int64 article indices matching ``scores``.
        extras: the task's answer fields (:class:`models.registry.AnswerField`) by name, ``(B,)`` each.
        bucket: the shape bucket the batch ran in (``"eager"``/``"dynamic"`` when not padded).
        padding_ratio: share of the bucket's node rows that were padding.
        stage_seconds: wall seconds of ``sample``, ``forward`` and ``rank``.
        graph: the graph (version) the answer was read from: its ``ids`` name the ``articles``.
    """

    values: Tensor | None = None
    scores: Tensor | None = None
    articles: Tensor | None = None
    extras: dict[str, Tensor] = field(default_factory=dict)
    bucket: str = ""
    padding_ratio: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    graph: Any = None


def fitted_ladder(snapshot: GraphSnapshot, sampler: TemporalSampler, seed_type: str, max_seeds: int,
                  seed: int = 0, sizes: tuple[int, ...] | None = None) -> BucketLadder:
    """A bucket ladder shaped like real batches at the snapshot's end time (deterministic per seed).

    ``sizes``: the batch sizes sampled (default: every power of two up to ``max_seeds``, what a
    server sees); a batch scorer that runs full batches of one size samples only that size and
    gets a short ladder, so few buckets are compiled.
    """
    generator = torch.Generator().manual_seed(seed)
    num = snapshot.num_nodes[seed_type]
    if sizes is None:
        sizes = tuple(sorted({min(2**i, max_seeds) for i in range(max_seeds.bit_length() + 1)}))
    samples = []
    for size in sizes:
        for _ in range(4):
            seeds = torch.randint(num, (size,), generator=generator)
            times = torch.full((size,), snapshot.end_time, dtype=torch.long)
            samples.append(gather_inputs(snapshot, sampler.sample(seed_type, seeds, times, graph=snapshot)))
    return BucketLadder.fitted(samples, sampler.max_sizes, seed_type, max_seeds)


class TaskInference(ServingGraph):
    """Answers batches of entity indices for one task.

    Args:
        config: the bundle's config.
        model: the trained model.
        snapshot: the graph the predictions are made on: a snapshot, or a live graph whose current
            version each call reads (see the module docstring).
        compile: ``"none"``, ``"dynamic"`` or ``"buckets"``.
        device: where the model runs.
        cuda_graphs: ``mode="reduce-overhead"`` over the buckets (CUDA only).
        max_batch_size: largest batch :meth:`run` is given (sets the bucket ladder).
        batch_sizes: the batch sizes :meth:`run` is mostly given, which the ladder is fitted to
            (``None``: every power of two up to ``max_batch_size``, or the bundle's own ladder).
        bundle_dir: the bundle, whose compile-cache artifacts are read and written (``None``: no cache).
        cache_dir: where to keep compile caches instead of beside the bundle (see
            :func:`models.runtime.bundle.compile_cache_dirs`; ``None``: beside it when writable).
    """

    def __init__(self, config: BundleConfig, model: TaskModel, snapshot: GraphSnapshot | LiveGraph,
                 compile: str = "buckets", device: torch.device | str = "cpu", cuda_graphs: bool = False,
                 max_batch_size: int = 32, bundle_dir: Path | None = None,
                 cache_dir: Path | None = None, batch_sizes: tuple[int, ...] | None = None) -> None:
        self.config = config
        self.task = config.task
        self.spec = TASKS[config.task]
        self.answer_fields: dict[str, Callable[..., Tensor]] = {
            f.name: self.spec.resolve(f.compute) for f in self.spec.answer_fields}
        self._serving = Serving(snapshot, None)
        self.device = torch.device(device)
        self.sampler = TemporalSampler(getattr(snapshot, "base", snapshot), SamplerConfig(
            config.sampler.fanouts, "last", config.sampler.per_day))
        self.entity_type = model.head.seed_types[0]
        self.model = model.to(self.device).eval()
        self.compile_config = CompileConfig(compile, mode="reduce-overhead" if cuda_graphs else None)
        self.ladders = self._ladders(max_batch_size, batch_sizes) if compile == "buckets" else {}
        self.predictor = Predictor(self.model, self.compile_config, list(self.ladders.values()), self.device,
                                   seed_types=(self.entity_type,))
        self.bundle_dir = bundle_dir
        self.cache_dir = cache_dir
        self.article_keys: Tensor | None = None  # the last keys refreshed
        self.popularity: dict[tuple, Tensor] = {}  # per graph version, every article's recent sales
        self._popular: tuple[tuple, Tensor] | None = None  # the last (graph version, day)'s best sellers
        # The article keys' forward when compiled for them (models.runtime.key_compile), else the model.
        self.key_forward: Callable[[ModelInputs], Tensor] | None = None
        self.key_temporal = TemporalCache()  # the keys' temporal features, kept across graph versions
        # The answers' temporal features at the graph's end, kept across requests and graph versions.
        self.answer_temporal = TemporalCache(ANSWER_TEMPORAL_BYTES)
        self._answered_version: tuple | None = None  # the graph version prepare last read
        self._graphs_after_warmup: int | None = None

    @classmethod
    def from_bundle(cls, bundle_dir: Path, snapshot: GraphSnapshot | LiveGraph, compile: str = "buckets",
                    device: torch.device | str = "cpu", cuda_graphs: bool = False,
                    max_batch_size: int = 32, cache_dir: Path | None = None,
                    batch_sizes: tuple[int, ...] | None = None) -> TaskInference:
        """Load ``bundle_dir`` (raises :class:`models.runtime.bundle.BundleError`) and set up inference."""
        config, model = load_bundle(Path(bundle_dir), snapshot, device)
        return cls(config, model, snapshot, compile, device, cuda_graphs, max_batch_size, Path(bundle_dir),
                   cache_dir, batch_sizes)

    def _ladders(self, max_batch_size: int, batch_sizes: tuple[int, ...] | None) -> dict[str, BucketLadder]:
        # Only the entity's ladder is compiled: purchase article keys are computed once, eagerly.
        if (batch_sizes is None and max_batch_size == self.config.max_batch_size
                and self.entity_type in self.config.ladders):
            return {self.entity_type: self.config.ladders[self.entity_type]}
        ladder = fitted_ladder(self.current(), self.sampler, self.entity_type, max_batch_size,
                               sizes=batch_sizes)
        return {self.entity_type: ladder}

    def warm_up(self) -> WarmupReport:
        """Load the compile cache, compile and run every bucket once, keep the nodes' temporal
        features at the graph's end, precompute article keys."""
        start = time.perf_counter()
        hit, saved, path = False, False, None
        if self.compile_config.strategy != "none":
            repair_kernel_cache(Path(cache_dir()).resolve())
        if self.compile_config.strategy != "none" and self.bundle_dir is not None:
            reads, write = compile_cache_dirs(self.bundle_dir, self.config, self.cache_dir)
            key = (self.device, self.compile_config.strategy, self.compile_config.mode, self.ladders)
            path = compile_cache_path(write, *key)
            hit = any(load_compile_cache(compile_cache_path(d, *key), self.device) for d in reads)
        recorder = CompileCacheRecorder() if path is not None and not hit else None
        specs: dict[str, TableSpec] = self.config.specs
        runs = self.predictor.warmup({t: (len(s.cardinalities), s.num_numeric) for t, s in specs.items()})
        graph = self.current()
        self.answer_temporal.fill(graph, graph.end_time)
        if self.spec.ranks:
            self.refresh_article_keys()
        if recorder is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                saved = recorder.save(path, self.device)
            except OSError as exc:  # a read-only bundle directory only costs the next start a cold compile
                log.warning("compile cache not saved to %s: %s", path, exc)
        self._graphs_after_warmup = compiled_graph_count()
        return WarmupReport(time.perf_counter() - start, runs, hit, saved)

    def recompiles(self) -> int:
        """Graphs compiled since :meth:`warm_up` finished (0 when the buckets cover every batch)."""
        if self._graphs_after_warmup is None:
            return 0
        return compiled_graph_count() - self._graphs_after_warmup

    @torch.inference_mode()
    def prepare(self, entity: Tensor, seed_time: Tensor | None = None, graph: Any = None) -> ModelInputs:
        """The sampled and gathered inputs :meth:`run` starts from, for ``entity`` ``(B,)`` at
        ``seed_time`` (default: the graph's end); a batch scorer builds the next batch's in
        another thread while the model runs. ``graph``: the version to read (default: the current one)."""
        graph = self.current() if graph is None else graph
        if seed_time is None:
            seed_time = torch.full_like(entity, graph.end_time)
        version = graph_version(graph)
        if version != self._answered_version:  # a new version: its moved nodes in one computation
            self.answer_temporal.refresh(graph, version[2])
            self._answered_version = version
        return gather_inputs(graph, self.sampler.sample(self.entity_type, entity, seed_time, graph=graph),
                             self.answer_temporal)

    def _ranking_rows(self, entity: Tensor, seed_time: Tensor, output: Tensor, graph: Any,
                      keys: Tensor) -> Iterator[tuple[Tensor, PurchaseHistory]]:
        """Queries and histories in slices of ``RANK_ROWS`` (bounds the ``(rows, A)`` score matrix)."""
        times = seed_time.unique()
        num_articles = graph.num_nodes[ARTICLE]
        table = self.popularity.get((*graph_version(graph)[:2], int(times[0]))) if len(times) == 1 else None
        if table is not None and table.shape[0] < num_articles:
            table = None  # computed before articles were added
        history = snapshot_history(graph, entity, seed_time, table, self.popular_candidates(graph, seed_time))
        if keys.shape[0] < num_articles:  # keys older than the newest articles: those rank once refreshed
            history = history._replace(mask=history.mask & (history.article < keys.shape[0]))
        history = PurchaseHistory(*(t.to(self.device) for t in history))
        for i in range(0, len(entity), RANK_ROWS):
            yield output[i:i + RANK_ROWS], PurchaseHistory(*(t[i:i + RANK_ROWS] for t in history))

    @torch.inference_mode()
    def rank_parts(self, entity: Tensor, seed_time: Tensor, article_keys: Tensor, k: int = 12) -> RankParts:
        """The purchase ranking of ``entity`` ``(B,)`` at ``seed_time`` ``(B,)`` in the two parts
        :func:`models.nn.ranking.merge_ranked` merges for any repeat shift (see
        :meth:`models.nn.heads.PurchaseHead.rank_parts`); ``article_keys`` as for :meth:`run`."""
        graph = self.current()
        output = self.predictor(self.prepare(entity, seed_time, graph))
        parts = [self.model.head.rank_parts(query, article_keys, k, history)
                 for query, history in self._ranking_rows(entity, seed_time, output, graph, article_keys)]
        return RankParts(*(t.float().cpu() if t.is_floating_point() else t.cpu()
                           for t in RankParts.cat(parts)))

    @torch.inference_mode()
    def run(self, entity: Tensor, k: int = 12, seed_time: Tensor | None = None,
            article_keys: Tensor | None = None, inputs: ModelInputs | None = None) -> InferenceResult:
        """Predict for ``entity`` ``(B,)`` dense indices at ``seed_time`` (default: the graph's end,
        a live graph's ``now_day``), reading one version of the graph throughout.

        Args:
            entity: ``(B,)`` int64 indices of ``entity_type`` nodes.
            k: purchase list length.
            seed_time: ``(B,)`` int64 seed times; defaults to the graph's ``end_time`` for all.
            article_keys: purchase keys for another seed time (see :meth:`compute_article_keys`).
            inputs: :meth:`prepare`'s result for the same ``entity`` and ``seed_time`` (``None``:
                prepared here).
        """
        return self._run(self._serving, None, entity, k, seed_time, article_keys, inputs)

    @torch.inference_mode()
    def run_ids(self, ids: list[str], k: int = 12) -> tuple[np.ndarray, InferenceResult | None]:
        """Look ``ids`` up and answer the known ones at the graph's end, both on one graph version
        (a live graph's, or the one :meth:`use_graph` swapped in meanwhile: never a mix).

        Returns:
            ``(K,)`` int64 dense indices (``-1``: unknown id) and the result for the known ids in
            order (``None`` if none is known); map article indices with ``result.graph.ids``.
        """
        serving = self._serving
        graph = current_version(serving.graph)
        index = graph.lookup(self.entity_type, list(ids))
        known = index[index >= 0]
        if not len(known):
            return index, None
        return index, self._run(serving, graph, torch.from_numpy(known), k)

    def _run(self, serving: Serving, graph: Any, entity: Tensor, k: int = 12, seed_time: Tensor | None = None,
             article_keys: Tensor | None = None, inputs: ModelInputs | None = None) -> InferenceResult:
        t0 = time.perf_counter()
        if self.spec.ranks and article_keys is None and self.follow_published_keys():
            serving = self._serving  # the graph owner's newer keys (one mapped read when none)
        graph = current_version(serving.graph) if graph is None else graph
        if self.spec.ranks and article_keys is None and (
                serving.keys is None or serving.keys.version[0] is not getattr(graph, "base", graph)):
            # First use without a warm-up, or a shared graph that moved to a compacted snapshot (its
            # article indices differ from the keys'): computed once, here.
            self.refresh_article_keys()
            serving = self._serving
        if seed_time is None:
            seed_time = torch.full_like(entity, graph.end_time)
        if inputs is None:
            inputs = self.prepare(entity, seed_time, graph)
        bucket = self.predictor.bucket_for(inputs)
        t1 = time.perf_counter()
        output = self.predictor(inputs)
        t2 = time.perf_counter()
        result = InferenceResult(bucket=bucket.name if bucket else self.compile_config.strategy, graph=graph)
        if bucket is not None:
            result.padding_ratio = 1.0 - sum(inputs.num_nodes().values()) / sum(bucket.nodes.values())
        if self.spec.ranks:
            keys = article_keys if article_keys is not None else serving.keys.keys
            ranked = [self.model.head.rank(query, keys, k, history)
                      for query, history in self._ranking_rows(entity, seed_time, output, graph, keys)]
            result.scores = torch.cat([scores for scores, _ in ranked]).float().cpu()
            result.articles = torch.cat([articles for _, articles in ranked]).cpu()
        else:
            result.values = self.model.predict(output).float().cpu()
        result.extras = {name: compute(graph, self.entity_type, entity, seed_time)
                         for name, compute in self.answer_fields.items()}
        t3 = time.perf_counter()
        result.stage_seconds = {"sample": t1 - t0, "forward": t2 - t1, "rank": t3 - t2}
        return result
