"""Monitoring: the scrape config passes promtool, the dashboard file is current and importable, and
every PromQL expression of every panel returns data from a real server through a real Prometheus.

Prometheus comes from Debian's ``prometheus`` package (``make test`` installs it). Without it these
tests fail, naming the package; ``RELSERVE_ALLOW_SKIP_PROMETHEUS=1`` turns that into a skip for
machines where it cannot be installed.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from loadtest.dashboard import DASHBOARD_PATH, render
from loadtest.id_pool import IdPool
from loadtest.traffic import TASK_PATHS, Traffic, answer_problem
from models.store.snapshot import GraphSnapshot
from serve.bench.metrics_read import scrape, series
from serve.bench.process import ServerProcess, free_port
from tests.ingest_helpers import transaction_rows

REPO = Path(__file__).resolve().parents[2]
SCRAPE_CONFIG = REPO / "loadtest" / "prometheus.yml"
ALLOW_SKIP = "RELSERVE_ALLOW_SKIP_PROMETHEUS"
# Grafana's variables, as a dashboard user with every task selected would have them.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$task": ".*"}


def prometheus_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = (f"{name} not found: install Debian's prometheus package (apt-get install prometheus; "
                   f"make test does), or set {ALLOW_SKIP}=1 to skip the monitoring tests on this machine")
        if os.environ.get(ALLOW_SKIP) == "1":
            pytest.skip(message)
        pytest.fail(message)
    return path


def dashboard() -> dict:
    return json.loads(DASHBOARD_PATH.read_text())


INGESTION_ROW = "Ingestion (with --state-dir)"


def panel_queries(ingestion: bool = False) -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every query of every panel outside the ingestion row, or in it."""
    queries, row = [], None
    for panel in dashboard()["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
        elif (row == INGESTION_ROW) == ingestion:
            queries += [(panel["title"], t["expr"]) for t in panel["targets"]]
    return queries


def test_scrape_config_passes_promtool() -> None:
    result = subprocess.run([prometheus_tool("promtool"), "check", "config", str(SCRAPE_CONFIG)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "metrics_path: /metrics" in SCRAPE_CONFIG.read_text()


def test_dashboard_file_is_generated_from_loadtest_dashboard() -> None:
    assert DASHBOARD_PATH.read_text() == render(), "run: python -m loadtest.dashboard"


def test_dashboard_is_importable() -> None:
    board = dashboard()
    assert board["schemaVersion"] >= 36 and board["uid"] and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    source = variables["DS_PROMETHEUS"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    assert variables["task"]["datasource"]["uid"] == "${DS_PROMETHEUS}"
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["description"] and panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
    titles = " ".join(p["title"] for p in panels).lower()
    for topic in ("request rate", "error", "latency", "batch size", "bucket", "padding", "stage", "recompile",
                  "warm-up"):
        assert topic in titles, topic


def substitute(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr}"
    return expr


@pytest.fixture()
def prometheus(server: ServerProcess, tmp_path: Path) -> Iterator[str]:
    """A Prometheus of our own (temporary storage, free loopback port) scraping ``server`` every 2 s."""
    yield from run_prometheus(server, tmp_path)


def run_prometheus(server: ServerProcess, tmp_path: Path) -> Iterator[str]:
    binary = prometheus_tool("prometheus")
    config = SCRAPE_CONFIG.read_text()
    edits = (("127.0.0.1:8000", f"127.0.0.1:{server.port}"), ("scrape_interval: 5s", "scrape_interval: 2s"),
             ("scrape_timeout: 4s", "scrape_timeout: 2s"))
    for old, new in edits:
        assert old in config, f"{SCRAPE_CONFIG} no longer contains {old!r}"
        config = config.replace(old, new)
    (tmp_path / "prometheus.yml").write_text(config)
    url = f"http://127.0.0.1:{free_port()}"
    log = (tmp_path / "prometheus.log").open("w")
    process = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address={url[7:]}",
                                "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while query(url, 'up{job="relserve"} == 1') == []:
            assert process.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "Prometheus never scraped the server"
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def query(url: str, expr: str, at: float | None = None) -> list[dict]:
    """Result of an instant query; ``[]`` while Prometheus is not up yet (no listener, or its API's
    plain-text 503 "Service Unavailable" until its storage is ready)."""
    params = {"query": expr, **({"time": f"{at:.3f}"} if at else {})}
    try:
        response = requests.get(f"{url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=10)
    except requests.ConnectionError:
        return []
    if response.status_code == 503:
        return []
    body = response.json()
    assert body["status"] == "success", f"{expr}: {body}"
    return body["data"]["result"]


def scrapes(prometheus: str) -> int:
    """How many times Prometheus has scraped the server so far."""
    result = query(prometheus, 'count_over_time(up{job="relserve"}[1h])')
    return int(float(result[0]["value"][1])) if result else 0


def send_traffic(server: ServerProcess, traffic: Traffic, prometheus: str, scraped: int,
                 clients: int = 4) -> int:
    """Every task, good and bad requests, from ``clients`` threads until Prometheus has scraped the
    server ``scraped`` more times (so its rates cover the traffic); returns how many were sent."""
    sent, problems, lock, stop = [0], [], threading.Lock(), threading.Event()

    def client(seed: int) -> None:
        rng, session = random.Random(seed), requests.Session()
        while not stop.is_set():
            planned = traffic.plan(rng.choice(list(TASK_PATHS)), rng)
            response = session.post(server.url + planned.path, data=planned.body, timeout=30,
                                    headers={"Content-Type": planned.content_type})
            problem = answer_problem(planned, response.status_code, response.content)
            with lock:
                sent[0] += 1
                problems.extend([problem] if problem else [])

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    for thread in threads:
        thread.start()
    try:
        target = scrapes(prometheus) + scraped
        deadline = time.monotonic() + 120  # only turns a hang into a failure
        while scrapes(prometheus) < target and not problems:
            assert time.monotonic() < deadline, f"Prometheus did not scrape {scraped} times"
            time.sleep(0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not problems, problems[:5]
    return sent[0]


def served_total(server: ServerProcess) -> float:
    return sum(series(scrape(server.url), "relserve_requests_total").values())


@pytest.mark.slow
@pytest.mark.integration
def test_every_dashboard_query_returns_data(server: ServerProcess, artifacts: Path, prometheus: str) -> None:
    traffic = Traffic(IdPool.from_snapshot(artifacts / "snapshot"), bad_share=0.15)
    assert send_traffic(server, traffic, prometheus, scraped=3) > 0
    at = answered_everywhere(prometheus, server)

    tasks = requests.get(f"{prometheus}/api/v1/label/task/values",
                         params={"match[]": "relserve_warmup_seconds"}, timeout=10).json()["data"]
    assert set(tasks) == set(TASK_PATHS), "the dashboard's $task variable query"
    empty = []
    for title, expr in panel_queries():
        result = query(prometheus, substitute(expr), at)
        if not any(math.isfinite(float(sample["value"][1])) for sample in result):
            empty.append(f"{title}: {expr} -> {result}")
    assert not empty, "panels without data:\n" + "\n".join(empty)


def answered_everywhere(prometheus: str, server: ServerProcess) -> float:
    """Wait until Prometheus has scraped every request the server answered; the time to query at."""
    total = served_total(server)
    deadline = time.monotonic() + 30
    while (scraped := query(prometheus, "sum(relserve_requests_total)")) == [] or \
            float(scraped[0]["value"][1]) < total:
        assert time.monotonic() < deadline, f"Prometheus has {scraped}, the server {total}"
        time.sleep(0.3)
    return time.time()


@pytest.fixture()
def ingesting(artifacts: Path, tmp_path: Path) -> Iterator[ServerProcess]:
    state = tmp_path / "state"
    with ServerProcess(artifacts, "--max-batch-size", "8", "--compile", "none", "--state-dir", str(state),
                       "--compact-every", "3", log_path=tmp_path / "serve.log",
                       env={"RELSERVE_WRITE_KEY": "monitoring"}) as process:
        process.wait_ready(timeout=600)
        yield process


@pytest.mark.slow
@pytest.mark.integration
def test_every_ingestion_panel_returns_data(ingesting: ServerProcess, artifacts: Path,
                                            tmp_path: Path) -> None:
    snapshot = GraphSnapshot.open(artifacts / "snapshot")
    traffic = Traffic(IdPool.from_snapshot(artifacts / "snapshot"))
    for prometheus in run_prometheus(ingesting, tmp_path):
        session, headers = requests.Session(), {"Authorization": "Bearer monitoring"}
        for day in range(1, 5):  # a batch per scrape, each served by every worker before the next
            rows = transaction_rows(snapshot, 5, day_offset=day)
            answer = session.post(f"{ingesting.url}/ingest/transactions", params={"sync": "true"}, timeout=30,
                                  headers=headers, json={"rows": rows})
            assert answer.status_code == 200, answer.text
            refused = session.post(f"{ingesting.url}/ingest/customers", headers=headers, timeout=30,
                                   json={"rows": [{"customer_id": ""}]})
            assert refused.status_code == 422
            send_traffic(ingesting, traffic, prometheus, scraped=1, clients=2)
        at = answered_everywhere(prometheus, ingesting)
        empty = []
        for title, expr in panel_queries(ingestion=True):
            result = query(prometheus, substitute(expr), at)
            if not any(math.isfinite(float(sample["value"][1])) for sample in result):
                empty.append(f"{title}: {expr} -> {result}")
        assert not empty, "ingestion panels without data:\n" + "\n".join(empty)
