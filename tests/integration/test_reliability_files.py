"""Hostile and broken files: refused in one line naming the file; a bad compile cache is only a miss.

Every case breaks a copy of the session's artifacts (bundles copied, the snapshot linked unless
it is the thing broken). All go through the check ``python -m serve`` runs before any worker
starts; a few also through the real ``python -m serve`` (each costs seconds of imports). A
pickle carrying code must be refused without running it. A corrupt or foreign compile-cache
artifact must not stop the server: it compiles from scratch, starts, says so in its log and
metrics, and saves a fresh one.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
import safetensors.torch
import torch

from models.runtime.bundle import CACHE_DIR, CONFIG_FILE, SNAPSHOT_DIR, WEIGHTS_FILE
from models.runtime.compile_cache import seal, unseal
from models.schema import ARTICLE, CUSTOMER
from models.store.snapshot_files import META_FILE
from serve.bench.metrics_read import scrape, value
from serve.bench.process import ServerProcess, free_port
from serve.versions.bundles import ArtifactsError, check_bundles, find_bundles
from tests.cli_batch import Finished, run_many

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MAX_BATCH = "8"  # as the session server, so the compile-cache paths (keyed by the ladder) are its own
ARRAY = "customer_article.day.npy"


def copy_artifacts(artifacts: Path, out: Path, tasks: tuple[str, ...], copy_snapshot: bool = False) -> Path:
    out.mkdir()
    if copy_snapshot:
        shutil.copytree(artifacts / SNAPSHOT_DIR, out / SNAPSHOT_DIR)
    else:
        (out / SNAPSHOT_DIR).symlink_to(artifacts / SNAPSHOT_DIR)
    for task in tasks:
        shutil.copytree(artifacts / task, out / task)
    return out


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


class RunsCode:
    """Unpickling this creates a directory: proof that the pickle's code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


def pickle_with_code(path: Path) -> None:
    path.write_bytes(pickle.dumps(RunsCode(path.parent / "pwned")))


def nan_weights(path: Path) -> None:
    state = safetensors.torch.load(path.read_bytes())
    name = next(n for n, t in state.items() if t.is_floating_point())
    state[name] = torch.full_like(state[name], float("nan"))
    path.write_bytes(safetensors.torch.save(state))


