"""``python -m loadtest.run``: request planning, the report's arithmetic, the CLI, and short real runs.

Locust monkey-patches the standard library with gevent when imported, so this test process never
imports ``loadtest.locustfile`` or ``loadtest.session``: the Locust runs happen in subprocesses.
"""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadtest.id_pool import IdPool
from loadtest.record import TASKS, RequestLog, summarize, timeline
from loadtest.traffic import BAD_KINDS, TASK_PATHS, Traffic, Zipf, answer_problem
from serve.bench.process import ServerProcess
from serve.http.schemas import MAX_K

REPO = Path(__file__).resolve().parents[2]
REPORT_FILES = ("summary.json", "summary.csv", "timeline.csv", "latency_throughput.png", "ids.json")


def tiny_pool() -> IdPool:
    hexes = [f"{i:064x}" for i in range(1, 51)]
    return IdPool(customers=hexes, articles=[f"{i:010d}" for i in range(1, 21)],
                  unknown_customers=["f" * 64], unknown_articles=["9" * 10], num_articles=20)


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadtest.run", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_zipf_favours_the_head() -> None:
    rng = random.Random(0)
    zipf = Zipf([str(i) for i in range(1000)], exponent=1.0)
    counts = Counter(zipf.draw(rng) for _ in range(20_000))
    harmonic = sum(1 / r for r in range(1, 1001))
    assert counts["0"] / 20_000 == pytest.approx(1 / harmonic, abs=0.02)  # about 13 %
    assert counts["0"] > 1.6 * counts["1"] > 0
    assert sum(counts[str(i)] for i in range(10)) > sum(counts[str(i)] for i in range(500, 1000))


def test_good_plans_use_served_ids_and_valid_k() -> None:
    pool, rng = tiny_pool(), random.Random(1)
    traffic = Traffic(pool, bad_share=0.0, list_share=0.0)
    for task in TASK_PATHS:
        for _ in range(50):
            planned = traffic.plan(task, rng)
            body = json.loads(planned.body)
            assert (planned.expected, planned.kind, planned.label) == (200, "ok", TASK_PATHS[task])
            ids = pool.articles if task == "sales" else pool.customers
            assert body["article_id" if task == "sales" else "customer_id"] in ids
            if task == "purchase":
                assert 1 <= body["k"] == planned.k <= MAX_K


def test_list_plans_ask_for_served_ids_and_every_answer_is_checked() -> None:
    pool, rng = tiny_pool(), random.Random(4)
    traffic = Traffic(pool, bad_share=0.0, list_share=1.0, list_size=7)
    for task in TASK_PATHS:
        planned = traffic.plan(task, rng)
        body = json.loads(planned.body)
        assert (planned.expected, planned.kind, planned.ids) == (200, "ok", 7)
        assert planned.label == f"{TASK_PATHS[task]} [list]"
        ids = body["article_ids" if task == "sales" else "customer_ids"]
        assert len(ids) == 7 and set(ids) <= set(pool.articles if task == "sales" else pool.customers)
    churn = traffic.plan("churn", rng)
    good = {"customer_id": "x", "churn_probability": 0.5}
    assert answer_problem(churn, 200, json.dumps({"answers": [good] * 7}).encode()) is None
    assert "implausible" in answer_problem(churn, 200, json.dumps({"answers": [good] * 6}).encode())
    bad = [good] * 6 + [{"customer_id": "x", "error": "unknown customer_id"}]
    assert "implausible" in answer_problem(churn, 200, json.dumps({"answers": bad}).encode())
    half = Traffic(pool, bad_share=0.0, list_share=0.5)
    mixed = Counter(half.plan("sales", rng).ids > 0 for _ in range(400))
    assert mixed[True] > 100 and mixed[False] > 100


def test_every_bad_kind_expects_its_4xx() -> None:
    traffic, rng = Traffic(tiny_pool(), bad_share=1.0), random.Random(2)
    for kind in BAD_KINDS:
        for task in kind.tasks:
            planned = traffic.bad(task, rng, kind.name)
            assert 400 <= planned.expected < 500 and planned.kind == kind.name
            assert planned.label == f"{TASK_PATHS[task]} [{kind.name}]"
    assert {traffic.plan("purchase", rng).kind for _ in range(300)} == {
        k.name for k in BAD_KINDS if "purchase" in k.tasks}


def test_answer_problem_accepts_only_the_expected_answer() -> None:
    traffic, rng = Traffic(tiny_pool(), bad_share=0.0), random.Random(3)
    churn, purchase = traffic.good("churn", rng), traffic.good("purchase", rng)
    assert answer_problem(churn, 200, b'{"customer_id": "x", "churn_probability": 0.3}') is None
    assert "implausible" in answer_problem(churn, 200, b'{"churn_probability": 1.5}')
    assert "implausible" in answer_problem(churn, 200, b"not json")
    assert "expected 200, got 503" in answer_problem(churn, 503, b'{"detail": "overloaded"}')
    too_long = json.dumps({"articles": [{"article_id": "1", "score": 0}] * (purchase.k + 1)}).encode()
    assert answer_problem(purchase, 200, too_long) is not None
    unknown = traffic.bad("sales", rng, "unknown id")
    assert answer_problem(unknown, 404, b'{"detail": "unknown"}') is None
    assert "expected 404, got 200" in answer_problem(unknown, 200, b"{}")


