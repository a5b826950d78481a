"""Closed-loop HTTP load on one endpoint: N clients, each sending its next request on answer.

Each client is a thread with one keep-alive ``http.client`` connection (the cheapest Python
client, which matters when clients and server share two cores). Used by ``serve.bench``.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class LoadResult:
    """What one load run measured.

    Args:
        clients: concurrent clients.
        seconds: wall time of the measured window.
        latencies_s: latency of every answered request (any status), in seconds.
        statuses: count per HTTP status; ``0`` counts connection errors.
    """

    clients: int
    seconds: float
    latencies_s: list[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)

    @property
    def ok(self) -> int:
        return self.statuses.get(200, 0)

    @property
    def throughput(self) -> float:
        """Successful requests per second."""
        return self.ok / self.seconds if self.seconds > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1000) if self.latencies_s else float("nan")

    def summary(self) -> dict[str, float | int | dict]:
        return {"clients": self.clients, "rps": round(self.throughput, 1), "ok": self.ok,
                "errors": {s: n for s, n in sorted(self.statuses.items()) if s != 200},
                "p50_ms": round(self.percentile_ms(50), 2), "p95_ms": round(self.percentile_ms(95), 2),
                "p99_ms": round(self.percentile_ms(99), 2)}


def _client(host: str, port: int, requests: Sequence[tuple[str, bytes]], offset: int, stop_at: float,
            measure_from: float, result: LoadResult, lock: threading.Lock) -> None:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    headers = {"Content-Type": "application/json"}
    latencies, statuses, i = [], Counter(), offset
    while time.perf_counter() < stop_at:
        path, body = requests[i % len(requests)]
        i += 1
        started = time.perf_counter()
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            status = response.status
            if response.getheader("connection", "").lower() == "close":
                conn.close()
        except (OSError, http.client.HTTPException):
            status = 0
            conn.close()
        if started >= measure_from:
            latencies.append(time.perf_counter() - started)
            statuses[status] += 1
    conn.close()
    with lock:
        result.latencies_s.extend(latencies)
        result.statuses.update(statuses)


def run_load(url: str, path: str, bodies: Sequence[dict], clients: int, seconds: float,
             warmup_s: float = 1.0) -> LoadResult:
    """Drive ``POST url+path`` with ``clients`` closed-loop clients for ``seconds`` (after ``warmup_s``).

    Args:
        url: ``http://host:port``.
        path: a task's route, its registry ``TaskSpec.path``.
        bodies: request bodies, cycled through (each client starts at a different one).
        clients: concurrent clients.
        seconds: measured window; requests started during the warm-up are not counted.
        warmup_s: unmeasured lead-in that fills the pipeline.
    """
    return run_requests(url, [(path, json.dumps(b).encode()) for b in bodies], clients, seconds, warmup_s)


def run_requests(url: str, requests: Sequence[tuple[str, bytes]], clients: int, seconds: float,
                 warmup_s: float = 1.0) -> LoadResult:
    """:func:`run_load` over ``(path, JSON body)`` requests, e.g. a mix of endpoints, cycled through."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    start = time.perf_counter()
    measure_from, stop_at = start + warmup_s, start + warmup_s + seconds
    result, lock = LoadResult(clients, seconds), threading.Lock()
    threads = [threading.Thread(target=_client, args=(host, int(port), requests, n * 7919 % len(requests),
                                                      stop_at, measure_from, result, lock), daemon=True)
               for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.seconds = max(1e-9, time.perf_counter() - measure_from)
    return result
