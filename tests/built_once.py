"""What the test session builds once per run, also when pytest-xdist runs it in several workers."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A fresh directory ``mktemp(name)`` holding what ``build(directory)`` writes, built once per run.

    In one process that is just ``build`` into it. Under pytest-xdist the first worker that needs it
    builds it into a folder all workers of the run share, under a file lock (the others wait on the
    lock, then find it built), and every worker gets its own copy: a worker's servers write their
    compile caches into the bundles, which must not change under another worker's feet.
    """
    out = tmp_path_factory.mktemp(name)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        build(out)
        return out
    shared = tmp_path_factory.getbasetemp().parent / "built-once"  # the run's folder, above each worker's
    shared.mkdir(exist_ok=True)
    done = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if build raises
        if not done.is_dir():
            partial = Path(tempfile.mkdtemp(prefix=f"{name}-partial-", dir=shared))
            build(partial)
            partial.rename(done)  # whole or not at all: a failed build is tried again by the next worker
    shutil.copytree(done, out, symlinks=True, dirs_exist_ok=True)
    return out
