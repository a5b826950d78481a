"""Model versions through one real server: a new version of every task hot-swapped in under mixed
traffic and rolled back (no failed request, every answer after a switch from the new version, the
old model freed), broken versions refused while the old one answers, versions the deployment guard
holds back, all visible on /models and /metrics; and a customer without purchases answered, not 404.

The 32-client version of the swap under load, with timings, is ``python -m serve.bench.swap``.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import threading
import time
from pathlib import Path

import pytest
import requests
import safetensors.torch
import torch

from models.registry import TASK_NAMES, TASKS
from models.schema import ARTICLE, CUSTOMER
from serve.bench.metrics_read import scrape, value
from serve.bench.proc import memory
from serve.bench.process import ServerProcess
from serve.ingest.auth import WRITE_KEY_ENV
from tests.integration.conftest import SERVER_ARGS
from tests.integration.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = "model-admin-key"
CLIENTS = 4  # mixed traffic on 2 shared cores; serve.bench.swap runs 32
BUNDLE_FILES = ("config.json", "weights.safetensors", "metrics.json")


def version_dir(root: Path, task: str, version: int) -> Path:
    return root / task if task == "churn" and version == 1 else root / task / str(version)


def add_version(root: Path, task: str, version: int, *, metrics: dict | None = None, complete: bool = True,
                weights: bytes | None = None, config: dict | None = None) -> Path:
    """Version ``version`` of ``task``: version 1's files (compile cache included) with changes,
    written beside and renamed into place as training should. Without ``complete`` it has no
    metrics.json, so the poller leaves it alone and only the admin route loads it."""
    source, partial = version_dir(root, task, 1), root / task / f".{version}.partial"
    partial.mkdir()
    for name in BUNDLE_FILES[:None if complete else 2]:
        shutil.copy(source / name, partial / name)
    if (source / "compile_cache").is_dir():  # written beside version 1 by the server's first start
        shutil.copytree(source / "compile_cache", partial / "compile_cache")
    for name, change in (("metrics.json", metrics), ("config.json", config)):
        if change is not None and (partial / name).exists():
            document = json.loads((partial / name).read_text())
            document.update(change)
            (partial / name).write_text(json.dumps(document))
    if weights is not None:
        (partial / "weights.safetensors").write_bytes(weights)
    return partial.rename(root / task / str(version))


@pytest.fixture(scope="module")
def repository(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Version 1 of every task: churn in the single-bundle layout, the others as ``<task>/1/``; every
    metrics.json says the model beats its baselines (the guard then judges on validation alone)."""
    root = tmp_path_factory.mktemp("repository")
    (root / "snapshot").symlink_to(artifacts / "snapshot")
    for task in TASK_NAMES:
        target = version_dir(root, task, 1)
        target.mkdir(parents=True)
        for name in BUNDLE_FILES:
            shutil.copy(artifacts / task / name, target / name)
        metrics = json.loads((target / "metrics.json").read_text())
        (target / "metrics.json").write_text(json.dumps({**metrics, "beats_baselines": True}))
    return root


@pytest.fixture(scope="module")
def server(repository: Path, tmp_path_factory: pytest.TempPathFactory):
    log_path = tmp_path_factory.mktemp("models-server") / "serve.log"
    with ServerProcess(repository, *SERVER_ARGS, "--model-poll", "1", log_path=log_path,
                       env={WRITE_KEY_ENV: KEY}) as process:
        process.wait_ready(timeout=900)
        yield process


def models(server: ServerProcess) -> dict:
    return requests.get(f"{server.url}/models", timeout=30).json()["models"]


def admin_load(server: ServerProcess, task: str, version: int, force: bool = False) -> requests.Response:
    query = f"version={version}" + ("&force=true" if force else "")
    return requests.post(f"{server.url}/admin/models/{task}/load?{query}", timeout=600,
                         headers={"Authorization": f"Bearer {KEY}"})


def body(snapshot, task: str, i: int) -> dict:
    entity = TASKS[task].entity_type
    ids = snapshot.ids[entity]
    return {TASKS[task].id_field: ids[i % len(ids)].decode()}


