"""The read side in each inference worker: tail the log and apply new batches to the live graph.

:meth:`Follower.catch_up` replays the log before the worker warms up (a restarted worker serves
every acknowledged batch from its first answer); :meth:`Follower.start` then polls the log every
``--ingest-poll`` seconds in a daemon thread. After applying new batches, and at every poll (the
seed day can move with a wall clock alone), it runs ``refresh`` (the purchase worker's
:meth:`models.runtime.inference.TaskInference.refresh_article_keys`, a no-op unless the keys are
stale; answering never waits on it), then reports the graph's sequence
(:class:`serve.ingest.progress.ProgressFile`): a worker only reports a sequence it fully serves,
article keys included, which is what ``?sync=true`` waits for.

A batch the graph refuses (it passed the write side's validation, so this is a bug, but one that
would otherwise stall every worker forever) is logged and stepped over; every worker refuses the
same batch, so all of them still serve the same graph.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from models.store.live import BatchError, LiveGraph, wall_clock
from models.store.snapshot import GraphSnapshot
from serve.ingest.config import IngestConfig
from serve.ingest.log import Log, LogError, check_order
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.progress import ProgressFile

log = logging.getLogger("relserve.ingest")

RETRY_S = 1.0  # after a log error (e.g. the broker is unreachable)


class Follower:
    """Applies the log to ``graph`` (see the module docstring).

    Args:
        log: the ingestion log (this worker's own connection).
        graph: the worker's live graph.
        progress: where this worker reports.
        metrics: lag, applied batches, article-key refreshes.
        poll_s: pause between looks at the log while nothing is new.
        refresh: run after each step, before reporting; returns whether it did anything.
    """

    def __init__(self, log: Log, graph: LiveGraph, progress: ProgressFile, metrics: FollowerMetrics,
                 poll_s: float = 0.05, refresh: Callable[[], bool] | None = None) -> None:
        self.log = log
        self.graph = graph
        self.progress = progress
        self.metrics = metrics
        self.poll_s = poll_s
        self.refresh = refresh
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def catch_up(self) -> int:
        """Apply everything the log holds now (before warm-up, so nothing is reported: a worker
        reports once it serves); returns how many batches."""
        applied = 0
        while (step := self.step(observe_lag=False, report=False)) > 0:
            applied += step
        return applied

    def step(self, observe_lag: bool = True, report: bool = True) -> int:
        """Apply what is new in the log (at most one read's worth) and, once running, refresh what
        depends on the graph; returns how many batches."""
        after = self.graph.sequence
        batches = self.log.read(after)
        if batches:
            check_order(batches, after)
            try:
                self.graph.apply_many(batches)
            except BatchError as e:
                failed = self.graph.sequence + 1
                log.error("worker %s: skipping log batch %d, which the graph cannot apply: %s",
                          self.progress.task, failed, e)
                self.graph.skip(failed)
        if report and self.refresh is not None:
            started = time.perf_counter()
            if self.refresh():
                self.metrics.refreshed(time.perf_counter() - started)
        if batches:
            now = time.time()
            self.metrics.applied(len(batches), [now - b.received_at for b in batches] if observe_lag else [])
            if report:
                self.report()
        return len(batches)

    def report(self) -> None:
        new_nodes = sum(self.graph.new_nodes.values())
        self.progress.write(self.graph.sequence, self.graph.delta_edges + new_nodes)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"relserve-follow-{self.progress.task}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.progress.remove()

    def _run(self) -> None:
        self.report()
        pause = 0.0
        while not self._stop.wait(pause):
            try:
                pause = 0.0 if self.step() else self.poll_s
            except LogError as e:
                log.warning("worker %s: cannot read the ingestion log (%s); retrying in %.0f s",
                            self.progress.task, e, RETRY_S)
                pause = RETRY_S
            except Exception:  # the thread must outlive any one bad step
                log.exception("worker %s: applying the ingestion log failed; retrying in %.0f s",
                              self.progress.task, RETRY_S)
                pause = RETRY_S


def open_follower(config: IngestConfig, task: str, base: GraphSnapshot) -> Follower:
    """A worker's live graph over ``base``, caught up with the log, and the follower that keeps it so
    (call :meth:`Follower.start` once the worker serves)."""
    graph = LiveGraph(base, clock=wall_clock if config.clock == "wall" else None)
    follower = Follower(config.open_log(), graph, ProgressFile(config.state_dir, task), FollowerMetrics(task),
                        config.poll_s)
    follower.catch_up()
    return follower
