"""Settings of ``python -m loadtest.run``: one dataclass, filled from the command line."""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from loadtest.traffic import DEFAULT_BAD_SHARE
from models.cli import OneLineErrors

PROG = "python -m loadtest.run"
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")


def parse_duration(text: str) -> float:
    """Seconds of ``"90"``, ``"90s"``, ``"2m"``, ``"1m30s"`` or ``"1h"`` (Locust's ``-t`` format)."""
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None or not any(match.groups()):
        raise ValueError(f"--duration must look like 60s, 2m or 1m30s, got {text!r}")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


@dataclass
class RunConfig:
    """One load test.

    Args:
        artifacts: the served bundles' directory; its ``snapshot/`` supplies the ids.
        out: report directory (created).
        users: concurrent simulated users.
        spawn_rate: users started per second.
        duration_s: seconds of load, spawning included.
        host: a running server's URL; ``None``: start ``python -m serve`` on a free loopback port.
        server_args: extra ``python -m serve`` arguments for the started server.
        think_ms: mean think time between a user's requests (0: closed loop, measures capacity).
        bad_share: share of deliberately bad requests (each must be answered its 4xx).
        max_ids: most ids per entity drawn from (most popular first).
        ready_timeout_s: longest wait for the started server's ``/health`` (compile and warm-up).
        seed: id ranking ties and absent ids.
        quiet: no progress bar.
        command: the command line, for the report.
    """

    artifacts: Path
    out: Path
    users: int = 8
    spawn_rate: float = 8.0
    duration_s: float = 60.0
    host: str | None = None
    server_args: str = ""
    think_ms: float = 0.0
    bad_share: float = DEFAULT_BAD_SHARE
    max_ids: int = 20_000
    ready_timeout_s: float = 900.0
    seed: int = 0
    quiet: bool = False
    command: str = ""

    def __post_init__(self) -> None:
        self.artifacts, self.out = Path(self.artifacts), Path(self.out)
        url = urlsplit(self.host or "")
        checks = [
            (self.artifacts.is_dir(), f"--artifacts {self.artifacts} is not a directory"),
            ((self.artifacts / "snapshot").is_dir(),
             f"--artifacts {self.artifacts} has no snapshot/ (make one with python -m training.fit)"),
            (self.users >= 1, "--users must be at least 1"),
            (self.spawn_rate > 0, "--spawn-rate must be positive"),
            (self.duration_s >= 1, "--duration must be at least 1s"),
            (self.host is None or (url.scheme in ("http", "https") and bool(url.netloc)),
             f"--host must be a URL like http://127.0.0.1:8000, got {self.host!r}"),
            (self.think_ms >= 0, "--think-ms must not be negative"),
            (0 <= self.bad_share <= 1, "--bad-share must be in 0..1"),
            (self.max_ids >= 1, "--max-ids must be at least 1"),
            (self.ready_timeout_s > 0, "--ready-timeout must be positive"),
            (not (self.host and self.server_args), "--server-args only applies to a server this run starts"),
            (_splits(self.server_args), f"--server-args cannot be split: {self.server_args!r}"),
            (not self.out.exists() or self.out.is_dir(), f"--out {self.out} exists and is not a directory"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


def _splits(args: str) -> bool:
    try:
        shlex.split(args)
    except ValueError:
        return False
    return True


def parse_args(argv: list[str] | None = None) -> RunConfig:
    """A :class:`RunConfig` from ``argv``; exits 2 with one line on a bad argument."""
    p = OneLineErrors(prog=PROG, description="Load-test relserve with Locust (headless, time-bounded) "
                                             "and write a latency/throughput report.")
    p.add_argument("--artifacts", type=Path, required=True, help="bundles + snapshot/ (ids come from it)")
    p.add_argument("--out", type=Path, default=Path("loadtest-report"), help="report directory")
    p.add_argument("--users", "-u", type=int, default=RunConfig.users)
    p.add_argument("--spawn-rate", "-r", type=float, default=RunConfig.spawn_rate, help="users started per s")
    p.add_argument("--duration", "-t", default="60s", help="e.g. 60s, 2m, 1m30s")
    p.add_argument("--host", default=None, help="target this running server instead of starting one")
    p.add_argument("--server-args", default="", help='python -m serve arguments, e.g. "--max-batch-size 8"')
    p.add_argument("--think-ms", type=float, default=RunConfig.think_ms, help="mean pause (0: closed loop)")
    p.add_argument("--bad-share", type=float, default=RunConfig.bad_share, help="share of bad requests")
    p.add_argument("--max-ids", type=int, default=RunConfig.max_ids)
    p.add_argument("--ready-timeout", type=float, default=RunConfig.ready_timeout_s, metavar="S")
    p.add_argument("--seed", type=int, default=RunConfig.seed)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    argv = sys.argv[1:] if argv is None else argv
    a = p.parse_args(argv)
    try:
        return RunConfig(
            artifacts=a.artifacts, out=a.out, users=a.users, spawn_rate=a.spawn_rate,
            duration_s=parse_duration(a.duration), host=a.host, server_args=a.server_args,
            think_ms=a.think_ms, bad_share=a.bad_share, max_ids=a.max_ids, ready_timeout_s=a.ready_timeout,
            seed=a.seed, quiet=a.quiet,
            command=f"{PROG} {shlex.join(argv)}",
        )
    except ValueError as e:
        p.error(str(e))
        raise  # unreachable: error() exits
