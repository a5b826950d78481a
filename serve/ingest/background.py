"""The server's background process: the file drop (``--ingest-dir``) and periodic compaction
(``--compact-every``), in one spawned process apart from the request path.

Compaction folds every batch of the log into a new snapshot version in ``STATE_DIR/snapshots/``
(:func:`models.store.versions.compact`: written aside, fsynced, then made ``current`` atomically);
the graph owner switches to it at its next poll (:mod:`serve.graph.owner`), and versions
no process holds any more are removed. The log itself is kept whole: the write side's view of ids
and idempotency keys is built from it.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from models.store.log.replay import replayed_graph
from models.store.versions import Compaction, compact
from serve.ingest.config import IngestConfig
from serve.ingest.file_drop import FileDrop
from serve.ingest.metrics import IngestMetrics
from serve.ingest.service import open_ingestor
from serve.processes import BACKGROUND_NAME, defer_to_main, keep_progress_bars_in_process, name_process

log = logging.getLogger("relserve.ingest")


def compact_once(config: IngestConfig, artifacts: Path) -> Compaction | None:
    """Fold the log into a new current snapshot version; ``None`` when the current one holds it all."""
    with replayed_graph(artifacts, config.state_dir, config.log, who="compaction") as (graph, _):
        return None if graph.sequence == graph.base.sequence else compact(graph.view(), config.state_dir)


def serve_background(config: IngestConfig, artifacts: str, parent_pid: int) -> None:
    """Run the file drop and compaction until the server's main process is gone."""
    defer_to_main()  # SIGINT/SIGTERM to the whole group: the main process says when to stop
    name_process(BACKGROUND_NAME)
    keep_progress_bars_in_process()
    logging.basicConfig(level=logging.INFO, format="relserve background: %(levelname)s: %(message)s")
    metrics = IngestMetrics()
    snapshot_dir = Path(artifacts) / "snapshot"
    drop = None if config.ingest_dir is None else FileDrop(config.ingest_dir,
                                                         open_ingestor(config, snapshot_dir, metrics))
    next_compaction = time.monotonic() + (config.compact_every_s or 0)
    while os.getppid() == parent_pid:
        try:
            if drop is not None:
                drop.scan()
            if config.compact_every_s and time.monotonic() >= next_compaction:
                done = compact_once(config, Path(artifacts))
                next_compaction = time.monotonic() + config.compact_every_s
                if done is not None:
                    metrics.compacted(done.seconds)
                    log.info("compacted the log up to sequence %d into %s in %.1f s", done.sequence,
                             done.directory.name, done.seconds)
        except Exception:  # one bad file or failed compaction must not end the process
            log.exception("background step failed")
        time.sleep(config.file_poll_s if drop is not None else min(config.file_poll_s, 1.0))