class Traffic:
    """``CLIENTS`` threads posting known ids of every task; each answer as (task, sent, status, version)."""

    def __init__(self, server: ServerProcess, snapshot) -> None:
        self.url, self.snapshot = server.url, snapshot
        self.answers: list[tuple[str, float, int, int | None]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.client, args=(seed,), daemon=True)
                        for seed in range(CLIENTS)]

    def client(self, seed: int) -> None:
        rng, session = random.Random(seed), requests.Session()
        while not self.stop.is_set():
            task = rng.choice(list(TASK_NAMES))
            sent = time.monotonic()
            try:
                request = body(self.snapshot, task, rng.randrange(10**6))
                r = session.post(f"{self.url}/predict/{task}", json=request, timeout=60)
                version = r.headers.get("x-model-version")
                self.answers.append((task, sent, r.status_code, int(version) if version else None))
            except requests.RequestException:
                self.answers.append((task, sent, 0, None))

    def __enter__(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(120)


def worker_memory(server: ServerProcess) -> dict[str, float]:
    roles = server.roles(list(TASK_NAMES))
    return {role.removeprefix("worker:"): memory(pid)["anon"] for pid, role in roles.items()
            if role.startswith("worker:")}


def test_every_answer_names_its_version_and_a_customer_without_purchases_gets_one(server, repository,
                                                                                  snapshot) -> None:
    listed = models(server)
    assert {task: m["version"] for task, m in listed.items()} == dict.fromkeys(TASK_NAMES, 1)
    assert all(m["warm"] and m["metrics"]["beats_baselines"] for m in listed.values())
    assert listed["churn"]["directory"] == str(repository / "churn"), "the single-bundle layout is version 1"
    rowptr = snapshot.adjacency[(CUSTOMER, ARTICLE)].rowptr
    cold = int(torch.nonzero(rowptr[1:] == rowptr[:-1])[0])  # in customers.csv, never bought
    for task in ("churn", "purchase"):
        answer = requests.post(f"{server.url}/predict/{task}", json=body(snapshot, task, cold), timeout=60)
        assert answer.status_code == 200 and answer.headers["x-model-version"] == "1"
        assert answer.json()["history"] == 0
    busy = int(torch.argmax(rowptr[1:] - rowptr[:-1]))
    answer = requests.post(f"{server.url}/predict/churn", json=body(snapshot, "churn", busy), timeout=60)
    assert answer.json()["history"] == int(rowptr[busy + 1] - rowptr[busy]) > 0


def swap_and_roll_back(server: ServerProcess, repository: Path, traffic: Traffic, version: int) -> dict:
    """Write ``version`` of every task, wait for the poller to serve it, roll every task back to 1 with
    the admin route; when each step was seen done."""
    for task in TASK_NAMES:
        add_version(repository, task, version)  # version 1's validation score: the guard lets it through
    wait_for(lambda: all(m["version"] == version and m["loading"] is None for m in models(server).values()),
             f"version {version} of every task", timeout=600)
    times = {"switched": time.monotonic()}
    wait_for(lambda: sum(1 for _, sent, *_ in traffic.answers if sent > times["switched"]) > 50, "traffic")
    times["rollback"] = time.monotonic()
    for task in TASK_NAMES:
        answer = admin_load(server, task, 1)
        assert answer.status_code == 200 and answer.json()["model"]["version"] == 1, answer.text
        times[task] = time.monotonic()
    wait_for(lambda: server.log().count(f"version {version} freed") == len(TASK_NAMES), "old models freed")
    last = times[list(TASK_NAMES)[-1]]
    wait_for(lambda: sum(1 for _, sent, *_ in traffic.answers if sent > last) > 50, "traffic")
    times["end"] = time.monotonic()
    return times


def test_a_new_version_of_every_task_swaps_in_under_load_and_rolls_back(server, repository, snapshot) -> None:
    with Traffic(server, snapshot) as traffic:
        wait_for(lambda: len(traffic.answers) > 50, "traffic before the swap")
        memory = [worker_memory(server)]
        cycles = {}
        for version in (2, 3):
            cycles[version] = swap_and_roll_back(server, repository, traffic, version)
            memory.append(worker_memory(server))
    failed = [a for a in traffic.answers if a[2] != 200]
    assert not failed, f"{len(failed)} of {len(traffic.answers)} requests failed: {failed[:5]}"
    for version, times in cycles.items():
        during = [v for _, sent, _, v in traffic.answers if times["switched"] < sent < times["rollback"]]
        assert during and set(during) == {version}
        assert all(v == 1 for t, sent, _, v in traffic.answers if times[t] < sent < times["end"])
    assert {v for *_, v in traffic.answers} == {1, 2, 3}
    print(f"worker anonymous memory (MiB) before, after one and two swap cycles: {memory}; "
          f"{len(traffic.answers)} requests")
    for task in TASK_NAMES:  # the old models are freed; what stays is torch's compile bookkeeping
        before, first, second = (m[task] for m in memory)
        assert first < before * 1.2, f"{task}: {before:.0f} -> {first:.0f} MiB after a swap and a rollback"
        assert second < first * 1.05, f"{task}: {first:.0f} -> {second:.0f} MiB after another one"
    metrics = scrape(server.url)
    for task in TASK_NAMES:
        assert value(metrics, "relserve_model_swaps_total", task=task) == 4
        assert value(metrics, "relserve_model_version", task=task) == 1
        assert value(metrics, "relserve_recompiles_total", task=task) == 0


def corrupt_byte(weights: bytes) -> bytes:
    changed = bytearray(weights)
    changed[-3] ^= 0xFF  # inside the last tensor: still parses, fails the checksum
    return bytes(changed)


def nan_weights(directory: Path) -> tuple[bytes, dict]:
    state = safetensors.torch.load((directory / "weights.safetensors").read_bytes())
    name = next(n for n, t in state.items() if t.is_floating_point())
    state[name] = torch.full_like(state[name], float("nan"))
    data = safetensors.torch.save(state)
    return data, {"weights_sha256": hashlib.sha256(data).hexdigest()}


def test_broken_versions_are_refused_and_the_old_one_keeps_answering(server, repository, snapshot) -> None:
    churn_v1 = version_dir(repository, "churn", 1)
    add_version(repository, "churn", 4, weights=corrupt_byte((churn_v1 / "weights.safetensors").read_bytes()))
    wait_for(lambda: "4" in models(server)["churn"]["held_back"], "the poller refusing churn version 4")
    assert "checksum differs" in models(server)["churn"]["held_back"]["4"]
    add_version(repository, "sales", 4, complete=False, weights=b"\x80\x04 a pickle, not safetensors")
    schema = json.loads((repository / "purchase" / "1" / "config.json").read_text())["snapshot_schema"]
    schema[CUSTOMER]["categorical"][0] = "renamed"
    add_version(repository, "purchase", 4, complete=False, config={"snapshot_schema": schema})
    data, sha = nan_weights(repository / "sales" / "1")
    add_version(repository, "sales", 5, complete=False, weights=data, config=sha)
    for task, version, reason in (("sales", 4, "not a readable safetensors file"),
                                  ("purchase", 4, "other feature columns than the bundle was trained on"),
                                  ("sales", 5, "holds NaN or infinite values")):
        answer = admin_load(server, task, version)
        assert answer.status_code == 422 and reason in answer.json()["detail"], answer.text
        assert answer.json()["serving"] == 1
    for task in TASK_NAMES:
        answer = requests.post(f"{server.url}/predict/{task}", json=body(snapshot, task, 1), timeout=60)
        assert answer.status_code == 200 and answer.headers["x-model-version"] == "1"
    metrics = scrape(server.url)
    assert value(metrics, "relserve_model_refusals_total", task="churn", reason="load") == 1
    assert value(metrics, "relserve_model_refusals_total", task="sales", reason="weights") == 1
    assert {t: m["version"] for t, m in models(server).items()} == dict.fromkeys(TASK_NAMES, 1)


def test_versions_the_guard_holds_back_are_not_promoted_unless_forced(server, repository) -> None:
    add_version(repository, "churn", 6, metrics={"beats_baselines": False})
    sales = json.loads((repository / "sales" / "1" / "metrics.json").read_text())
    worse = {**sales["val"], "model": {**sales["val"]["model"], "mae": sales["val"]["model"]["mae"] + 1.0}}
    add_version(repository, "sales", 6, metrics={"val": worse})
    wait_for(lambda: all("6" in models(server)[task]["held_back"] for task in ("churn", "sales")),
             "the poller holding back version 6")
    listed = models(server)
    assert "does not beat its baselines" in listed["churn"]["held_back"]["6"]
    assert "worse than the serving version 1 on the same validation week" in listed["sales"]["held_back"]["6"]
    assert listed["churn"]["version"] == listed["sales"]["version"] == 1
    assert value(scrape(server.url), "relserve_model_refusals_total", task="sales", reason="guard") >= 1
    refused = admin_load(server, "sales", 6)
    assert refused.status_code == 409 and "force=true" in refused.json()["detail"]
    forced = admin_load(server, "sales", 6, force=True)
    assert forced.status_code == 200 and forced.json()["model"]["forced"]
    assert admin_load(server, "sales", 1).status_code == 200
