"""Every request of a load test, as Locust reports it, and the numbers the report is made of.

Locust's own statistics round latencies into buckets and mix the deliberately bad requests into
the totals, so the run keeps its own log (one row per request, from Locust's ``request`` event)
and computes exact percentiles over the good traffic from it.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models.registry import TASK_NAMES
from models.registry import TASKS as TASK_SPECS

# Report order: by share of the traffic.
TASKS = tuple(sorted(TASK_NAMES, key=lambda task: -TASK_SPECS[task].load_share))
PERCENTILES = (50, 95, 99)


@dataclass
class RequestLog:
    """Requests answered during a run (or failed to be), and the user count over time.

    Attributes:
        end_s: per request, when it finished (epoch seconds).
        latency_ms: per request, Locust's response time.
        task, kind, status: per request; ``kind`` is ``ok`` for good traffic; status 0: no answer.
        ok: per request, whether the answer was the expected one.
        errors: failure message counts.
        users: ``(epoch seconds, running users)`` samples.
    """

    started_s: float = field(default_factory=time.time)
    recording: bool = True
    end_s: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    task: list[str] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    status: list[int] = field(default_factory=list)
    ok: list[bool] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    users: list[tuple[float, int]] = field(default_factory=list)

    def on_request(self, response_time: float, context: dict[str, Any], exception: Exception | None,
                   start_time: float | None = None, response: Any = None, name: str = "", **_: Any) -> None:
        """Locust ``request`` event listener."""
        if not self.recording:  # requests cut short by the stop are not measurements
            return
        self.end_s.append((start_time or time.time()) + response_time / 1000.0)
        self.latency_ms.append(float(response_time))
        self.task.append(context.get("task", name))
        self.kind.append(context.get("kind", "ok"))
        self.status.append(int(getattr(response, "status_code", 0) or 0))
        self.ok.append(exception is None)
        if exception is not None:
            self.errors[f"{name}: {exception}"[:300]] += 1

    def stop(self) -> None:
        self.recording = False

    @property
    def duration_s(self) -> float:
        return max(1e-9, (max(self.end_s) if self.end_s else time.time()) - self.started_s)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"end": np.asarray(self.end_s, dtype=np.float64), "latency": np.asarray(self.latency_ms),
                "task": np.asarray(self.task, dtype=object), "good": np.asarray(self.kind) == "ok",
                "status": np.asarray(self.status, dtype=np.int64), "ok": np.asarray(self.ok, dtype=bool)}


def latency_stats(latency_ms: np.ndarray, failures: int, seconds: float) -> dict[str, float | int]:
    """Requests, failures, requests per second and latency percentiles (ms) of one group of requests."""
    row: dict[str, float | int] = {"requests": int(latency_ms.size), "failures": int(failures),
                                   "rps": round(latency_ms.size / seconds, 2)}
    for q in PERCENTILES:
        row[f"p{q}_ms"] = round(float(np.percentile(latency_ms, q)), 2) if latency_ms.size else float("nan")
    row["mean_ms"] = round(float(latency_ms.mean()), 2) if latency_ms.size else float("nan")
    row["max_ms"] = round(float(latency_ms.max()), 2) if latency_ms.size else float("nan")
    return row


def summarize(log: RequestLog) -> dict[str, Any]:
    """Per task and in total: the good traffic's throughput and latency; counts of the rest."""
    a, seconds = log.arrays(), log.duration_s
    good = a["good"]
    endpoints = {}
    for task in TASKS:
        rows = good & (a["task"] == task)
        endpoints[task] = latency_stats(a["latency"][rows], int((rows & ~a["ok"]).sum()), seconds)
    expected_4xx = ~good & a["ok"]
    statuses = Counter(int(s) for s in a["status"])
    return {
        "duration_s": round(seconds, 2),
        "endpoints": endpoints,
        "total": latency_stats(a["latency"][good], int((good & ~a["ok"]).sum()), seconds),
        "requests": int(a["status"].size),
        "expected_4xx": int(expected_4xx.sum()),
        "unexpected_failures": int((~a["ok"]).sum()),
        "statuses": {str(s): n for s, n in sorted(statuses.items())},
        "failure_messages": dict(log.errors.most_common(20)),
    }


def timeline(log: RequestLog) -> list[dict[str, float]]:
    """Per second of the run: users, good requests per task, expected 4xx, failures, latency percentiles."""
    a = log.arrays()
    second = np.floor(a["end"] - log.started_s).astype(np.int64)
    num_seconds = int(second.max()) + 1 if second.size else 0
    # A sample taken at the end of second s (t = s + 1.00x) describes second s.
    user_counts = {math.ceil(t - log.started_s) - 1: n for t, n in log.users}
    rows, users = [], 0
    for s in range(num_seconds):
        users = user_counts.get(s, users)
        in_second = second == s
        good = in_second & a["good"]
        row: dict[str, float] = {"second": s, "users": users}
        for task in TASKS:
            row[f"{task}_rps"] = int((good & (a["task"] == task)).sum())
        row["expected_4xx"] = int((in_second & ~a["good"] & a["ok"]).sum())
        row["failures"] = int((in_second & ~a["ok"]).sum())
        latencies = a["latency"][good]
        for q in PERCENTILES:
            row[f"p{q}_ms"] = round(float(np.percentile(latencies, q)), 2) if latencies.size else float("nan")
        rows.append(row)
    return rows
