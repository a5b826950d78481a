"""A clock that moves only when a test says so, for code that paces itself by the clock.

A follower spaces its steps and key refreshes by what they cost on the wall clock; a test that
measured real seconds would pass or fail with the machine's load. Installed over a module's
``time``, this clock makes every cost and every pause a number the test chose, so the test
asserts on what happened (which step refreshed, in which order) and never on how long it took.
"""

from __future__ import annotations

import threading
import time
from types import ModuleType

import pytest


class FakeClock:
    """Stands in for the ``time`` module of the modules it is installed in.

    ``monotonic``, ``perf_counter`` and ``thread_time`` read the fake seconds alone (they move only
    with :meth:`advance`); ``time`` is the real epoch time plus those seconds, so that it stays
    comparable with the receipt times that other modules stamp with the real clock.
    """

    def __init__(self) -> None:
        self._seconds = 0.0
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (a step's cost, or a pause that has passed)."""
        with self._lock:
            self._seconds += seconds

    def monotonic(self) -> float:
        return self._seconds

    perf_counter = monotonic
    thread_time = monotonic

    def time(self) -> float:
        return time.time() + self._seconds

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def install(self, monkeypatch: pytest.MonkeyPatch, *modules: ModuleType) -> FakeClock:
        """Replace ``time`` in each of ``modules`` (for the test's duration); returns the clock.

        Args:
            monkeypatch: the test's fixture, which restores the modules afterwards.
            modules: modules that ``import time`` and call ``time.<function>()``.
        """
        for module in modules:
            assert getattr(module, "time", None) is time, f"{module.__name__} does not use the time module"
            monkeypatch.setattr(module, "time", self)
        return self
