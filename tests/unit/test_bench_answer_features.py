"""``training.bench.answer_features`` runs on real bundles and prints each window's three ways."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.bench.answer_features import main


def test_prints_every_task_batch_and_window(trained_artifacts: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--artifacts", str(trained_artifacts), "--batch-sizes", "1", "4", "--calls", "6",
                 "--window", "3"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(row[0], row[1]) for row in rows] == [
        (f"{task}/{batch}", window) for task in ("churn", "sales", "purchase") for batch in (1, 4)
        for window in ("first", "last")]
    assert all(float(value) > 0 for row in rows for value in row[2:])


def test_refuses_a_window_larger_than_half_the_calls(trained_artifacts: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--artifacts", str(trained_artifacts), "--calls", "10", "--window", "6"])
    assert stopped.value.code == 2