def test_summary_counts_expected_4xx_apart_from_failures() -> None:
    log = RequestLog(started_s=1000.0)
    for i in range(100):  # good churn requests of 1..100 ms, one per 10 ms
        log.on_request(float(i + 1), {"task": "churn", "kind": "ok"}, None, start_time=1000.0 + i / 100,
                       response=SimpleNamespace(status_code=200), name="/predict/churn")
    log.on_request(2.0, {"task": "sales", "kind": "unknown id"}, None, start_time=1000.5,
                   response=SimpleNamespace(status_code=404))
    log.on_request(3.0, {"task": "sales", "kind": "ok"}, RuntimeError("expected 200, got 500"),
                   start_time=1000.6, response=SimpleNamespace(status_code=500), name="/predict/sales")
    log.users = [(1001.0, 4)]
    summary = summarize(log)
    churn = summary["endpoints"]["churn"]
    assert (churn["requests"], churn["failures"], churn["p50_ms"], churn["max_ms"]) == (100, 0, 50.5, 100.0)
    assert churn["p50_ms"] < churn["p95_ms"] < churn["p99_ms"] <= churn["max_ms"]
    assert summary["endpoints"]["sales"]["failures"] == 1
    assert summary["endpoints"]["purchase"]["requests"] == 0
    assert (summary["expected_4xx"], summary["unexpected_failures"], summary["requests"]) == (1, 1, 102)
    assert summary["statuses"] == {"200": 100, "404": 1, "500": 1}
    assert list(summary["failure_messages"].values()) == [1]
    rows = timeline(log)
    assert rows[0]["users"] == 4 and sum(r["churn_rps"] for r in rows) == 100


@pytest.mark.parametrize("args, message", [
    (["--artifacts", "/no/such/dir"], "is not a directory"),
    (["--artifacts", "{artifacts}", "--duration", "5x"], "--duration must look like"),
    (["--artifacts", "{artifacts}", "--host", "localhost:8000"], "--host must be a URL"),
    (["--artifacts", "{artifacts}", "--users", "0"], "--users must be at least 1"),
])
def test_cli_rejects_bad_arguments_in_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    (tmp_path / "snapshot").mkdir()
    result = run_cli(*(a.format(artifacts=tmp_path) for a in args), timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_cli_reports_an_unreadable_snapshot_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "snapshot").mkdir()
    result = run_cli("--artifacts", str(tmp_path), "--out", str(tmp_path / "out"), timeout=120)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "cannot open the graph snapshot" in result.stderr, result.stderr


def read_report(out: Path) -> dict:
    for name in REPORT_FILES:
        assert (out / name).stat().st_size > 0, name
    assert (out / "latency_throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (out / "summary.csv").open() as f:
        assert [row["endpoint"] for row in csv.DictReader(f)] == [*(TASK_PATHS[t] for t in TASKS), "total"]
    return json.loads((out / "summary.json").read_text())


def assert_sane(summary: dict, users: int) -> dict[str, float]:
    """What any load run's summary holds: no unexpected failure, consistent rows (how long the run
    lasted and how fast the answers came are the report's measures, not the test's)."""
    assert summary["unexpected_failures"] == 0, summary["failure_messages"]
    assert summary["user_exceptions"] == []
    assert summary["expected_4xx"] > 0
    assert summary["users"] == users and summary["duration_s"] > 0
    for name, row in [*summary["endpoints"].items(), ("total", summary["total"])]:
        assert row["requests"] > 0 and row["failures"] == 0, name
        assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= row["max_ms"], name
        assert row["rps"] == pytest.approx(row["requests"] / summary["duration_s"], rel=0.01)
    shares = {t: row["requests"] / summary["total"]["requests"] for t, row in summary["endpoints"].items()}
    assert shares["purchase"] > max(shares["churn"], shares["sales"])  # 60 / 25 / 15
    assert set(summary["statuses"]) <= {"200", "404", "415", "422"}
    return shares


@pytest.mark.slow
@pytest.mark.integration
def test_load_run_against_a_running_server(server: ServerProcess, artifacts: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = run_cli("--artifacts", str(artifacts), "--host", server.url, "--users", "4", "--spawn-rate", "4",
                     "--duration", "8s", "--bad-share", "0.2", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_report(out)
    shares = assert_sane(summary, users=4)
    assert shares["purchase"] == pytest.approx(0.60, abs=0.1)
    assert shares["churn"] == pytest.approx(0.25, abs=0.1)
    assert summary["target"] == server.url and summary["server_started"] is False
    assert {"404", "415", "422"} <= set(summary["statuses"])
    assert "/predict/purchase" in result.stdout and "unexpected failures: 0" in result.stdout


@pytest.mark.slow
@pytest.mark.integration
def test_load_run_starts_and_stops_its_own_server(artifacts: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    # Eager (no compile) keeps the server's start-up short; the compiled path is the other test's.
    result = run_cli("--artifacts", str(artifacts), "--server-args", "--compile none --max-batch-size 8",
                     "--users", "2", "--spawn-rate", "2", "--duration", "3s", "--bad-share", "0.2",
                     "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = read_report(out)
    assert_sane(summary, users=2)
    assert summary["server_started"] is True and summary["server_exit_code"] == 0
    assert "/health turns 200" in (out / "serve.log").read_text()


@pytest.mark.slow
@pytest.mark.integration
def test_load_run_says_why_its_server_did_not_start(artifacts: Path, tmp_path: Path) -> None:
    result = run_cli("--artifacts", str(artifacts), "--server-args", "--compile bogus",
                     "--out", str(tmp_path), timeout=120)
    assert result.returncode == 1
    (error,) = [line for line in result.stderr.splitlines() if "error" in line]
    assert "did not become ready" in error and "invalid choice: 'bogus'" in error
