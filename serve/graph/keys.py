"""A ranking worker's article keys over the shared live graph: adopted from the owner, off the request path.

The keys of the whole catalogue depend on the graph version, the seed day and the model. The graph
owner computes them once per machine for the model version the task's workers are ordered to serve
(:mod:`serve.graph.owner_keys`); this worker's thread (only in workers of a ranking task) adopts each
newer set the owner publishes for the model it serves, swapped in atomically, and reports how far
they reach (:class:`serve.ingest.progress.ProgressFile`: what ``?sync=true`` waits for besides the
owner's published sequence). Answers meanwhile rank with the previous keys. Only while the owner keys
another model (a hot swap the owner has not followed, a version this worker refused) does the
worker recompute its own stale keys (:meth:`models.runtime.inference.TaskInference.refresh_article_keys`),
paced by ``--key-share`` (:class:`serve.ingest.pacing.Pacer`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from models.runtime.serving_state import ArticleKeys
from models.store.shared_codec import VersionFileError, load
from models.store.shared_graph import SharedGraph
from models.store.shared_header import HeaderBusy, keys_file
from serve.gil import FAST_SWITCHING
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.pacing import Pacer
from serve.ingest.progress import ProgressFile

log = logging.getLogger("relserve.graph")

RETRY_S = 1.0


class KeyFollower:
    """Keeps the served model's article keys up with the shared graph (see the module docstring).

    Args:
        served: returns the model answering now and its version (a hot swap replaces it).
        graph: the worker's shared graph (the owner's header says which keys are published).
        progress: where this worker reports its keys' sequence.
        metrics: refresh counts, times and lag (of refreshes this worker computes itself).
        poll_s: pause between looks while the keys are up to date.
        key_share: largest share of the time refreshing takes (when computing them itself).
    """

    def __init__(self, served: Callable[[], Any], graph: SharedGraph, progress: ProgressFile,
                 metrics: FollowerMetrics, poll_s: float, key_share: float) -> None:
        self.served = served
        self.graph = graph
        self.progress = progress
        self.metrics = metrics
        self.poll_s = poll_s
        self.pacer = Pacer(key_share, poll_s)
        self._stale_since: float | None = None  # when a version the keys do not cover was first seen
        self._reported: object = None  # the keys' version last reported
        self._held = 0  # the number of the owner's keys last read
        self._owner_model: int | None = None  # the model version of the owner's keys last read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self) -> float:
        """Adopt the owner's newer keys for this model, or refresh them here if the owner keys
        another model and these are stale; returns the pause before the next step."""
        served = self.served()
        inference = served.inference
        keys = self._owner_keys(served.version)
        if keys is not None:
            inference.adopt_article_keys(keys)
        if keys is not None or self._owner_model == served.version or not inference.article_keys_stale():
            self._stale_since = None
            if inference.keys_version() != self._reported:
                self.report()
            return self.poll_s
        if self._stale_since is None:
            self._stale_since = time.time()
        started = time.perf_counter()
        with FAST_SWITCHING:  # the refresh is mostly Python between torch calls: see serve.gil
            refreshed = inference.refresh_article_keys()
        if refreshed:
            cost = time.perf_counter() - started
            self.metrics.refreshed(cost, time.time() - self._stale_since)
            self._stale_since = None
            self.report()
            return self.pacer.pause(cost, True)
        return self.poll_s

    def _owner_keys(self, model_version: int) -> ArticleKeys | None:
        """The owner's keys newer than the ones last read, if computed with ``model_version`` over
        this worker's base snapshot."""
        try:
            published = self.graph.header.read()
        except HeaderBusy:  # an owner died mid-write: look again at the next step
            return None
        if published is None or published.keys_version in (0, self._held):
            return None
        try:
            data = load(keys_file(self.graph.directory, published.keys_version, self.progress.task))
        except (OSError, VersionFileError):  # replaced meanwhile: the next look reads the newer one
            return None
        base = self.graph.base
        if data["base_dir"] != str(Path(base.directory).resolve()):
            return None  # keys of a snapshot version this worker does not serve yet: look again
        self._held, self._owner_model = published.keys_version, data["model_version"]
        if data["model_version"] != model_version:
            return None
        return ArticleKeys(data["keys"], data["popularity"], (base, data["sequence"], data["seed_day"]))

    def report(self) -> None:
        inference = self.served().inference
        graph = inference.snapshot
        version = self._reported = inference.keys_version()
        keys = None if version is None else version[1]
        self.progress.write(graph.sequence, graph.delta_edges + sum(graph.new_nodes.values()),
                            snapshot_version=graph.base.sequence, keys_sequence=keys)

    def start(self) -> None:
        self.report()
        self._thread = threading.Thread(target=self._run, name="relserve-keys", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.progress.remove()

    def _run(self) -> None:
        pause = 0.0
        while not self._stop.wait(pause):
            try:
                pause = self.step()
            except Exception:  # the thread must outlive any one bad refresh
                log.exception("worker %s: refreshing the article keys failed; retrying in %.0f s",
                              self.progress.task, RETRY_S)
                pause = RETRY_S
