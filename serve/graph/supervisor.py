"""Starting, watching and restarting the graph owner from the server's main process.

:class:`GraphOwnerProcess` spawns :func:`serve.graph.owner.serve_graph` before the workers start (a
worker's ``setup()`` waits for the first published version) and watches it from a thread: an owner
that exits while the server runs is started again, and ``down`` (a shared flag :mod:`serve.http.admission`
reads) makes ``/health`` answer 503 from its exit until the new owner has published. Workers keep
answering from the last published version meanwhile.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import threading
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from models.store.shared_header import SHARED_PREFIX, GraphHeader, HeaderBusy, shared_dir
from models.store.shared_publisher import remove_shared
from serve.graph.owner_keys import RankingTask
from serve.ingest.config import IngestConfig
from serve.private_dirs import claim, sweep
from serve.processes import release_children, signals_held

log = logging.getLogger("relserve.graph")

WATCH_S = 0.1  # while an owner has not published since its (re)start; once it has, the watcher
# blocks until the owner exits or the server stops (an idle server costs nothing here)
MAX_BACKOFF_S = 30.0


class GraphOwnerProcess:
    """The owner process of a server with ``--state-dir`` (see the module docstring).

    Args:
        config: the ingestion settings.
        artifacts: the served artifacts.
        down: a shared ``mp.Value("b")``: 1 while no owner has published since the last (re)start.
        ranking: the ranking tasks whose article keys the owner computes.
        threads: torch threads of the owner (a worker's: see serve.layout).
    """

    def __init__(self, config: IngestConfig, artifacts: Path, down: Any,
                 ranking: list[RankingTask] | None = None, threads: int = 1) -> None:
        self.config = config
        self.ranking = list(ranking or [])
        self.threads = threads
        self.artifacts = Path(artifacts)
        self.down = down
        self.directory = shared_dir(config.state_dir)
        self.process: mp.process.BaseProcess | None = None
        self.restarts = 0
        self._failures = 0  # restarts since an owner last published
        self._stopping = threading.Event()
        self._wake_read, self._wake_write = os.pipe()  # written once by stop(): ends the watcher's wait
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        remove_shared(self.directory)  # a previous server's versions: no reader of this one holds them
        if self.directory.name.startswith(SHARED_PREFIX):  # in /dev/shm: those of killed servers go too
            sweep(SHARED_PREFIX, self.directory.parent)
        claim(self.directory)  # this (main) process's while it runs, restarted owners and all
        self._spawn()
        self._watcher = threading.Thread(target=self._watch, name="relserve-graph-watch", daemon=True)
        self._watcher.start()

    def _spawn(self) -> None:
        from serve.graph.owner import serve_graph

        self.down.value = 1
        self.process = mp.get_context("spawn").Process(
            target=serve_graph, name="relserve-graph", daemon=True,
            args=(self.config, str(self.artifacts), os.getpid(), self.ranking, self.threads))
        with signals_held():  # until serve_graph's own handlers are in place
            self.process.start()

    def _watch(self) -> None:
        header: GraphHeader | None = None
        while not self._stopping.is_set():
            process = self.process
            sentinels = [self._wake_read] + ([process.sentinel] if process is not None else [])
            wait(sentinels, timeout=WATCH_S if self.down.value or process is None else None)
            if self._stopping.is_set():
                return
            if process is not None and not process.is_alive():
                if self._stopping.is_set():
                    return
                # An owner that keeps failing at start-up (a broken log) is retried ever more slowly.
                pause = min(MAX_BACKOFF_S, 2.0 ** self._failures - 1) if self._failures else 0.0
                log.warning("the graph owner (pid %s) exited with %s; starting it again%s (answers come "
                            "from the last published graph meanwhile)", process.pid, process.exitcode,
                            f" in {pause:.0f} s" if pause else "")
                if self._stopping.wait(pause):
                    return
                self.restarts += 1
                self._failures += 1
                self._spawn()
                continue
            if self.down.value:
                try:
                    header = header or GraphHeader(self.directory)
                except FileNotFoundError:
                    continue
                try:
                    published = header.read()
                except HeaderBusy:
                    continue
                if published is not None and process is not None and published.pid == process.pid:
                    self.down.value = 0
                    self._failures = 0

    def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        os.write(self._wake_write, b"\0")
        if self._watcher is not None:
            self._watcher.join(5)
        if self.process is not None and self.process.is_alive():
            release_children()  # it ignores SIGTERM until released (serve.processes)
            self.process.terminate()
            self.process.join(5)
            if self.process.is_alive():
                self.process.kill()
        remove_shared(self.directory)
