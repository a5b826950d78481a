"""``python -m serve.bench.candidates``: both sides timed on a real bundle, a clear error without one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from serve.bench.candidates import main

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # compiles the purchase bucket ladder


def test_the_candidates_benchmark_times_both_sides(trained_artifacts: Path, tmp_path: Path) -> None:
    copy = tmp_path / "artifacts"
    shutil.copytree(trained_artifacts / "purchase", copy / "purchase")  # warm-up writes its compile cache
    (copy / "snapshot").symlink_to(trained_artifacts / "snapshot")
    # Its own process: the benchmark sets torch's threads and compiles, which must not reach later tests.
    command = [sys.executable, "-m", "serve.bench.candidates", "--artifacts", str(copy), "--rounds", "1",
               "--seconds", "0.01", "--sizes", "1", "4"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for size in (1, 4):
        line = next(line for line in out.splitlines() if line.startswith(f"batch {size}:"))
        assert "history only" in line and "24 best sellers beside it" in line
        assert float(line.rsplit("ratio ", 1)[1]) > 0


def test_without_a_purchase_bundle_it_says_so(trained_artifacts: Path, tmp_path: Path, capsys) -> None:
    # in this process: it stops before setting threads or compiling anything
    (tmp_path / "snapshot").symlink_to(trained_artifacts / "snapshot")
    assert main(["--artifacts", str(tmp_path)]) == 2
    assert "no bundle for purchase" in capsys.readouterr().err
