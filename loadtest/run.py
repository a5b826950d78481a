"""``python -m loadtest.run``: a bounded, headless Locust run against relserve, with a written report.

Starts ``python -m serve`` on a free loopback port and waits for ``/health`` (or targets
``--host``), runs :class:`loadtest.locustfile.RelserveUser` for ``--duration``, stops the users
and the server it started, and writes into ``--out``: ``summary.json``, ``summary.csv``,
``timeline.csv``, ``latency_throughput.png``, the id file and the server log. Exit status 0 when
every request got the answer it expected and the started server stopped cleanly, 1 otherwise,
2 on bad arguments.
"""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING, Any

from loadtest.config import PROG, RunConfig, parse_args

if TYPE_CHECKING:
    from serve.bench.process import ServerProcess


class LoadTestError(Exception):
    """A run that cannot go on; the message is the one line shown."""


def _start_server(config: RunConfig) -> ServerProcess:
    from serve.bench.process import ServerProcess

    server = ServerProcess(config.artifacts, *shlex.split(config.server_args),
                           log_path=config.out / "serve.log")
    print(f"{PROG}: starting python {shlex.join(server.command[1:])}; waiting for /health", file=sys.stderr,
          flush=True)
    server.start()
    try:
        seconds = server.wait_ready(config.ready_timeout_s)
    except (RuntimeError, TimeoutError) as e:
        server.stop()
        last_line = (server.log().strip().splitlines() or [""])[-1]
        raise LoadTestError(f"the server did not become ready ({str(e).splitlines()[0].rstrip(':')}): "
                            f"{last_line} (log: {server.log_path})") from e
    print(f"{PROG}: server ready at {server.url} after {seconds:.1f} s", file=sys.stderr, flush=True)
    return server


def _check_host(url: str) -> None:
    from serve.bench.process import http_status

    status = http_status(url.rstrip("/") + "/health", timeout=5.0)
    if status != 200:
        raise LoadTestError(f"no ready server at {url}: GET /health gave {status or 'no answer'}")


def run(config: RunConfig) -> dict[str, Any]:
    """Run the load test of ``config``; returns the summary (also written into ``config.out``)."""
    # Importing Locust (loadtest.session) makes gevent patch the standard library, which must
    # happen before torch (IdPool.from_snapshot) or serve.bench.process import ssl.
    from loadtest.id_pool import IdPool, IdPoolError
    from loadtest.record import summarize, timeline
    from loadtest.report import write_report
    from loadtest.session import LoadShape, run_locust

    config.out.mkdir(parents=True, exist_ok=True)
    try:
        pool = IdPool.from_snapshot(config.artifacts / "snapshot", config.max_ids, config.seed)
    except IdPoolError as e:
        raise LoadTestError(str(e)) from e
    ids_file = pool.save(config.out / "ids.json")
    server = None if config.host else _start_server(config)
    server_exit = None
    try:
        url = config.host or server.url
        if config.host:
            _check_host(url)
        shape = LoadShape(config.users, config.spawn_rate, config.duration_s, config.think_ms,
                          config.bad_share)
        outcome = run_locust(url, ids_file, shape, progress=not config.quiet)
    finally:
        if server is not None:
            server_exit = server.stop()
    summary = {"target": url, "server_started": server is not None, "server_exit_code": server_exit,
               "users": config.users, "spawn_rate": config.spawn_rate, "think_ms": config.think_ms,
               "bad_share": config.bad_share, "command": config.command,
               **summarize(outcome.log), "user_exceptions": outcome.user_exceptions}
    write_report(config.out, summary, timeline(outcome.log))
    return summary


def describe(summary: dict[str, Any]) -> str:
    """A few lines for the terminal: per endpoint RPS and percentiles, then the error counts."""
    from loadtest.report import endpoint_rows

    lines = [f"{'endpoint':<20}{'requests':>9}{'rps':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'fail':>6}"]
    for name, row in endpoint_rows(summary):
        lines.append(f"{name:<20}{row['requests']:>9}{row['rps']:>9.1f}{row['p50_ms']:>9.1f}"
                     f"{row['p95_ms']:>9.1f}{row['p99_ms']:>9.1f}{row['failures']:>6}")
    lines.append(f"expected 4xx: {summary['expected_4xx']}, unexpected failures: "
                 f"{summary['unexpected_failures']}, user exceptions: {len(summary['user_exceptions'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status."""
    config = parse_args(argv)
    try:
        summary = run(config)
    except LoadTestError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    print(describe(summary))
    print(f"{PROG}: report in {config.out}", file=sys.stderr)
    problems = summary["unexpected_failures"] + len(summary["user_exceptions"])
    if problems:
        first = next(iter(summary["failure_messages"]), "") or summary["user_exceptions"][0]
        print(f"{PROG}: error: {problems} unexpected failures, e.g. {first}", file=sys.stderr)
    if summary["server_started"] and summary["server_exit_code"] != 0:
        print(f"{PROG}: error: the server exited with {summary['server_exit_code']} on SIGTERM, not 0 "
              f"(see {config.out / 'serve.log'})", file=sys.stderr)
        problems += 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
