"""Waiting on events of a real server (a metric value, a status code), never on the clock alone."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from serve.bench.metrics_read import scrape, value
from serve.bench.process import ServerProcess

T = TypeVar("T")


def wait_for(condition: Callable[[], T], what: str, timeout: float = 120.0) -> T:
    """Poll ``condition`` until it returns something truthy, and return that.

    The deadline only turns a hang into a failure naming ``what``: it is far beyond how long the
    event takes on a loaded 2-core machine, so it bounds nothing the test asserts.
    """
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        time.sleep(0.02)
    return value


def metric(server: ServerProcess, name: str, **labels: str) -> float:
    """The value of series ``name{labels}`` on ``/metrics`` (0 when the series does not exist yet)."""
    return value(scrape(server.url), name, **labels)


def batches(server: ServerProcess, task: str) -> tuple[float, float]:
    """``(batches run, requests in them)`` of ``task``'s workers so far, from the batch-size
    histogram (a batch of unknown ids alone runs no model and is not counted)."""
    samples = scrape(server.url)
    return (value(samples, "relserve_batch_size_count", task=task),
            value(samples, "relserve_batch_size_sum", task=task))
