"""The graph owner process: the one reader of the ingestion log on a machine.

It holds the :class:`models.store.live.LiveGraph` over the current snapshot version, applies every
new batch of the log to it (:func:`models.store.log.replay.replay`, the same loop and error policy as
every reader) and publishes each new version (:class:`models.store.shared_publisher.Publisher`) for
the inference workers to map (:class:`models.store.shared_graph.SharedGraph`). It follows a
compaction to the new snapshot version, caught up with the log before publishing over it. Workers
apply nothing, so the cost of ingestion does not grow with the number of workers.

Started and restarted by :class:`serve.graph.supervisor.GraphOwnerProcess`; a restarted owner
replays the log over the current snapshot version and publishes on from the last version number.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch

from models.graph.temporal_cache import TemporalCache
from models.store.live import LiveGraph, wall_clock
from models.store.live_view import LiveView
from models.store.log.format import LogError
from models.store.log.replay import replay
from models.store.shared_header import shared_dir
from models.store.shared_publisher import Publisher
from models.store.versions import current_snapshot_dir, open_current
from serve.graph.owner_keys import KeyMaker, RankingTask
from serve.ingest.config import IngestConfig
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.pacing import Pacer
from serve.processes import (
    OWNER_NAME,
    defer_to_main,
    keep_progress_bars_in_process,
    name_process,
    set_thread_niceness,
)

log = logging.getLogger("relserve.graph")

RETRY_S = 1.0  # after a log error (e.g. the broker is unreachable)
# With nothing new, how long the owner waits on a log that wakes it at an append (the local WAL):
# as long as following a compaction or a model order may take; a batch wakes it at once.
IDLE_WAIT_S = 0.25
OWNER = "graph"  # the ``task`` label of the owner's metrics
# A due step then starts and finishes without queueing behind the workers, which is most of the graph
# lag under load. Its pacing (serve.ingest.pacing) is by wall time, so the time it no longer waits
# it spends working: a larger share of a core, still bounded by --ingest-share.
OWNER_NICENESS = -5


class GraphOwner:
    """Applies the log and publishes versions (see the module docstring).

    Args:
        config: the server's ingestion settings (state directory, log, poll interval, clock).
        artifacts: the served artifacts (``artifacts/snapshot`` is the base until a compaction).
        ranking: the ranking tasks served, whose article keys the owner computes.
    """

    def __init__(self, config: IngestConfig, artifacts: Path,
                 ranking: list[RankingTask] | None = None) -> None:
        self.config = config
        self.artifacts = Path(artifacts)
        self.publisher = Publisher(shared_dir(config.state_dir))
        self.log = config.open_log()
        self.metrics = FollowerMetrics(OWNER)
        self.clock = wall_clock if config.clock == "wall" else None  # the workers' (the keys' seed day)
        base, self.lease = open_current(self.artifacts, config.state_dir)
        self.graph = LiveGraph(base, clock=self.clock)
        # Every version's moved nodes' temporal aggregates, computed here once for all the workers
        # (published with it) and for the article keys.
        self.temporal = TemporalCache()
        self.published: LiveView | None = None  # the last version published
        self.keys = KeyMaker(list(ranking or []), self.publisher, config.key_share, config.poll_s,
                             self.temporal)
        self.pacer = Pacer(config.follow_share, config.poll_s, config.lag_target_s)

    def catch_up(self) -> None:
        """Apply everything the log holds now and publish it (a starting worker waits for this)."""
        replay(self.log, self.graph, who="graph owner")
        self._publish()
        self.keys.refresh(self.graph)
        log.info("serving log sequence %d over snapshot %s", self.graph.sequence,
                 self.graph.base.directory.name)

    def step(self) -> bool:
        """Apply what is new (one read of the log), follow a compaction, publish if anything changed,
        then refresh the article keys if due. Returns whether it did anything."""
        batches = replay(self.log, self.graph, reads=1, who="graph owner").batches
        switched = self._follow_version()
        if batches or switched:
            self._publish()
            now = time.time()
            self.metrics.applied(len(batches), [now - b.received_at for b in batches])
        return self.keys.refresh(self.graph) or bool(batches)

    def run(self, running: Callable[[], bool]) -> None:
        """Step until ``running()`` turns false; a step that fails is retried after :data:`RETRY_S`.
        With nothing new it waits on the log (woken by an append) rather than looking again every
        poll, up to :data:`IDLE_WAIT_S` or until a key refresh falls due."""
        while running():
            worked = True
            try:
                started = time.perf_counter()
                worked = self.step()
                pause = self.pacer.pause(time.perf_counter() - started, worked)
            except LogError as e:
                log.warning("cannot read the ingestion log (%s); retrying in %.0f s", e, RETRY_S)
                pause = RETRY_S
            except Exception:  # the owner must outlive any one bad step
                log.exception("applying the ingestion log failed; retrying in %.0f s", RETRY_S)
                pause = RETRY_S
            if worked:
                time.sleep(pause)
            else:
                idle = min(IDLE_WAIT_S, self.keys.due_in()) if self.log.wakes_on_append else 0.0
                self.log.wait(max(pause, idle))

    def _publish(self) -> None:
        """Publish the current version with the temporal aggregates of the nodes it added edges to."""
        view = self.graph.view()
        rows = self.temporal.rows_to_publish(view, view.end_time, since=self.published)
        self.publisher.publish(dataclasses.replace(view, temporal_rows=rows))
        self.published = view

    def _follow_version(self) -> bool:
        """Switch to the state directory's current snapshot version if it moved; whether it did."""
        current = current_snapshot_dir(self.artifacts, self.config.state_dir)
        if current.resolve() == Path(self.graph.base.directory).resolve():
            return False
        base, lease = open_current(self.artifacts, self.config.state_dir)
        graph = LiveGraph(base, clock=self.clock)
        replay(self.log, graph, who="graph owner")
        previous, self.graph, self.lease = self.lease, graph, lease
        if previous is not None:
            previous.release()
        self.metrics.switched()
        log.info("now serving snapshot version %s (log sequence %d)", base.directory.name, base.sequence)
        return True

    def close(self) -> None:
        self.log.close()
        self.publisher.close()
        if self.lease is not None:
            self.lease.release()


def serve_graph(config: IngestConfig, artifacts: str, parent_pid: int, ranking: list[RankingTask],
                threads: int = 1) -> None:
    """The owner process's main: catch up, publish, follow the log until the main process is gone."""
    defer_to_main()  # SIGINT/SIGTERM to the whole group: the main process says when to stop
    name_process(OWNER_NAME)
    keep_progress_bars_in_process()
    logging.basicConfig(level=logging.INFO, format="relserve graph owner: %(levelname)s: %(message)s")
    if not set_thread_niceness(OWNER_NICENESS):
        log.info("running at the workers' priority (a niceness of %d needs CAP_SYS_NICE or an "
                 "RLIMIT_NICE of %d, e.g. docker run --ulimit nice=%d): batches and keys wait longer "
                 "for a core under load", OWNER_NICENESS, 20 - OWNER_NICENESS, 20 - OWNER_NICENESS)
    torch.set_num_threads(threads)  # as many as a worker: the key refresh is one catalogue-wide forward
    owner = GraphOwner(config, Path(artifacts), ranking)
    try:
        owner.catch_up()
        owner.run(lambda: os.getppid() == parent_pid)
    finally:
        owner.close()
        if owner.keys.compiling():
            # Interpreter shutdown with a thread inside the compiler's C++ aborts the process
            # ("terminate called without an active exception"): leave without it.
            logging.shutdown()
            os._exit(0)
