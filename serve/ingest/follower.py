"""The read side in each inference worker: tail the log and apply new batches to the live graph.

:meth:`Follower.catch_up` replays the log before the worker warms up (a restarted worker serves
every acknowledged batch from its first answer); :meth:`Follower.start` then polls the log every
``--ingest-poll`` seconds in a daemon thread. A step applies what is new and reports the graph's
sequence (:class:`serve.ingest.progress.ProgressFile`): from then on every answer of the worker
reads those rows. The purchase worker's article keys, which depend on the whole graph and the seed
day, are refreshed apart from that (``refresh``: its
:meth:`models.runtime.inference.TaskInference.refresh_article_keys`, a no-op unless the keys are
stale; answering never waits on it), on their own pacing, and reported as ``keys_sequence``:
``?sync=true`` waits for both.

Steps are paced (:class:`serve.ingest.pacing.Pacer`). Applying: after a step that took ``c``
seconds the next waits ``c * (1 - follow_share) / follow_share``, so the follower, which shares the
worker's GIL with the thread answering requests, runs at most ``follow_share`` of the time; batches
arriving meanwhile are applied together at the next step, with one rebuild. Refreshing the keys (the
whole catalogue's forward, the follower's most expensive work by far) is due again only after its
cost times ``(1 - key_share) / key_share``: with ``key_share`` well below 1 the worker answers from
the latest rows within a poll while the keys follow within a few refreshes' time.

Compaction (``python -m training.compact``, or ``--compact-every``) writes a new snapshot version and
moves the state directory's ``current`` pointer (:mod:`models.store.versions`). The follower sees the
pointer move at its next poll, opens the new version (holding a lease on it, so it is not removed
while served), builds a live graph over it caught up with the log, and hands it to ``switch`` (the
worker's :meth:`models.runtime.inference.TaskInference.use_graph`, which computes the new graph's
article keys before swapping graph and keys in one assignment): no request waits or fails.

A batch the graph refuses is logged and stepped over, as every reader of the log does
(:mod:`models.store.log.replay`), so all of them still serve the same graph.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from models.store.live import LiveGraph, wall_clock
from models.store.log.format import Log, LogError
from models.store.log.replay import replay
from models.store.versions import Lease, current_snapshot_dir, open_current
from serve.gil import FAST_SWITCHING
from serve.ingest.config import DEFAULT_FOLLOW_SHARE, DEFAULT_KEY_SHARE, DEFAULT_POLL_S, IngestConfig
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.pacing import Pacer, StepClock
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
        versions: ``(artifacts, state dir)`` whose current snapshot version is followed (``None``:
            the graph's base is kept).
        lease: the lease held on the graph's base version, released when switching away.
        switch: receives the live graph over a new version, to serve from then on.
        follow_share: largest share of the time the follower's steps take (see
            :class:`serve.ingest.pacing.Pacer`; ``1``: step whenever something is new).
        key_share: largest share of the time ``refresh`` takes (``1``: after every step).
    """

    def __init__(self, log: Log, graph: LiveGraph, progress: ProgressFile, metrics: FollowerMetrics,
                 poll_s: float = DEFAULT_POLL_S, refresh: Callable[[], bool] | None = None,
                 versions: tuple[Path, Path] | None = None, lease: Lease | None = None,
                 switch: Callable[[LiveGraph], None] | None = None,
                 follow_share: float = DEFAULT_FOLLOW_SHARE, key_share: float = DEFAULT_KEY_SHARE) -> None:
        self.log = log
        self.graph = graph
        self.versions = versions
        self.lease = lease
        self.switch = switch
        self.progress = progress
        self.metrics = metrics
        self.poll_s = poll_s
        self.refresh = refresh
        self.pacer = Pacer(follow_share, poll_s)
        self.key_pacer = Pacer(key_share, poll_s)
        self._keys_due = 0.0  # time.monotonic() from which the keys may be refreshed again
        self._keys_sequence = graph.sequence  # the keys of a worker's first answer cover its catch-up
        self._unkeyed_since: float | None = None  # receipt of the oldest batch the keys do not cover
        self._clock = StepClock()
        self._worked = False  # the last step applied, switched or refreshed
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
        """Apply what is new in the log (at most one read's worth) and, once running, follow a new
        snapshot version and refresh the article keys if due; returns how many batches."""
        batches = self._apply(self.graph)
        switched = report and self._follow_version()
        if batches:
            now = time.time()
            self.metrics.applied(len(batches), [now - b.received_at for b in batches] if observe_lag else [])
            if self._unkeyed_since is None and observe_lag:
                self._unkeyed_since = min(b.received_at for b in batches)
        if switched:  # the new graph's keys were computed before the switch
            self._keys_sequence, self._unkeyed_since = self.graph.sequence, None
        if not report:
            self._keys_sequence = self.graph.sequence  # catching up: keys are computed at warm-up
        if report and (batches or switched):
            self.report()  # the rows first: a refresh due now would hold them back by its own time
        refreshed = report and self._refresh_keys()
        if refreshed:
            self.report()
        self._worked = bool(batches) or switched or refreshed
        return len(batches)

    def _refresh_keys(self) -> bool:
        """Refresh what depends on the graph if it is due; whether it did anything."""
        if self.refresh is None:  # no keys: the report says so (``keys_sequence`` None)
            return False
        if time.monotonic() < self._keys_due:
            return False
        sequence, started = self.graph.sequence, time.perf_counter()
        refreshed = self.refresh()
        if refreshed:
            cost = time.perf_counter() - started
            self.metrics.refreshed(cost, None if self._unkeyed_since is None
                                   else time.time() - self._unkeyed_since)
            self._keys_due = time.monotonic() + self.key_pacer.pause(cost, True)
            self._clock.exclude(cost)  # paced by key_share, not by follow_share
        changed = refreshed or self._keys_sequence != sequence
        self._keys_sequence, self._unkeyed_since = sequence, None
        return changed

    def _apply(self, graph: LiveGraph) -> list:
        return replay(self.log, graph, reads=1, who=f"worker {self.progress.task}").batches

    def _follow_version(self) -> bool:
        """Switch to the state directory's current snapshot version if it moved; whether it did."""
        if self.versions is None:
            return False
        artifacts, state_dir = self.versions
        if current_snapshot_dir(artifacts, state_dir).resolve() == Path(self.graph.base.directory).resolve():
            return False
        started = time.perf_counter()
        base, lease = open_current(artifacts, state_dir)
        graph = LiveGraph(base, clock=self.graph.clock)
        while self._apply(graph):
            pass
        if self.switch is not None:
            self.switch(graph)
        previous, self.graph, self.lease = self.lease, graph, lease
        if previous is not None:
            previous.release()
        self.metrics.switched()
        self._clock.exclude(time.perf_counter() - started)
        log.info("worker %s: now serving snapshot version %s (log sequence %d)", self.progress.task,
                 base.directory.name, base.sequence)
        return True

    def report(self) -> None:
        graph = self.graph
        delta = graph.delta_edges + sum(graph.new_nodes.values())
        self.progress.write(graph.sequence, delta, snapshot_version=graph.base.sequence,
                            keys_sequence=None if self.refresh is None else self._keys_sequence)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"relserve-follow-{self.progress.task}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.progress.remove()
        if self.lease is not None:
            self.lease.release()

    def _run(self) -> None:
        self.report()
        pause = 0.0
        while not self._stop.wait(pause):
            self._clock.start()
            try:
                with FAST_SWITCHING:  # applying and refreshing are pure Python between torch ops
                    self.step()
                pause = self.pacer.pause(self._clock.stop(), self._worked)
            except LogError as e:
                log.warning("worker %s: cannot read the ingestion log (%s); retrying in %.0f s",
                            self.progress.task, e, RETRY_S)
                pause = RETRY_S
            except Exception:  # the thread must outlive any one bad step
                log.exception("worker %s: applying the ingestion log failed; retrying in %.0f s",
                              self.progress.task, RETRY_S)
                pause = RETRY_S


def open_follower(config: IngestConfig, task: str, artifacts: Path) -> Follower:
    """A worker's live graph over the current snapshot version (``artifacts/snapshot`` until a
    compaction), caught up with the log, and the follower that keeps it so (call
    :meth:`Follower.start` once the worker serves)."""
    base, lease = open_current(artifacts, config.state_dir)
    graph = LiveGraph(base, clock=wall_clock if config.clock == "wall" else None)
    follower = Follower(config.open_log(), graph, ProgressFile(config.state_dir, task), FollowerMetrics(task),
                        config.poll_s, versions=(Path(artifacts), config.state_dir), lease=lease,
                        follow_share=config.follow_share, key_share=config.key_share)
    follower.catch_up()
    return follower
