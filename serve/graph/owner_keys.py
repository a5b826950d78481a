"""The ranking tasks' article keys, computed once per machine by the graph owner.

A purchase answer scores every article's key, which depends on the graph version, the seed day and
the model. The owner holds the graph, so it computes the keys of the whole catalogue for the model
version each ranking task's workers are ordered to serve (:class:`serve.versions.model_control.ModelControl`:
the start-up version, then every hot swap), eagerly, and publishes them as a numbered file per task
(:func:`models.store.shared_header.keys_file`); the workers adopt them
(:mod:`serve.graph.keys`). One computation per machine, whatever ``--workers-per-task``.

Once batches stream in, the keys' forward of a task served with ``--compile`` other than ``none`` is
compiled in the background (:class:`models.runtime.key_compile.KeyCompiler`; refreshes go on eagerly
meanwhile), which cuts a refresh's CPU by a quarter to a third; a server that never ingests never
pays for it.

Refreshes are paced by ``--key-share`` (:class:`serve.ingest.pacing.Pacer`): after a refresh that took
``c`` seconds the next waits ``c * (1 - share) / share``; a graph version the keys do not cover yet
is keyed at the next due refresh, together with every batch applied meanwhile.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from models.graph.temporal_cache import TemporalCache
from models.runtime.inference import TaskInference
from models.runtime.key_compile import KeyCompiler
from models.store.live import LiveGraph
from models.store.shared_codec import dump
from models.store.shared_header import keys_file
from models.store.shared_publisher import Publisher
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.pacing import Pacer
from serve.versions.model_control import ModelControl
from serve.versions.repository import find_version
from serve.versions.swap import SwapSettings

log = logging.getLogger("relserve.graph")


@dataclass(frozen=True)
class RankingTask:
    """A ranking task whose keys the owner computes (small and picklable: the owner is spawned).

    Args:
        task: its name.
        bundle_dir: the bundle its workers start with.
        models: how its workers follow model versions (``None``: the start-up bundle, fixed).
        compile: compile the keys' forward once batches stream in (the server's ``--compile`` is not
            ``none``).
    """

    task: str
    bundle_dir: str
    models: SwapSettings | None = None
    compile: bool = False


class KeyMaker:
    """Computes and publishes the keys of every ranking task (see the module docstring).

    Args:
        tasks: the ranking tasks served.
        publisher: the owner's publisher (the keys go into its directory and header).
        key_share: largest share of the owner's time refreshes take.
        poll_s: the owner's poll interval (the pacer's floor).
        temporal: the owner's temporal aggregates, which every key model reads (``None``: a cache of
            the key maker's own).
    """

    def __init__(self, tasks: list[RankingTask], publisher: Publisher, key_share: float,
                 poll_s: float, temporal: TemporalCache | None = None) -> None:
        self.tasks = tasks
        self.temporal = TemporalCache() if temporal is None else temporal
        self.publisher = publisher
        self.pacer = Pacer(key_share, poll_s)
        self.metrics = {t.task: FollowerMetrics(t.task) for t in tasks}
        self.models: dict[str, tuple[int, TaskInference]] = {}  # per task: model version, model
        self.compilers: dict[str, KeyCompiler] = {}  # per task, the compile of its model's key forward
        self._counted: dict[str, KeyCompiler] = {}  # per task, the last compile whose end was counted
        self.load = self._load
        self._due = 0.0
        self._covered: tuple[Any, ...] | None = None
        self._stale_since: float | None = None

    def refresh(self, graph: LiveGraph) -> bool:
        """Key the current version if it is not keyed yet and a refresh is due; whether it did."""
        if not self.tasks:
            return False
        self._count_compiles_ended()
        changed = self._follow_models(graph)
        view = graph.view()
        covered = (view.base, view.sequence, view.end_time, tuple(v for v, _ in self.models.values()))
        if covered == self._covered and not changed:
            self._stale_since = None
            return False
        if self._stale_since is None:
            self._stale_since = time.time()
        if time.monotonic() < self._due:
            return False
        if self._covered is not None and view.sequence != self._covered[1]:
            self._compile_models(view)
        started = time.perf_counter()
        number = self.publisher.keys[0] + 1
        for task in self.tasks:
            self.write_keys(task.task, view, keys_file(self.publisher.directory, number, task.task))
        self.publisher.publish_keys(number, view.sequence)
        cost = time.perf_counter() - started
        for metrics in self.metrics.values():
            metrics.refreshed(cost / len(self.tasks), time.time() - self._stale_since)
        self._due = time.monotonic() + self.pacer.pause(cost, True)
        self._covered, self._stale_since = covered, None
        return True

    def due_in(self) -> float:
        """Seconds until a refresh the current version waits for falls due (``inf``: none waits)."""
        if self._stale_since is None:
            return math.inf
        return max(0.0, self._due - time.monotonic())

    def write_keys(self, task: str, view: Any, path: Path) -> None:
        """Compute ``task``'s keys of every article on ``view`` at its seed day and write them to ``path``."""
        version, inference = self.models[task]
        with torch.inference_mode():
            keys = inference.compute_article_keys(view.end_time, view)
        popularity = inference.popularity[(view.base, view.sequence, view.end_time)]
        dump({"task": task, "model_version": version, "bundle": str(Path(inference.bundle_dir).resolve()),
              "keys": keys, "popularity": popularity, "sequence": view.sequence, "seed_day": view.end_time,
              "base_dir": str(Path(view.base.directory).resolve())}, path)

    def _load(self, bundle: Path, graph: LiveGraph) -> TaskInference:
        inference = TaskInference.from_bundle(bundle, graph, compile="none")
        inference.key_temporal = self.temporal  # one model's or another's: the same aggregates
        return inference

    def compiling(self) -> bool:
        """Whether a key forward is being compiled now (a thread inside the compiler)."""
        return any(not c.done.is_set() for c in self.compilers.values())

    def _compile_models(self, view: Any) -> None:
        """Start compiling the key forward of each task that asks for it and lacks one for its model."""
        for task in self.tasks:
            inference = self.models[task.task][1]
            held = self.compilers.get(task.task)
            if task.compile and (held is None or held.inference is not inference):
                self.compilers[task.task] = KeyCompiler(inference, view).start()
                self.metrics[task.task].key_compile("started")

    def _count_compiles_ended(self) -> None:
        """Count each compile that ended since the last call, done or failed (what a benchmark waits
        for before it measures the steady state)."""
        for task, compiler in self.compilers.items():
            if compiler.done.is_set() and self._counted.get(task) is not compiler:
                self._counted[task] = compiler
                self.metrics[task].key_compile("done" if compiler.seconds is not None else "failed")

    def _follow_models(self, graph: LiveGraph) -> bool:
        """Load the model version each task's workers are ordered to serve; whether one changed."""
        changed = False
        for task in self.tasks:
            wanted = task.models.version if task.models else 1
            bundle = Path(task.bundle_dir)
            if task.models is not None:
                order = ModelControl(task.models.control_dir).current_order(task.task)
                if order is not None and order.version != wanted:
                    found = find_version(Path(task.models.artifacts), task.task, order.version)
                    if found is not None:
                        wanted, bundle = order.version, found.directory
            held = self.models.get(task.task)
            if held is not None and held[0] == wanted:
                continue
            started = time.perf_counter()
            inference = self.load(bundle, graph)
            self.models[task.task] = (wanted, inference)
            changed = True
            log.info("%s: article keys computed with model version %d (loaded in %.1f s)", task.task, wanted,
                     time.perf_counter() - started)
        return changed
