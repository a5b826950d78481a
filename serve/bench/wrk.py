"""Closed-loop HTTP load from ``wrk`` (C, event-driven) with a Lua script cycling through given requests.

Why wrk rather than the Python clients of :mod:`serve.bench.load` or Locust: on a 2-core machine
the load generator shares the cores with the server it measures. A thread per Python client costs
tens of microseconds of interpreter time per request, which at 1,000+ req/s is a large share of a
core taken from the server; wrk's one event-loop thread sends and parses HTTP in C and its Lua
``request()`` hook only returns a pre-formatted request, so the client stays at a few percent of
a core and the ratios measure the servers. wrk is closed-loop like the other clients: each
connection sends its next request when the previous answer arrives.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

WRK = "wrk"

# args[1]: file of "PATH JSON-BODY" lines, sent in order, cycled; done() prints one JSON line.
LUA = r"""
local reqs = {}
local i = 0
function init(args)
  local f = assert(io.open(args[1], "r"))
  for line in f:lines() do
    local path, body = line:match("^(%S+) (.*)$")
    reqs[#reqs + 1] = wrk.format("POST", path, {["Content-Type"] = "application/json"}, body)
  end
  f:close()
  i = math.random(#reqs)
end
function request()
  i = i + 1
  if i > #reqs then i = 1 end
  return reqs[i]
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "connect": %d, "read": %d, "write": %d, ' ..
    '"status": %d, "timeout": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "mean_us": %.1f, ' ..
    '"max_us": %d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max))
end
"""


@dataclass
class WrkResult:
    """One wrk run: ``requests`` answered in ``seconds``; ``errors``: non-2xx answers and socket errors."""

    clients: int
    requests: int
    seconds: float
    errors: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float

    @property
    def rps(self) -> float:
        """Successful (2xx) answers per second."""
        return (self.requests - self.errors) / self.seconds

    def summary(self) -> dict[str, float | int]:
        return {"clients": self.clients, "rps": round(self.rps, 1), "errors": self.errors,
                "p50_ms": round(self.p50_ms, 2), "p90_ms": round(self.p90_ms, 2),
                "p99_ms": round(self.p99_ms, 2), "mean_ms": round(self.mean_ms, 2)}


def have_wrk() -> bool:
    return shutil.which(WRK) is not None


def run_wrk(url: str, requests: Sequence[tuple[str, dict]], clients: int, seconds: float,
            threads: int = 1) -> WrkResult:
    """Drive ``url`` with ``clients`` connections for ``seconds``, cycling through ``(path, body)``.

    Args:
        url: ``http://host:port``.
        requests: the requests, in the order they are sent (each run starts at a random one).
        clients: concurrent keep-alive connections.
        seconds: length of the run (whole seconds; wrk counts in seconds).
        threads: wrk threads (1 keeps the client on one core).
    """
    with tempfile.TemporaryDirectory(prefix="relserve-wrk-") as tmp:
        script, lines = Path(tmp) / "mix.lua", Path(tmp) / "requests.txt"
        script.write_text(LUA)
        lines.write_text("".join(f"{path} {json.dumps(body, separators=(',', ':'))}\n"
                                 for path, body in requests))
        command = [WRK, "-t", str(min(threads, clients)), "-c", str(clients),
                   "-d", f"{max(1, round(seconds))}s", "--timeout", "30s", "-s", str(script), url,
                   "--", str(lines)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip() or done.stdout[-500:]}")
    r = json.loads(line.removeprefix("WRK_JSON "))
    socket_errors = r["connect"] + r["read"] + r["write"] + r["timeout"]
    return WrkResult(clients=clients, requests=r["requests"], seconds=r["duration_us"] / 1e6,
                     errors=r["status"] + socket_errors, p50_ms=r["p50_us"] / 1000, p90_ms=r["p90_us"] / 1000,
                     p99_ms=r["p99_us"] / 1000, mean_ms=r["mean_us"] / 1000)
