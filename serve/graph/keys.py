"""A ranking worker's article keys when the graph owner keys another model: refreshed off the request path.

The graph owner computes the keys of the whole catalogue once per machine for the model version the
task's workers are ordered to serve (:mod:`serve.graph.owner_keys`), and every answer adopts a newer
set before it ranks (:meth:`models.runtime.inference.TaskInference.follow_published_keys`: one mapped
read when there is none). This thread, one per worker of a ranking task, covers the moments the
owner keys another model than the one this worker serves (a hot swap the owner has not followed yet,
a version this worker refused): then it recomputes this worker's own keys when the graph moved
(:meth:`models.runtime.inference.TaskInference.refresh_article_keys`, swapped in atomically; answers
meanwhile rank with the previous keys), paced by ``--key-share`` (:class:`serve.ingest.pacing.Pacer`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from models.store.shared_graph import SharedGraph
from serve.gil import FAST_SWITCHING
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.pacing import Pacer

log = logging.getLogger("relserve.graph")

RETRY_S = 1.0
# While the owner keys this worker's model there is nothing to do here but notice a hot swap that
# changes that: no need to wake 20 times a second.
OWNER_KEYED_POLL_S = 0.25


class KeyFollower:
    """Keeps the served model's article keys up with the shared graph (see the module docstring).

    Args:
        inference: returns the model answering now (a hot swap replaces it).
        graph: the worker's shared graph (it says which model the owner's keys are for).
        metrics: refresh counts, times and lag (of refreshes this worker computes itself).
        poll_s: pause between looks.
        key_share: largest share of the time refreshing takes.
    """

    def __init__(self, inference: Callable[[], Any], graph: SharedGraph, metrics: FollowerMetrics,
                 poll_s: float, key_share: float) -> None:
        self.inference = inference
        self.graph = graph
        self.metrics = metrics
        self.poll_s = poll_s
        self.pacer = Pacer(key_share, poll_s)
        self._stale_since: float | None = None  # when a version the keys do not cover was first seen
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def owner_keys_this_model(self, inference: Any) -> bool:
        """Whether the owner's latest keys of this task were computed with ``inference``'s model."""
        keyed = self.graph.keyed_bundles.get(inference.task)
        return keyed is not None and keyed == str(Path(inference.bundle_dir).resolve())

    def step(self) -> float:
        """Adopt the owner's keys, or refresh this worker's own if the owner keys another model and
        these are stale; returns the pause before the next step."""
        inference = self.inference()
        inference.follow_published_keys()
        if self.owner_keys_this_model(inference):  # every answer adopts the owner's newer keys itself
            self._stale_since = None
            return max(self.poll_s, OWNER_KEYED_POLL_S)
        if not inference.article_keys_stale():
            self._stale_since = None
            return self.poll_s
        if self._stale_since is None:
            self._stale_since = time.time()
        started = time.perf_counter()
        with FAST_SWITCHING:  # the refresh is mostly Python between torch calls: see serve.gil
            refreshed = inference.refresh_article_keys()
        if not refreshed:
            return self.poll_s
        cost = time.perf_counter() - started
        self.metrics.refreshed(cost, time.time() - self._stale_since)
        self._stale_since = None
        return self.pacer.pause(cost, True)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="relserve-keys", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        pause = 0.0
        while not self._stop.wait(pause):
            try:
                pause = self.step()
            except Exception:  # the thread must outlive any one bad refresh
                log.exception("worker %s: refreshing the article keys failed; retrying in %.0f s",
                              self.inference().task, RETRY_S)
                pause = RETRY_S
