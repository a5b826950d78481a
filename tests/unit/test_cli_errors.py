"""Every CLI given wrong paths, arguments or files: one readable error line, a non-zero exit, no traceback.

Each case runs the real ``python -m <tool>`` in a subprocess (the cases that import torch first, those
of ``training.fit`` and ``serve``'s bundle checks, one after another in one: :mod:`tests.cli_batch`).
Cases already covered elsewhere are left out: test_synth.py (bad sizes, an unwritable ``--out``),
test_fit.py (missing data, missing CSVs, unknown task, ``--out`` a file, too little history,
``--epochs 0``) and test_serve_cli.py (bad server options, a missing ``--artifacts``,
``--cuda-graphs`` on CPU). ``training.fit`` imports torch before it parses, so its cases are the slow ones.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from models.schema import CUSTOMERS_CSV, TRANSACTIONS_CSV
from tests.cli_batch import Finished, run_many

REPO = Path(__file__).resolve().parents[2]


def one_error_line(tool: str, *args: str, expected: str, code: int = 2) -> None:
    result = subprocess.run([sys.executable, "-m", tool, *args], capture_output=True, text=True, timeout=300,
                            cwd=REPO)
    check_one_error_line(result, tool, expected, code)


def check_one_error_line(result: subprocess.CompletedProcess | Finished, tool: str, expected: str,
                         code: int = 2) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert result.returncode == code and len(lines) == 1, (result.returncode, result.stderr[-3000:])
    assert lines[0].startswith(f"python -m {tool}: error: ") and expected in lines[0], lines[0]


@pytest.mark.parametrize("args, expected", [
    ([], "the following arguments are required: --out"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--customers", "abc"], "argument --customers: invalid int value: 'abc'"),
    (["--customers", "99999999999999"], "customers must be at most"),
    (["--end-date", "0001-01-05", "--days", "10"], "would start before year 1"),
    (["--end-date", "tomorrow"], "argument --end-date: invalid fromisoformat value"),
])
def test_synth(tmp_path, args, expected):
    out = [] if not args else ["--out", str(tmp_path / "out")]
    one_error_line("training.synth", *out, *args, expected=expected)


def test_synth_out_under_a_missing_root(tmp_path):
    one_error_line("training.synth", "--out", "/proc/relserve/out", expected="cannot create --out")


def csv_dir_with(source: Path, out: Path, name: str, data: bytes) -> Path:
    """A copy of the CSV directory ``source`` with file ``name`` replaced by ``data``."""
    shutil.copytree(source, out)
    (out / name).write_bytes(data)
    return out


def transactions_with_third_line(source: Path, edit) -> bytes:
    header, first, second = (source / TRANSACTIONS_CSV).read_bytes().splitlines(keepends=True)[:3]
    return header + first + edit(second)


FIT_CASES = {
    # case: (what --data is made of, extra arguments, what the line must say)
    "no-arguments": (None, [], "the following arguments are required: --data, --task, --out"),
    "data-is-a-file": ("file", [], "no such directory"),
    "wrong-header": ((CUSTOMERS_CSV, lambda _: b"a,b\n1,2\n"), [], "customers.csv: missing columns"),
    "not-utf8": ((CUSTOMERS_CSV, lambda _: b"\xff\xfe\x00 not text\n"), [], "line 1 is not UTF-8 text"),
    "short-row": ((TRANSACTIONS_CSV, lambda src: transactions_with_third_line(
        src, lambda row: row.rsplit(b",", 1)[0] + b"\n")), [], "transactions_train.csv: line 3 has 4 fields"),
    "bad-date": ((TRANSACTIONS_CSV, lambda src: transactions_with_third_line(
        src, lambda row: b"2020-99-99" + row[10:])), [], "line 3: cannot parse t_dat value '2020-99-99'"),
    "out-under-a-missing-root": ("out", [], "--out /proc/relserve/out: cannot create it"),
    "lr-nan": ("ok", ["--lr", "nan"], "--lr"),
    "negative-seed": ("ok", ["--seed", "-3"], "--seed"),
}


@pytest.fixture(scope="module")
def fit_runs(tiny_csv_dir, tmp_path_factory) -> dict[str, Finished]:
    """Every case of :data:`FIT_CASES` run as ``python -m training.fit`` (one interpreter for all: each
    would import torch, seconds per case, before failing)."""
    cases = {}
    for case, (source, extra, _) in FIT_CASES.items():
        tmp_path = tmp_path_factory.mktemp(f"fit-{case}")
        data, out = tiny_csv_dir, tmp_path / "out"
        if source == "file":
            data = tiny_csv_dir / TRANSACTIONS_CSV
        elif source == "out":
            out = Path("/proc/relserve/out")
        elif isinstance(source, tuple):
            name, make = source
            data = csv_dir_with(tiny_csv_dir, tmp_path / "csv", name, make(tiny_csv_dir))
        args = [] if source is None else ["--data", str(data), "--task", "churn", "--out", str(out), *extra]
        cases[case] = ("training.fit", [*args, "--quiet"])
    return run_many(cases)


@pytest.mark.slow  # the runs import torch
@pytest.mark.parametrize("case", list(FIT_CASES))
def test_fit(fit_runs, case):
    check_one_error_line(fit_runs[case], "training.fit", FIT_CASES[case][2])


def test_the_batch_runner_reports_a_traceback_and_the_exit_code_as_python_does():
    """What :func:`fit_runs` relies on: a crash and an exit code come back as ``python -m`` gives them."""
    runs = run_many({"crash": ("zipfile", ["-l", "/no/such.zip"]), "ok": ("json.tool", ["--help"]),
                     "exit": ("unittest", ["--bogus"])})
    assert runs["ok"].returncode == 0 and "usage" in runs["ok"].stdout and not runs["ok"].stderr
    assert runs["exit"].returncode == 2 and "unrecognized arguments: --bogus" in runs["exit"].stderr
    assert runs["crash"].returncode == 1 and runs["crash"].stderr.startswith("Traceback")
    assert "FileNotFoundError" in runs["crash"].stderr and not runs["crash"].stdout


def fake_artifacts(root: Path, tasks: tuple[str, ...] = ("churn",)) -> Path:
    """Just enough layout to get past finding the bundles (their contents are never read)."""
    (root / "snapshot").mkdir(parents=True)
    for task in tasks:
        (root / task).mkdir()
        (root / task / "config.json").write_text("{}")
    return root


@pytest.mark.parametrize("args, expected", [
    ([], "the following arguments are required: --artifacts"),
    (["--port", "http"], "argument --port: invalid int value: 'http'"),
    (["--host", "localhost"], "argument --host: invalid choice: 'localhost'"),
    (["--max-queue", "0"], "--max-queue must be at least 1"),
    (["--workers-per-task", "0"], "--workers-per-task and --api-servers must be in 1..32"),
    (["--threads", "0"], "--threads must be in 1.."),
    (["--request-timeout", "inf"], "--request-timeout must be a finite number of seconds"),
    (["--deadline", "5"], "--deadline must exceed --request-timeout"),
    (["--max-payload-bytes", "10"], "--max-payload-bytes must be at least 256"),
    (["--max-batch-size", "100000"], "--max-batch-size must be in 1..1024"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_serve_arguments(tmp_path, args, expected):
    artifacts = [] if not args else ["--artifacts", str(fake_artifacts(tmp_path / "art"))]
    one_error_line("serve", *artifacts, *args, expected=expected)


SERVE_ARTIFACTS = {
    # layout: (extra arguments, what the line must say)
    "file": ([], "is not a directory"),
    "empty": ([], "has no snapshot/ directory"),
    "snapshot-only": ([], "holds no task bundle"),
    "churn-only": (["--tasks", "sales"], "has no bundle for sales"),
}


@pytest.fixture(scope="module")
def serve_runs(tmp_path_factory) -> dict[str, object]:
    """Every layout of :data:`SERVE_ARTIFACTS`, and a port in use, run as ``python -m serve`` (one
    interpreter for all: finding the bundles imports torch); the port case with its port."""
    cases = {}
    for layout, (args, _) in SERVE_ARTIFACTS.items():
        root = tmp_path_factory.mktemp(f"serve-{layout}") / "art"
        if layout == "file":
            root.write_text("not a directory")
        elif layout == "empty":
            root.mkdir()
        else:
            fake_artifacts(root, () if layout == "snapshot-only" else ("churn",))
        cases[layout] = ("serve", ["--artifacts", str(root), *args])
    with socket.socket() as taken:  # held while the runs go
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        root = fake_artifacts(tmp_path_factory.mktemp("serve-port") / "art")
        cases["port-in-use"] = ("serve", ["--artifacts", str(root), "--port", str(port)])
        runs = run_many(cases)
    runs["port-in-use"] = (runs["port-in-use"], port)
    return runs


@pytest.mark.slow  # the runs import torch
@pytest.mark.parametrize("layout", list(SERVE_ARTIFACTS))
def test_serve_artifacts(serve_runs, layout):
    check_one_error_line(serve_runs[layout], "serve", SERVE_ARTIFACTS[layout][1])


@pytest.mark.slow  # the run imports torch
def test_serve_on_a_port_in_use(serve_runs):
    run, port = serve_runs["port-in-use"]
    check_one_error_line(run, "serve", f"cannot listen on 127.0.0.1:{port}", code=1)
