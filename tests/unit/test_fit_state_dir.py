"""``training.fit --data STATE_DIR``: training on a server's live graph (its snapshot plus the ingested
log) writes the next version of each task, reads the graph a rebuild of the same rows would give, and
leaves the served files alone. The loop through a running server: tests/integration/test_retrain_loop.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from models.store.log import WAL_DIR
from models.store.log.wal import WriteAheadLog
from models.store.snapshot import GraphSnapshot
from tests.ingest_helpers import CUT, transaction_batches
from training.fit.run import main as fit
from training.snapshot import main as build_snapshot

pytestmark = pytest.mark.slow

SMALL_BUDGET = ["--epochs", "1", "--max-steps-per-epoch", "2", "--compile", "none", "--quiet"]


def _digest(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def served(tiny_csv_dir: Path, trained_artifacts: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[Path, Path, int]:
    """Artifacts with the snapshot of days ..D and the trained churn bundle (version 1), and a state
    directory whose log holds days D+1..D+7; and how many batches that is."""
    artifacts, state = tmp_path_factory.mktemp("served"), tmp_path_factory.mktemp("state")
    cut = ["--data", str(tiny_csv_dir), "--out", str(artifacts), "--until", CUT, "--quiet"]
    assert build_snapshot(cut) == 0
    shutil.copytree(trained_artifacts / "churn", artifacts / "churn")
    log = WriteAheadLog(state / WAL_DIR)
    batches = transaction_batches(tiny_csv_dir, CUT, 200)
    for batch in batches:
        log.append(batch, batch.sequence - 1)
    log.close()
    return artifacts, state, len(batches)


def test_retraining_from_a_state_dir_writes_the_next_version(served: tuple[Path, Path, int],
                                                             trained_artifacts: Path) -> None:
    artifacts, state, batches = served
    before = _digest(artifacts / "snapshot"), _digest(state)
    assert fit(["--data", str(state), "--out", str(artifacts), "--task", "churn", *SMALL_BUDGET]) == 0

    version = artifacts / "churn" / "2"
    assert all((version / name).is_file() for name in ("config.json", "weights.safetensors", "metrics.json"))
    config = json.loads((version / "config.json").read_text())
    # the live graph folded whole is the snapshot a rebuild from every row writes, byte for byte
    assert config["fingerprint"] == GraphSnapshot.open(trained_artifacts / "snapshot").fingerprint
    assert config["training"]["log_sequence"] == batches
    assert (_digest(artifacts / "snapshot"), _digest(state)) == before  # the served files are only read
    assert [p.name for p in (artifacts / "churn").iterdir() if p.name.startswith(".")] == []
    assert (artifacts / "churn" / "config.json").is_file()  # version 1 (the single-bundle layout) is kept

    assert fit(["--data", str(state), "--out", str(artifacts), "--task", "churn", *SMALL_BUDGET]) == 0
    assert (artifacts / "churn" / "3" / "metrics.json").is_file()


def test_state_dir_errors_are_one_line(served: tuple[Path, Path, int], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    _, state, _ = served
    assert fit(["--data", str(state), "--out", str(tmp_path), "--task", "churn", *SMALL_BUDGET]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "must be the artifacts that server serves" in error, error
    with pytest.raises(SystemExit) as exit_info:
        fit(["--data", str(state), "--out", str(tmp_path), "--task", "churn", "--rebuild-snapshot"])
    assert exit_info.value.code == 2
    assert "state directory" in capsys.readouterr().err