def nan_weights_checksummed(path: Path) -> None:
    # As a diverged training run would write them: the checksum matches, the values are NaN.
    nan_weights(path)
    config_path = path.parent / CONFIG_FILE
    config = json.loads(config_path.read_text())
    config["weights_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    config_path.write_text(json.dumps(config))


def config_missing_fields(path: Path) -> None:
    path.write_text(json.dumps({"format": 1, "task": "churn"}))


BROKEN: dict[str, tuple[str, Callable[[Path], None], str]] = {
    # name: (file, how it is broken, what the one line must say besides the file's name)
    "weights-truncated": (f"churn/{WEIGHTS_FILE}", truncate, "not a readable safetensors file"),
    "weights-pickle-with-code": (f"churn/{WEIGHTS_FILE}", pickle_with_code, "refusing to load it"),
    # Both still parse as safetensors of the right shapes: the checksum in config.json tells.
    "weights-nan": (f"churn/{WEIGHTS_FILE}", nan_weights, "checksum differs"),
    "weights-flipped": (f"churn/{WEIGHTS_FILE}", flip_last_byte, "checksum differs"),
    "weights-nan-checksummed": (f"churn/{WEIGHTS_FILE}", nan_weights_checksummed, "NaN or infinite values"),
    "config-truncated": (f"churn/{CONFIG_FILE}", truncate, "invalid bundle config"),
    "config-missing-fields": (f"churn/{CONFIG_FILE}", config_missing_fields, "invalid bundle config"),
    "snapshot-array-truncated": (f"{SNAPSHOT_DIR}/{ARRAY}", truncate, "corrupt or truncated"),
    # Only the fingerprint in meta.json can tell a flipped byte: the line names meta.json.
    "snapshot-array-flipped": (f"{SNAPSHOT_DIR}/{ARRAY}", flip_last_byte, "do not match the fingerprint"),
    "meta-truncated": (f"{SNAPSHOT_DIR}/{META_FILE}", truncate, "unreadable JSON"),
    "meta-missing": (f"{SNAPSHOT_DIR}/{META_FILE}", Path.unlink, "missing"),
}


def broken_copy(artifacts: Path, tmp_path: Path, case: str) -> Path:
    relative, breaks, _ = BROKEN[case]
    in_snapshot = relative.startswith(SNAPSHOT_DIR)
    copy = copy_artifacts(artifacts, tmp_path / "art", ("churn",), copy_snapshot=in_snapshot)
    breaks(copy / relative)
    return copy


def assert_names_the_file(line: str, case: str) -> None:
    relative, _, words = BROKEN[case]
    name = META_FILE if case == "snapshot-array-flipped" else Path(relative).name
    assert "\n" not in line and name in line and words in line, line


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_file_is_refused_naming_it(artifacts, tmp_path, case):
    # The check python -m serve runs before any worker starts (in-process here: torch imports once).
    copy = broken_copy(artifacts, tmp_path, case)
    with pytest.raises(ArtifactsError) as refused:
        check_bundles(find_bundles(copy))
    assert str(refused.value).startswith("cannot serve churn: ")
    assert_names_the_file(str(refused.value), case)
    assert not (copy / "churn" / "pwned").exists()


SERVED_CASES = ["weights-pickle-with-code", "config-truncated", "snapshot-array-flipped"]


@pytest.fixture(scope="module")
def served_broken(artifacts, tmp_path_factory) -> dict[str, tuple[Path, Finished]]:
    """Each of :data:`SERVED_CASES` given to ``python -m serve``: its copy and what the command did (the
    three in one interpreter, :mod:`tests.cli_batch`: each would import torch first)."""
    copies = {case: broken_copy(artifacts, tmp_path_factory.mktemp(case), case) for case in SERVED_CASES}
    runs = run_many({case: ("serve", ["--artifacts", str(copy), "--port", str(free_port())])
                     for case, copy in copies.items()})
    return {case: (copies[case], runs[case]) for case in SERVED_CASES}


@pytest.mark.parametrize("case", SERVED_CASES)
def test_python_m_serve_refuses_in_one_line_without_a_traceback(served_broken, case):
    copy, result = served_broken[case]
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m serve: error: "), result.stderr[-2000:]
    assert_names_the_file(lines[0], case)
    assert not (copy / "churn" / "pwned").exists()


def cache_artifact(bundle_dir: Path) -> Path:
    (path,) = (bundle_dir / CACHE_DIR).glob("*.bin")
    return path


def read_artifact(path: Path) -> tuple[dict, bytes]:
    line, _, payload = unseal(path.read_bytes()).partition(b"\n")
    return json.loads(line), payload


def is_intact(path: Path) -> bool:
    header, payload = read_artifact(path)
    return all(hashlib.sha256(payload[offset:offset + length]).hexdigest() == digest
               for _, offset, length, digest in header["parts"])


def make_foreign(path: Path) -> None:
    header, payload = read_artifact(path)
    header["key"]["torch"] = "1.13.1+cu117"  # as if built by another torch, for another device
    header["key"]["device"] = "cuda"
    path.write_bytes(seal(json.dumps(header).encode() + b"\n" + payload))  # sealed, so only the key is off


def test_a_corrupt_or_foreign_compile_cache_is_a_miss_and_the_server_still_starts(server, artifacts, snapshot,
                                                                                  tmp_path):
    # The session server compiled every bucket and saved an artifact into each bundle (a hit's source).
    copy = copy_artifacts(artifacts, tmp_path / "art", ("churn", "sales"))
    corrupt, foreign = cache_artifact(copy / "churn"), cache_artifact(copy / "sales")
    threads = read_artifact(corrupt)[0]["key"]["threads"]  # the same key but for the damage
    flip_last_byte(corrupt)
    make_foreign(foreign)
    with ServerProcess(copy, "--tasks", "churn,sales", "--max-batch-size", MAX_BATCH, "--threads", threads,
                       log_path=tmp_path / "serve.log") as started:
        started.wait_ready(timeout=900)
        customer, article = snapshot.ids[CUSTOMER][0].decode(), snapshot.ids[ARTICLE][0].decode()
        assert requests.post(started.url + "/predict/churn", json={"customer_id": customer},
                             timeout=30).status_code == 200
        assert requests.post(started.url + "/predict/sales", json={"article_id": article},
                             timeout=30).status_code == 200
        metrics = scrape(started.url)
    for task in ("churn", "sales"):
        assert value(metrics, "relserve_compile_cache_total", task=task, result="miss") == 1, metrics
    log = started.log()
    assert f"compile cache miss: {corrupt} does not match the sha256 recorded" in log, log[-3000:]
    assert f"compile cache miss: {foreign} was built for" in log, log[-3000:]
    # Compiled from scratch, then saved afresh over the bad ones.
    assert is_intact(corrupt) and read_artifact(foreign)[0]["key"]["torch"] == torch.__version__
