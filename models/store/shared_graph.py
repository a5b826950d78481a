"""A worker's live graph when one owner per machine applies the log: the owner's versions, mapped.

:class:`SharedGraph` is read like a :class:`models.store.live.LiveGraph` (``view()``, ``sequence``,
``now_day``, ``lookup``, ``base`` and the snapshot attributes of its current version), but it never
applies a batch: before each ``view()`` it compares the version the owner published
(:class:`models.store.shared_header.GraphHeader`, one mapped 8-byte read) with the one it holds and,
when it moved, maps the new version file (:func:`models.store.shared_codec.read_version`). A
version on another base snapshot (a compaction) opens that snapshot and holds a lease on it while
served. So a worker serves a batch from its first answer after the owner published it, whatever
the number of workers, without a thread of its own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from torch import Tensor

from models.store.live import VersionedGraph
from models.store.live_view import LiveView
from models.store.shared_codec import VersionFileError, load, read_version
from models.store.shared_header import GraphHeader, HeaderBusy, Published, keys_file, version_file
from models.store.snapshot import GraphSnapshot, SnapshotError
from models.store.versions import Lease

log = logging.getLogger(__name__)

WAIT_S = 600.0  # longest a starting worker waits for the owner's first version (a long log to replay)


class GraphNotPublished(RuntimeError):
    """No version was published within the wait (the owner is not running, or still replaying)."""


class SharedGraph(VersionedGraph):
    """The owner's current version of the live graph (see the module docstring).

    Args:
        directory: the owner's shared directory (:func:`models.store.shared_header.shared_dir`).
        clock: ``() -> day``: a seed day to use when later than the day after the latest transaction,
            as :class:`models.store.live.LiveGraph` takes it.
        wait_s: how long to wait for a first version.
    """

    def __init__(self, directory: Path, clock: Callable[[], int] | None = None,
                 wait_s: float = WAIT_S) -> None:
        self.directory = Path(directory)
        self.clock = clock
        self._lock = threading.Lock()
        self._base: GraphSnapshot | None = None
        self._lease: Lease | None = None
        self._held = 0
        self._keys_seen: dict[str, int] = {}  # per task, the number of the owner's keys last read
        self.keyed_bundles: dict[str, str] = {}  # per task, the model the owner's keys were computed with
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.header = GraphHeader(self.directory)
                if self.header.version():
                    break
            except FileNotFoundError:
                pass
            if time.monotonic() >= deadline:
                raise GraphNotPublished(f"no live graph was published in {self.directory} within "
                                        f"{wait_s:g} s")
            time.sleep(0.05)
        self.published: Published | None = None
        self._view: LiveView = self._load()

    @property
    def base(self) -> GraphSnapshot:
        return self._latest().base

    @property
    def delta_edges(self) -> int:
        view = self._latest()
        return view.num_transactions - view.base.num_transactions

    @property
    def new_nodes(self) -> dict[str, int]:
        return {t: len(n.ids) for t, n in self._latest().nodes.items()}

    def published_keys(self, task: str, bundle: Path) -> tuple[Tensor, Tensor, tuple] | None:
        """``(keys, popularity, (base, sequence, seed day))``: the owner's article keys of ``task``
        newer than the last ones this returned, if computed with the model in ``bundle`` over the
        base snapshot served now; else ``None``. One mapped read when nothing new was published."""
        number = self.header.keys_version()
        if number == 0 or number == self._keys_seen.get(task):
            return None
        try:
            data = load(keys_file(self.directory, number, task))
        except (OSError, VersionFileError):  # replaced meanwhile: the next call reads the newer one
            return None
        base = self._latest().base
        if data["base_dir"] != str(Path(base.directory).resolve()):
            return None  # keys of a snapshot version not served here yet: look again next time
        self._keys_seen[task], self.keyed_bundles[task] = number, data["bundle"]
        if data["bundle"] != str(Path(bundle).resolve()):
            return None
        return data["keys"], data["popularity"], (base, data["sequence"], data["seed_day"])

    def close(self) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    def _latest(self) -> LiveView:
        if self.header.version() != self._held:
            with self._lock:
                if self.header.version() != self._held:
                    # An owner that died mid-write: answer from the version held until the next one.
                    with contextlib.suppress(HeaderBusy):
                        self._view = self._load()
        return self._view

    def _load(self) -> LiveView:
        """Map the newest version (a newer one may be published meanwhile: its file is read then)."""
        for _ in range(100):
            published = self.header.read()
            if published is None:
                raise GraphNotPublished(f"{self.directory}: the header lost its version")
            try:
                base = self._base_of(published)
            except (OSError, SnapshotError):
                if self.header.version() != published.version:
                    continue  # removed by a compaction after the owner moved on: take the newer one
                raise
            try:
                view = read_version(version_file(self.directory, published.version), base)
            except FileNotFoundError:  # removed after a newer one was published: take that one
                continue
            except VersionFileError:
                log.exception("graph version %d in %s cannot be read", published.version, self.directory)
                raise
            self.published, self._held = published, published.version
            return view
        raise GraphNotPublished(f"{self.directory}: the versions kept changing while opening one")

    def _base_of(self, published: Published) -> GraphSnapshot:
        if self._base is not None and Path(self._base.directory) == published.base_dir:
            return self._base
        lease = Lease.hold(published.base_dir)
        base = GraphSnapshot.open(published.base_dir)
        previous, self._base, self._lease = self._lease, base, lease
        if previous is not None:
            previous.release()
        log.info("serving snapshot version %s", published.base_dir.name)
        return base

