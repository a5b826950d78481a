"""Handing the GIL over faster while a worker's background thread does heavy Python work.

A worker answers in one thread while another loads a model version (:mod:`serve.versions.swap`) or
recomputes its own purchase article keys (:mod:`serve.graph.keys`, while the graph owner keys another
model). Python hands the GIL to a waiting thread only every
``sys.getswitchinterval()`` (5 ms by default), and the answering thread drops it at every torch op
and socket call: each time, the background thread keeps it up to the whole interval, so a request
that releases the GIL a few dozen times waits a few dozen intervals. While a background thread is
busy, the interval is 0.2 ms instead (a stalled batch went from about 1 s to 0.55 s while a demo
bundle compiled beside it; see BENCHMARKS.md for the ingestion figures).
"""

from __future__ import annotations

import sys
import threading

BUSY_SWITCH_INTERVAL_S = 0.0002


class FastSwitching:
    """Process-wide: while any thread is inside a ``with FAST_SWITCHING:`` block, the GIL changes hands
    every :data:`BUSY_SWITCH_INTERVAL_S`; the interval before the first one entered is restored when
    the last one leaves (nested and concurrent blocks from several threads are counted)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._saved = sys.getswitchinterval()

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(self._saved, BUSY_SWITCH_INTERVAL_S))
            self._inside += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                sys.setswitchinterval(self._saved)


FAST_SWITCHING = FastSwitching()
