"""What a :class:`models.runtime.inference.TaskInference` answers from, swapped as one reference.

A call reads :class:`Serving` once: the graph (a snapshot or a live graph, whose current version it
then reads) together with the purchase article keys computed for that graph. Refreshing the keys
or switching to another graph (a compacted snapshot) replaces the pair, never half of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import Tensor


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
