"""``python -m serve.score`` given bad arguments or paths: one error line, a non-zero exit, no traceback;
and the atomic streaming write it relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.files import atomic_open
from tests.cli_batch import Finished, run_many

PROG = "python -m serve.score"


def check_one_error_line(result: Finished, expected: str, code: int = 2) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert result.returncode == code and len(lines) == 1, (result.returncode, result.stderr[-3000:])
    assert lines[0].startswith(f"{PROG}: error: ") and expected in lines[0], lines[0]


def _missing_directory(tmp: Path) -> tuple[list[str], str]:
    args = ["--artifacts", str(tmp / "nope"), "--out", str(tmp / "x.csv")]
    return args, f"--artifacts {tmp / 'nope'} is not a directory"


def _without_a_bundle(tmp: Path) -> tuple[list[str], str]:
    (tmp / "snapshot").mkdir()
    args = ["--artifacts", str(tmp), "--task", "sales", "--out", str(tmp / "s.csv")]
    return args, "has no bundle for sales"


def _out_is_a_file(tmp: Path) -> tuple[list[str], str]:
    (tmp / "file").write_text("x")
    return ["--artifacts", str(tmp), "--out", str(tmp / "file")], "is a file"


CASES = {
    # case: tmp dir -> (arguments, what the line must say)
    "missing-artifacts-directory": _missing_directory,
    "artifacts-without-a-snapshot": lambda tmp: (["--artifacts", str(tmp), "--out", str(tmp / "out")],
                                                 "has no snapshot/"),
    "artifacts-without-the-requested-bundle": _without_a_bundle,
    "batch-size-0": lambda tmp: (["--artifacts", str(tmp), "--out", str(tmp / "out"), "--batch-size", "0"],
                                 "--batch-size must be in 1..8192"),
    "unknown-task": lambda tmp: (["--artifacts", str(tmp), "--out", str(tmp / "out"), "--task", "nope"],
                                 "argument --task: invalid choice: 'nope'"),
    "unknown-format": lambda tmp: (["--artifacts", str(tmp), "--out", str(tmp / "out"), "--format", "xlsx"],
                                   "argument --format: invalid choice: 'xlsx'"),
    "too-many-threads": lambda tmp: (
        ["--artifacts", str(tmp), "--out", str(tmp / "out"), "--threads", "100000"],
        "--threads must be in 1.."),
    "out-in-a-missing-directory": lambda tmp: (
        ["--artifacts", str(tmp), "--task", "churn", "--out", str(tmp / "no" / "c.csv")],
        f"directory {tmp / 'no'} does not exist"),
    "all-tasks-into-a-file": _out_is_a_file,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Finished, str]]:
    """Every case of :data:`CASES` run as ``python -m serve.score`` (one interpreter for all,
    :mod:`tests.cli_batch`: the bundle checks import torch); each with the words its line must hold."""
    made = {case: make(tmp_path_factory.mktemp(case)) for case, make in CASES.items()}
    done = run_many({case: ("serve.score", args) for case, (args, _) in made.items()})
    return {case: (done[case], expected) for case, (_, expected) in made.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_arguments_or_paths_are_one_error_line(runs, case):
    result, expected = runs[case]
    check_one_error_line(result, expected)


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
