"""python -m serve: arguments, artifacts discovery and start-up errors (one line, no traceback)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from models.files import memory_dir
from serve.__main__ import prepare_metrics_dir
from serve.config import ServeConfig, parse_args
from serve.private_dirs import OWNER_FILE
from serve.versions.bundles import ArtifactsError, find_bundles, quality_warnings


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "serve", *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])


def fake_artifacts(root: Path, tasks: tuple[str, ...]) -> Path:
    (root / "snapshot").mkdir(parents=True)
    for task in tasks:
        (root / task).mkdir()
        (root / task / "config.json").write_text("{}")
    return root


def test_defaults_and_derived_limits():
    config = parse_args(["--artifacts", ".", "--max-batch-size", "8", "--workers-per-task", "2"])
    assert (config.host, config.port, config.compile, config.tasks) == ("127.0.0.1", 8000, "buckets", None)
    assert config.max_queue == 128
    assert config.request_deadline_s == config.request_timeout_s + 5
    assert config.with_layout(num_tasks=3, accelerator="cpu")[0].threads >= 1
    assert parse_args(["--artifacts", ".", "--tasks", "sales,churn"]).tasks == ("sales", "churn")
    assert config.fast_queue and not parse_args(["--artifacts", ".", "--transport", "mp"]).fast_queue


@pytest.mark.parametrize("args, message", [
    (["--port", "80"], "--port must be in 1024..65535"),
    (["--max-batch-size", "0"], "--max-batch-size must be in 1..1024"),
    (["--batch-timeout", "20", "--request-timeout", "10"], "--batch-timeout must be below"),
    (["--compile", "none", "--cuda-graphs"], "--cuda-graphs needs --compile buckets"),
    (["--tasks", "churn,nope"], "unknown task"),
    (["--compile", "fast"], "invalid choice"),
])
def test_bad_arguments_exit_2_with_one_line(args, message, capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(["--artifacts", ".", *args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and err.count("\n") == 1


def test_find_bundles_lists_present_tasks_in_order(tmp_path):
    root = fake_artifacts(tmp_path / "art", ("purchase", "churn"))
    assert [b.task for b in find_bundles(root)] == ["churn", "purchase"]
    assert [b.task for b in find_bundles(root, ("purchase",))] == ["purchase"]
    assert find_bundles(root)[0].snapshot_dir == root / "snapshot"


@pytest.mark.parametrize("layout, tasks, message", [
    (None, None, "does not exist"),
    ("no-snapshot", None, "no snapshot/ directory"),
    ((), None, "holds no task bundle"),
    (("churn",), ("sales",), "no bundle for sales"),
])
def test_find_bundles_explains_what_is_missing(tmp_path, layout, tasks, message):
    root = tmp_path / "art"
    if layout == "no-snapshot":
        root.mkdir()
    elif layout is not None:
        fake_artifacts(root, layout)
    with pytest.raises(ArtifactsError, match=message):
        find_bundles(root, tasks)


def test_bundles_that_lose_to_a_baseline_are_warned_about(tmp_path):
    root = fake_artifacts(tmp_path, ("churn", "sales", "purchase"))
    split = {"model": {"auroc": 0.6}, "baselines": {"recency_frequency": {"auroc": 0.7}}}
    doc = {"task": "churn", "primary": "auroc", "higher_is_better": True, "val": split, "test": split}
    (root / "churn" / "metrics.json").write_text(json.dumps({**doc, "beats_baselines": False}))
    sales = {**doc, "task": "sales", "beats_baselines": True}
    (root / "sales" / "metrics.json").write_text(json.dumps(sales))
    (root / "purchase" / "metrics.json").write_text("not json")
    assert quality_warnings(find_bundles(root)) == [
        "the churn model does not beat the best baseline on validation: "
        "auroc 0.6000 vs recency_frequency 0.7000"]


def test_missing_artifacts_is_one_line_and_exit_2(tmp_path):
    result = run_cli("--artifacts", str(tmp_path / "nowhere"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "is not a directory" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.slow  # imports torch in a fresh process
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_graphs_without_cuda_is_one_line_and_exit_2(tmp_path):
    root = fake_artifacts(tmp_path / "art", ("churn",))
    result = run_cli("--artifacts", str(root), "--cuda-graphs")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--cuda-graphs needs a CUDA device" in result.stderr


def test_metrics_dir_is_created_or_emptied(tmp_path, monkeypatch):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")  # restored (or removed) after the test
    created, owned = prepare_metrics_dir()
    # Nothing but the file naming its maker (serve.private_dirs: a killed server's is removed).
    assert owned and created.is_dir() and [p.name for p in created.iterdir()] == [OWNER_FILE]
    # In memory where the machine has it: every answer writes to these files.
    assert created.parent == (memory_dir() or Path(tempfile.gettempdir()))
    shutil.rmtree(created)
    given = tmp_path / "prom"
    given.mkdir()
    (given / "counter_123.db").write_bytes(b"stale")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(given))
    assert prepare_metrics_dir() == (given, False)
    assert not any(given.iterdir())


def test_config_rejects_unknown_host():
    with pytest.raises(ValueError, match="--host"):
        ServeConfig(artifacts=Path("a"), host="localhost")
