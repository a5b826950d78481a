"""Shared by the ingestion tests: a snapshot of the tiny data, rows for it, and a real redis-server.

Redis comes from Debian's ``redis-server`` package (``make test`` installs it); a test that needs it
is skipped, saying so, only where it could not be installed.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from models.schema import ARTICLE, CUSTOMER, day_number, day_to_date
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot
from serve.bench.process import free_port

CUT = "2020-09-15"  # tiny_csv_dir ends on 2020-09-22: D + 7
WRITE_KEY = "test-write-key"
READ_KEY = "test-read-key"


def build_snapshot(csv_dir: Path, out: Path) -> GraphSnapshot:
    from training.data.load import load_tables

    return GraphSnapshot.build(load_tables(csv_dir, progress=False), out, progress=False)


def node_ids(snapshot: GraphSnapshot, node_type: str, n: int, start: int = 0) -> list[str]:
    return [bytes(i).decode() for i in snapshot.ids[node_type][start:start + n]]


def transaction_rows(snapshot: GraphSnapshot, n: int, day_offset: int = 1, start: int = 0,
                     price: float = 0.02) -> list[dict[str, Any]]:
    """``n`` purchases ``day_offset`` days after the snapshot's last day, by distinct known customers."""
    customers = node_ids(snapshot, CUSTOMER, n, start)
    articles = node_ids(snapshot, ARTICLE, len(snapshot.ids[ARTICLE]))
    date = day_to_date(snapshot.max_day + day_offset).isoformat()
    return [{"t_dat": date, "customer_id": c, "article_id": articles[(start + i) % len(articles)],
             "price": price + i * 1e-6, "sales_channel_id": 2} for i, c in enumerate(customers)]


def transaction_batches(csv_dir: Path, after: str, rows_per_batch: int) -> list[IngestBatch]:
    """The transactions of ``csv_dir`` dated after ``after``, in file order, as numbered batches."""
    with open(csv_dir / "transactions_train.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["t_dat"] > after]
    batches = []
    for n, start in enumerate(range(0, len(rows), rows_per_batch), start=1):
        part = rows[start:start + rows_per_batch]
        batches.append(IngestBatch(n, "transactions", {
            "day": [day_number(r["t_dat"]) for r in part], "customer_id": [r["customer_id"] for r in part],
            "article_id": [r["article_id"] for r in part], "price": [float(r["price"]) for r in part],
            "sales_channel_id": [int(r["sales_channel_id"]) for r in part]}))
    return batches


STARTUP_BOUND_S = 60.0  # only bounds a hang: uvicorn starts in well under a second, even on a loaded machine


@contextmanager
def served_in_thread(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a daemon thread; yields its URL and stops
    the server when the block ends."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_BOUND_S
    while not server.started:
        assert thread.is_alive(), f"uvicorn stopped before serving on port {port}"
        assert time.monotonic() < deadline, f"uvicorn did not start within {STARTUP_BOUND_S:g} s (a hang)"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


class RedisServer:
    """``redis-server`` on a free loopback port, fsyncing its append-only file on every write.

    Args:
        directory: its working directory (append-only file, log, TLS certificate).
        tls: serve TLS only (``rediss://``), with a self-signed certificate made here by ``openssl``.
    """

    def __init__(self, directory: Path, tls: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server not found and it could not be installed here (make test installs "
                        "Debian's redis-server package)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = directory / "redis.log"
        listen = ["--port", str(self.port)]
        if tls:
            cert, key = directory / "cert.pem", directory / "key.pem"
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                            "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
            listen = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(cert),
                      "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"]
            self.url = f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={cert}"
        self.process = subprocess.Popen(
            [binary, *listen, "--bind", "127.0.0.1", "--dir", str(directory), "--appendonly", "yes",
             "--appendfsync", "always", "--save", "", "--logfile", str(self.log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.client = redis.Redis.from_url(self.url, socket_timeout=1.0)
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.client.ping():
                    break
            except redis.RedisError:
                pass
            assert self.process.poll() is None, self.log.read_text() if self.log.exists() else "exited"
            assert time.monotonic() < deadline, "redis-server did not answer PING"
            time.sleep(0.05)

    def log_url(self, stream: str, user: str | None = None) -> str:
        """The ``--ingest-log`` URL of ``stream`` (``user``: ``NAME:PASSWORD`` of an ACL user)."""
        url = self.url.replace("://", f"://{user}@", 1) if user else self.url
        return f"{url}{'&' if '?' in url else '?'}stream={stream}"

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(20)
