"""Compile cache of real servers: read-only bundles still start warm, concurrent writers leave one file.

A production mount of the model files is read-only. The first start then writes its compile cache
to the per-user cache directory (``$XDG_CACHE_HOME/relserve``) and the second start loads it. Two
workers of one task both compile and both save one artifact: per-process temporary names and an
atomic rename leave exactly one complete, sealed file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from models.runtime.bundle import CACHE_DIR, SNAPSHOT_DIR
from models.runtime.compile_cache import unseal
from serve.bench.metrics_read import scrape, series
from serve.bench.process import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TASK = "churn"
ARGS = ("--tasks", TASK, "--max-batch-size", "8", "--threads", "1")


def bundle_copy(artifacts: Path, out: Path) -> Path:
    """The task's bundle (with an empty compile cache) beside a link to the session's snapshot."""
    out.mkdir()
    (out / SNAPSHOT_DIR).symlink_to(artifacts / SNAPSHOT_DIR)
    shutil.copytree(artifacts / TASK, out / TASK, ignore=shutil.ignore_patterns(CACHE_DIR))
    (out / TASK / CACHE_DIR).mkdir()
    return out


def cache_results(server: ServerProcess) -> dict[str, float]:
    """``relserve_compile_cache_total`` of the task, by result."""
    found = series(scrape(server.url), "relserve_compile_cache_total")
    return {dict(labels)["result"]: v for labels, v in found.items() if dict(labels)["task"] == TASK}


def read_only(directory: Path, server: ServerProcess) -> None:
    """Make ``directory`` read-only for ``server``: mode bits, or for root (who ignores them) a
    read-only bind mount in the server's own mount namespace."""
    if os.geteuid() != 0:
        for path in (directory, *directory.rglob("*")):
            if not path.is_symlink():
                path.chmod(path.stat().st_mode & ~0o222)
        return
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"root without mount namespaces cannot make a read-only directory: {probe.stderr!r}")
    mount = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    server.command = ["unshare", "-m", "sh", "-c", mount, str(directory), *server.command]


@contextmanager
def started(server: ServerProcess) -> Iterator[ServerProcess]:
    with server:
        server.wait_ready(timeout=900)
        yield server


def test_a_read_only_bundle_starts_warm_from_the_second_start(artifacts: Path, tmp_path: Path) -> None:
    copy = bundle_copy(artifacts, tmp_path / "art")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    for attempt, expected in enumerate(("miss", "hit")):
        server = ServerProcess(copy, *ARGS, env=env, log_path=tmp_path / f"serve-{attempt}.log")
        read_only(copy, server)
        with started(server):
            assert cache_results(server).get(expected) == 1.0, (cache_results(server), server.log()[-3000:])
        assert "compile cache not saved" not in server.log(), server.log()[-3000:]
    assert not any((copy / TASK / CACHE_DIR).iterdir()), "nothing may be written into the bundle"
    (saved,) = (tmp_path / "xdg" / "relserve").glob(f"{TASK}-*/*.bin")
    assert unseal(saved.read_bytes()) is not None


def test_two_workers_of_one_task_leave_one_valid_artifact(artifacts: Path, tmp_path: Path) -> None:
    copy = bundle_copy(artifacts, tmp_path / "art")
    server = ServerProcess(copy, *ARGS, "--workers-per-task", "2", log_path=tmp_path / "serve.log")
    with started(server):
        results = cache_results(server)  # both miss, unless one started after the other had saved
        assert sum(results.values()) == 2.0 and results.get("miss", 0) >= 1, server.log()[-3000:]
    files = sorted(p.name for p in (copy / TASK / CACHE_DIR).iterdir())
    assert len(files) == 1 and files[0].endswith(".bin"), files  # no temporary file left behind
    body = unseal((copy / TASK / CACHE_DIR / files[0]).read_bytes())
    assert body is not None, "the artifact's seal must match its content"
    header, _, payload = body.partition(b"\n")
    for name, offset, length, digest in json.loads(header)["parts"]:
        assert hashlib.sha256(payload[offset:offset + length]).hexdigest() == digest, name
