"""The owner's side of the shared live graph: write a version, publish it, free the old ones.

A version is immutable once published: :meth:`Publisher.publish` writes ``v<N>.graph`` whole, then
makes ``N`` current in the header (:mod:`models.store.shared_header`). Files two versions back are
unlinked: a reader that mapped one keeps its pages until it drops the version (the kernel frees
them then), and a reader that read the header just before may still open the previous one.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path

from models.store.live_view import LiveView
from models.store.shared_codec import write_version
from models.store.shared_header import GraphHeader, Published, version_file

KEEP = 2  # versions left on disk: the current one and the one before it


class Publisher:
    """Publishes the versions of one live graph into ``directory`` (created if missing).

    Version numbers go on from the header's (a restarted owner never reuses one a reader may hold).

    Args:
        directory: the shared directory (:func:`models.store.shared_header.shared_dir`).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.header = GraphHeader(self.directory, create=True)
        last = self.header.read()
        self.version = last.version if last is not None else 0
        self.keys = (last.keys_version, last.keys_sequence) if last is not None else (0, 0)
        self.last = last
        self.bytes_written = 0

    def publish(self, view: LiveView) -> Published:
        """Write ``view`` as the next version and make it current."""
        version = self.version + 1
        path = version_file(self.directory, version)
        building = path.with_suffix(".building")
        self.bytes_written = write_version(view, building)
        os.replace(building, path)
        delta_rows = (view.num_transactions - view.base.num_transactions
                      + sum(len(n.ids) for n in view.nodes.values()))
        published = Published(version, view.sequence, view.base.sequence, delta_rows, os.getpid(),
                              time.time(), *self.keys, base_dir=Path(view.base.directory).resolve())
        self.header.publish(published)
        self.version, self.last = version, published
        for old in self.directory.glob("v*.graph"):
            number = old.stem[1:]
            if number.isdigit() and int(number) <= version - KEEP:
                old.unlink(missing_ok=True)
        return published

    def publish_keys(self, number: int, sequence: int) -> None:
        """Say that the article keys files ``k<number>-<task>.keys`` (written whole before) are
        current, covering the graph up to log batch ``sequence``; the graph version stays."""
        if self.last is None:
            raise RuntimeError("publish a graph version before its keys")
        self.keys = (number, sequence)
        self.last = dataclasses.replace(self.last, keys_version=number, keys_sequence=sequence,
                                        updated=time.time())
        self.header.publish(self.last)
        for old in self.directory.glob("k*.keys"):
            head = old.name[1:].split("-", 1)[0]
            if head.isdigit() and int(head) <= number - KEEP:
                old.unlink(missing_ok=True)

    def close(self) -> None:
        self.header.close()


def remove_shared(directory: Path) -> None:
    """Delete a server's shared directory (the server has stopped: nothing reads it any more)."""
    shutil.rmtree(directory, ignore_errors=True)
