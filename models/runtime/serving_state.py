"""What a :class:`models.runtime.inference.TaskInference` answers from, swapped as one reference.

A call reads :class:`Serving` once: the graph (a snapshot or a live graph, whose current version it
then reads) together with the purchase article keys computed for that graph. Refreshing the keys
or switching to another graph (a compacted snapshot) replaces the pair, never half of it
(:class:`ServingGraph`, the part of ``TaskInference`` that manages it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from models.graph.features import gather_inputs
from models.graph.history import popular_now, snapshot_popularity
from models.graph.temporal_cache import TemporalCache
from models.nn.inputs import ModelInputs
from models.schema import ARTICLE
from models.store.keyed import keyed_csr

# Articles per eager forward when recomputing the keys. The chunk's trees are sampled together
# (TemporalSampler.sample_shared: a buyer or article several trees hold is one node), so larger
# chunks share more; on the demo catalogue (2,000 articles, one thread) a refresh took 57-59 ms of
# CPU in one chunk, 57-61 ms in chunks of 1,024, 69-70 ms in chunks of 512, against 82-85 ms for
# disjoint trees in chunks of 512 (the best chunk for those). No chunking changes a key.
ARTICLE_KEY_BATCH = 2048


@dataclass(frozen=True)
class ArticleKeys:
    """Purchase article keys and every article's popularity, for one graph version and seed day.

    Args:
        keys: ``(A, D + 1)`` keys (see :meth:`models.runtime.inference.TaskInference.compute_article_keys`).
        popularity: ``(A, NUM_POPULARITY)`` every article's recent sales at ``version``'s seed day.
        version: ``(base snapshot, log sequence, seed day)`` they were computed for.
    """

    keys: Tensor
    popularity: Tensor
    version: tuple[Any, int, int]


@dataclass(frozen=True)
class Serving:
    """The graph answers come from and its article keys (``None``: not computed yet, or no ranking)."""

    graph: Any
    keys: ArticleKeys | None


def current_version(graph: Any) -> Any:
    """A snapshot itself, or a live graph's current version (:meth:`models.store.live.LiveGraph.view`)."""
    view = getattr(graph, "view", None)
    return view() if view is not None else graph


def graph_version(graph: Any) -> tuple[Any, int, int]:
    """``(base snapshot, log sequence, seed day)`` of a snapshot or a live graph's version: what the
    article keys depend on."""
    return getattr(graph, "base", graph), int(getattr(graph, "sequence", 0)), int(graph.end_time)


