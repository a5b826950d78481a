"""``python -m serve.score`` given bad arguments or paths: one error line, a non-zero exit, no traceback;
and the atomic streaming write it relies on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from models.files import atomic_open

REPO = Path(__file__).resolve().parents[2]
PROG = "python -m serve.score"


def one_error_line(*args: str, expected: str, code: int = 2) -> None:
    result = subprocess.run([sys.executable, "-m", "serve.score", *args], capture_output=True, text=True,
                            timeout=300, cwd=REPO)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert result.returncode == code and len(lines) == 1, (result.returncode, result.stderr[-3000:])
    assert lines[0].startswith(f"{PROG}: error: ") and expected in lines[0], lines[0]


def test_a_missing_artifacts_directory(tmp_path):
    one_error_line("--artifacts", str(tmp_path / "nope"), "--out", str(tmp_path / "x.csv"),
                   expected=f"--artifacts {tmp_path / 'nope'} is not a directory")


def test_artifacts_without_a_snapshot(tmp_path):
    one_error_line("--artifacts", str(tmp_path), "--out", str(tmp_path / "out"), expected="has no snapshot/")


def test_artifacts_without_the_requested_bundle(tmp_path):
    (tmp_path / "snapshot").mkdir()
    one_error_line("--artifacts", str(tmp_path), "--task", "sales", "--out", str(tmp_path / "s.csv"),
                   expected="has no bundle for sales")


@pytest.mark.parametrize("args, expected", [
    (["--batch-size", "0"], "--batch-size must be in 1..8192"),
    (["--task", "nope"], "argument --task: invalid choice: 'nope'"),
    (["--format", "xlsx"], "argument --format: invalid choice: 'xlsx'"),
    (["--threads", "100000"], "--threads must be in 1.."),
])
def test_bad_options(tmp_path, args, expected):
    one_error_line("--artifacts", str(tmp_path), "--out", str(tmp_path / "out"), *args, expected=expected)


def test_out_in_a_missing_directory(tmp_path):
    one_error_line("--artifacts", str(tmp_path), "--task", "churn", "--out", str(tmp_path / "no" / "c.csv"),
                   expected=f"directory {tmp_path / 'no'} does not exist")


def test_all_tasks_into_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    one_error_line("--artifacts", str(tmp_path), "--out", str(tmp_path / "file"), expected="is a file")


def test_atomic_open_installs_the_file_only_when_complete(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_open(path) as f:
        f.write(b"half of a new file")
        raise RuntimeError("interrupted")
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]
    with atomic_open(path) as f:
        f.write(b"new\n")
        assert path.read_text() == "old\n"  # still the old one while writing
    assert path.read_text() == "new\n" and sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]
