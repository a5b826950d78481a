"""The ingestion log on Redis Streams, against a real ``redis-server`` started here: the log contract
(numbering, compare-and-append, reads, trimming, reconnecting), an ACL user and password, TLS
(``rediss://``), writers of two replicas sharing one order, and two replicas fed through the broker
answering alike."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from models.schema import CUSTOMER
from models.store.log.format import LogConflict, LogError
from models.store.log.redis_log import RedisLog
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot
from serve.bench.process import ServerProcess
from serve.ingest.config import IngestConfig
from serve.ingest.service import open_ingestor
from tests.ingest_helpers import WRITE_KEY, RedisServer, node_ids, transaction_rows
from tests.integration.conftest import SERVER_ARGS

WRITE = {"Authorization": f"Bearer {WRITE_KEY}"}


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


def batch(name: str) -> IngestBatch:
    return IngestBatch(0, "customers", {"customer_id": [name]}, key=f"key-{name}", received_at=5.0)


def test_the_stream_log_keeps_the_log_contract(redis: RedisServer) -> None:
    log = RedisLog(f"{redis.url}?stream=contract")
    assert log.last_sequence() == 0 and log.read(0) == [] and log.oldest() == 1
    assert [log.append(batch(f"c{i}"), i) for i in range(5)] == [1, 2, 3, 4, 5]
    with pytest.raises(LogConflict):
        RedisLog(f"{redis.url}?stream=contract").append(batch("late"), 3)
    read = RedisLog(f"{redis.url}?stream=contract").read(2, limit=2)
    assert [(b.sequence, b.key, b.rows, b.received_at) for b in read] == [
        (3, "key-c2", {"customer_id": ["c2"]}, 5.0), (4, "key-c3", {"customer_id": ["c3"]}, 5.0)]
    log.prune(2)
    assert log.oldest() == 3 and [b.sequence for b in log.read(2)] == [3, 4, 5]
    with pytest.raises(LogError, match="trimmed"):
        log.read(0)
    assert log.durability_warning() is None  # the test's server fsyncs every write


def test_a_dropped_connection_is_reopened(redis: RedisServer) -> None:
    log = RedisLog(f"{redis.url}?stream=reconnect")
    log.append(batch("a"), 0)
    redis.client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    assert log.append(batch("b"), 1) == 2


def test_an_acl_user_and_password_are_used_and_never_shown(redis: RedisServer) -> None:
    redis.client.execute_command("ACL", "SETUSER", "ingest", "on", ">s3cret", "~{acl}:*", "+@all")
    log = RedisLog(redis.log_url("acl", user="ingest:s3cret"))
    assert log.append(batch("a"), 0) == 1 and [b.key for b in log.read(0)] == ["key-a"]
    with pytest.raises(LogError) as refused:
        RedisLog(redis.log_url("acl", user="ingest:wrong")).last_sequence()
    assert "wrong" not in str(refused.value) and "ingest" not in str(refused.value).split("?")[0]
    with pytest.raises(LogError):  # the user may touch its own stream only
        RedisLog(redis.log_url("other", user="ingest:s3cret")).last_sequence()


def test_the_log_over_tls(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, tls=True)
    try:
        log = RedisLog(server.log_url("tls"))
        assert [log.append(batch(f"t{i}"), i) for i in range(3)] == [1, 2, 3]
        assert [b.sequence for b in RedisLog(server.log_url("tls")).read(1)] == [2, 3]
        with pytest.raises(LogError):  # the same port without TLS
            RedisLog(f"redis://127.0.0.1:{server.port}/0?stream=tls", timeout=2.0).last_sequence()
    finally:
        server.stop()


def test_an_unreachable_broker_is_a_log_error() -> None:
    with pytest.raises(LogError, match="unreachable"):
        RedisLog("redis://127.0.0.1:1/0").last_sequence()


def test_writers_of_two_replicas_validate_against_one_order(redis: RedisServer, tmp_path: Path,
                                                            snapshot: GraphSnapshot) -> None:
    url = f"{redis.url}?stream=replicas"
    one = open_ingestor(IngestConfig(state_dir=tmp_path / "one", log=url), snapshot.directory)
    two = open_ingestor(IngestConfig(state_dir=tmp_path / "two", log=url), snapshot.directory)
    one.ingest("customers", [{"customer_id": "shared"}])
    row = {**transaction_rows(snapshot, 1)[0], "customer_id": "shared"}
    assert two.ingest("transactions", [row]).sequence == 2  # replica two saw replica one's customer
    with pytest.raises(Exception, match="already exists"):
        two.ingest("customers", [{"customer_id": "shared"}])
    assert one.ingest("transactions", [row], key="k").sequence == 3
    assert two.ingest("transactions", [row], key="k").replayed


@pytest.fixture(scope="module")
def replicas(artifacts: Path, redis: RedisServer,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ServerProcess]]:
    url = f"{redis.url}?stream=two-replicas"
    servers = []
    for name in ("a", "b"):
        state = tmp_path_factory.mktemp(f"replica-{name}")
        servers.append(ServerProcess(artifacts, *SERVER_ARGS, "--compile", "none", "--state-dir", str(state),
                                     "--ingest-log", url, log_path=state / "serve.log",
                                     env={"RELSERVE_WRITE_KEY": WRITE_KEY}).start())
    try:
        for server in servers:
            server.wait_ready(timeout=900)
        yield servers
    finally:
        for server in servers:
            server.stop()


def answers(server: ServerProcess, customers: list[str], articles: list[str]) -> list[dict]:
    session, out = requests.Session(), []
    for task, field, ids in (("churn", "customer_id", customers), ("purchase", "customer_id", customers),
                             ("sales", "article_id", articles)):
        for node_id in ids:
            response = session.post(f"{server.url}/predict/{task}", json={field: node_id}, timeout=60)
            assert response.status_code == 200, response.text
            out.append(response.json())
    return out


def visible(server: ServerProcess) -> int:
    return requests.get(f"{server.url}/ingest/status", headers=WRITE, timeout=10).json()["visible_sequence"]


@pytest.mark.slow
@pytest.mark.integration
def test_two_replicas_fed_through_the_broker_answer_alike(replicas: list[ServerProcess],
                                                          snapshot: GraphSnapshot) -> None:
    a, b = replicas
    customers = [*node_ids(snapshot, CUSTOMER, 6), "new-on-a"]
    articles = node_ids(snapshot, "article", 4)
    before = answers(a, customers[:-1], articles)
    assert before == answers(b, customers[:-1], articles)
    created = requests.post(f"{a.url}/ingest/customers", headers=WRITE, timeout=30,
                            json={"rows": [{"customer_id": "new-on-a"}]})
    assert created.status_code == 200, created.text
    bought = {**transaction_rows(snapshot, 1)[0], "customer_id": "new-on-a", "article_id": articles[0]}
    rows = [*transaction_rows(snapshot, 6), bought]
    # Written through replica b, read back on both once each replica's workers serve it.
    answer = requests.post(f"{b.url}/ingest/transactions", params={"sync": "true"}, headers=WRITE,
                           json={"rows": rows}, timeout=60)
    assert answer.status_code == 200 and answer.json()["sequence"] == 2, answer.text
    deadline = time.monotonic() + 30
    while visible(a) < 2:
        assert time.monotonic() < deadline, "replica a never served the batch written through b"
        time.sleep(0.05)
    after = answers(a, customers, articles)
    assert after == answers(b, customers, articles)
    assert after[:6] != before[:6]  # the purchases moved the churn answers