class ServingGraph:
    """The graph and article-key methods of :class:`models.runtime.inference.TaskInference` (which
    sets ``_serving``, ``task``, ``spec``, ``bundle_dir``, ``model``, ``sampler``, ``device``,
    ``popularity``, ``article_keys``, ``key_forward``, ``key_temporal``, ``_popular``)."""

    _serving: Serving
    key_temporal: TemporalCache
    _popular: tuple[tuple, Tensor] | None

    @property
    def snapshot(self) -> Any:
        """The graph answers are read from (a snapshot or a live graph); see :meth:`use_graph`."""
        return self._serving.graph

    def current(self) -> Any:
        """The graph a call reads: the snapshot, or the live graph's current version."""
        return current_version(self._serving.graph)

    def use_graph(self, graph: Any) -> None:
        """Answer from ``graph`` from now on, e.g. a live graph over a compacted snapshot version
        caught up with the log. Its article keys are computed first (off the request path), then the
        graph and its keys are swapped in with one assignment: a call reads the old pair or the new
        one. Node indices of the new graph may differ (new nodes take their sorted place in a
        compacted snapshot): map ids with :meth:`run_ids` or the result's ``graph``."""
        keys = self._keys_for(graph, None) if self.spec.ranks else None
        self._serving = Serving(graph, keys)

    def popular_candidates(self, graph: Any, seed_time: Tensor) -> Tensor | None:
        """``(B, P)`` the best sellers a purchase model also ranks for rows at ``seed_time`` ``(B,)``
        on ``graph`` (``None``: its bundle reads none, see :func:`models.graph.history.popular_now`);
        a server's answers share one seed day, whose list is kept per graph version."""
        count = self.model.config.popular_candidates
        if not count:
            return None
        times, inverse = seed_time.unique(return_inverse=True)
        key = (*graph_version(graph)[:2], tuple(times.tolist()), count)
        held = self._popular
        if held is None or held[0] != key:
            held = self._popular = (key, popular_now(keyed_csr(graph, ARTICLE), times, count))
        return held[1].index_select(0, inverse)

    def keys_version(self) -> tuple[Any, int, int] | None:
        """``(base snapshot, log sequence, seed day)`` the served article keys were computed for
        (``None``: none yet, or a task without keys)."""
        keys = self._serving.keys
        return None if keys is None else keys.version

    def follow_published_keys(self) -> bool:
        """Adopt newer article keys the graph's owner published for this model (a shared graph's
        :meth:`models.store.shared_graph.SharedGraph.published_keys`); whether it did."""
        published = getattr(self._serving.graph, "published_keys", None)
        if published is None or not self.spec.ranks or self.bundle_dir is None:
            return False
        found = published(self.task, self.bundle_dir)
        if found is None:
            return False
        self.adopt_article_keys(ArticleKeys(*found))
        return True

    def adopt_article_keys(self, keys: ArticleKeys) -> None:
        """Answer with ``keys``, computed elsewhere (the graph owner) with this model for a version of
        this graph (same base snapshot), from the next call on."""
        keys = ArticleKeys(keys.keys.to(self.device), keys.popularity, keys.version)
        self.article_keys = keys.keys
        self.popularity = {keys.version: keys.popularity}
        self._serving = Serving(self._serving.graph, keys)

    def article_keys_stale(self) -> bool:
        """Whether the graph or the seed day moved since the article keys were computed (cheap;
        always ``False`` for a task without keys)."""
        serving = self._serving
        if not self.spec.ranks:
            return False
        return serving.keys is None or serving.keys.version != graph_version(current_version(serving.graph))

    def refresh_article_keys(self) -> bool:
        """Recompute the article keys of the current graph version and seed day, then swap them in
        atomically (call it off the request path; answers go on with the old keys meanwhile).

        Returns:
            ``False`` (nothing done) for a task without keys or keys that are up to date.
        """
        serving = self._serving
        if not self.spec.ranks or not self.article_keys_stale():
            return False
        keys = self._keys_for(serving.graph, serving.keys)
        if self._serving.graph is serving.graph:  # not swapped meanwhile
            self._serving = Serving(serving.graph, keys)
        return True

    def _keys_for(self, graph: Any, old: ArticleKeys | None) -> ArticleKeys:
        version = current_version(graph)
        keys = self.compute_article_keys(version.end_time, version)
        self.article_keys = keys
        return ArticleKeys(keys, self.popularity[graph_version(version)], graph_version(version))

    @torch.inference_mode()
    def compute_article_keys(self, seed_time: int, graph: Any = None) -> Tensor:
        """``(A, D + 1)`` purchase keys of every article at ``seed_time``, computed in chunks (eagerly,
        or by ``key_forward`` once :mod:`models.runtime.key_compile` compiled it), their bias including
        the popularity prior (:meth:`models.nn.heads.PurchaseHead.with_prior`).

        ``graph``: the graph (version) to read (default: the current one)."""
        self.model.eval()
        forward = self.key_forward or self.model
        graph = self.current() if graph is None else graph
        keys = []
        num = graph.num_nodes[ARTICLE]
        everything = torch.arange(num)
        popularity = snapshot_popularity(graph, everything, torch.full_like(everything, seed_time))
        version = graph_version(graph)
        self.popularity = {(*version[:2], seed_time): popularity}
        # Chunks of equal size (within one) of at most ARTICLE_KEY_BATCH, their trees sharing what
        # they hold alike: the cost per article is lowest around that size (docs/fresh-graph.md).
        for seeds in everything.tensor_split(max(1, -(-num // ARTICLE_KEY_BATCH))):
            output = forward(self.article_key_inputs(seeds, seed_time, graph, self.key_temporal))
            keys.append(self.model.head.with_prior(output, popularity[seeds].to(self.device)))
        return torch.cat(keys)

    def article_key_inputs(self, seeds: Tensor, seed_time: int, graph: Any,
                           cache: TemporalCache | None = None) -> ModelInputs:
        """The model's inputs for the article keys of ``seeds`` (one chunk, their trees sampled together;
        ``cache``: the temporal features kept from the last versions, :mod:`models.graph.temporal_cache`)."""
        sampled = self.sampler.sample_shared(ARTICLE, seeds, seed_time, graph=graph)
        return gather_inputs(graph, sampled, cache).to(self.device)
