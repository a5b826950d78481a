"""A closed-loop HTTP/1.1 keep-alive client on one event loop: the ceiling's load when ``wrk`` is missing.

Same contract as :func:`serve.bench.wrk.run_wrk` (``clients`` connections, each sending its next
request from a pre-encoded cycle when the previous answer arrives; a :class:`WrkResult`), run in a
child process of its own so the client stays one process on one core, as wrk's one thread does.
It costs more CPU per request than wrk (tens of microseconds of Python, on uvloop when installed),
which on a small machine is taken from the servers measured: ratios between servers of one run stay
comparable, absolute req/s read a little lower than under wrk. CPU per request, read from the
servers' own processes, is unaffected.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from serve.bench.wrk import WrkResult


def _encode(host: str, requests: Sequence[tuple[str, dict]]) -> list[bytes]:
    out = []
    for path, body in requests:
        data = json.dumps(body, separators=(",", ":")).encode()
        out.append(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return out


async def _connection(host: str, port: int, encoded: list[bytes], stop_at: float, start: int,
                      latencies: list[float], errors: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    i = start
    try:
        while time.perf_counter() < stop_at:
            sent = time.perf_counter()
            writer.write(encoded[i % len(encoded)])
            i += 1
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - sent)
            if not head.startswith(b"HTTP/1.1 2"):
                errors[0] += 1
    except (OSError, asyncio.IncompleteReadError):
        errors[0] += 1
    finally:
        writer.close()


async def _drive(url: str, requests: Sequence[tuple[str, dict]], clients: int, seconds: float) -> dict:
    parts = urlsplit(url)
    encoded = _encode(parts.netloc, requests)
    latencies: list[float] = []
    errors = [0]
    started = time.perf_counter()
    rng = random.Random()
    await asyncio.gather(*(_connection(parts.hostname, parts.port, encoded, started + seconds,
                                       rng.randrange(len(encoded)), latencies, errors)
                           for _ in range(clients)))
    elapsed = time.perf_counter() - started
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else 0.0

    mean = sum(latencies) / len(latencies) * 1000 if latencies else 0.0
    return {"clients": clients, "requests": len(latencies), "seconds": elapsed, "errors": errors[0],
            "p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": pct(0.99), "mean_ms": mean}


def run_loop_client(url: str, requests: Sequence[tuple[str, dict]], clients: int,
                    seconds: float) -> WrkResult:
    """Drive ``url`` like :func:`serve.bench.wrk.run_wrk`, from a child process (see the module docstring)."""
    payload = json.dumps({"url": url, "requests": list(requests), "clients": clients, "seconds": seconds})
    done = subprocess.run([sys.executable, "-m", __name__], input=payload, capture_output=True, text=True,
                          timeout=seconds + 60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"load client failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return WrkResult(**json.loads(done.stdout))


def main() -> int:
    args = json.loads(sys.stdin.read())
    try:
        from uvloop import run
    except ImportError:
        run = asyncio.run
    result = run(_drive(args["url"], [tuple(r) for r in args["requests"]], args["clients"], args["seconds"]))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
