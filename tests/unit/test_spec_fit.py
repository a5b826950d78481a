"""``training.fit`` on a spec: count-only data trains churn and purchase; sales says it needs an amount."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.bench.flat_table import write_flat
from training.fit.run import main

TINY = ["--epochs", "1", "--max-steps-per-epoch", "3", "--compile", "none", "--quiet"]
NO_AMOUNT = "sales needs an amount: the spec's [transactions] has no price or amount column"


@pytest.fixture(scope="module")
def count_only(tmp_path_factory: pytest.TempPathFactory, tiny_csv_dir: Path) -> Path:
    """The tiny synthetic data as one flat table whose spec names no price: every line counts 1.0."""
    out = write_flat(tiny_csv_dir, tmp_path_factory.mktemp("count_only"), "csv")
    spec = (out / "relserve.toml").read_text()
    (out / "relserve.toml").write_text(spec.replace('price = "price"\n', ""))
    return out


def test_sales_is_refused_with_one_line(count_only: Path, tmp_path: Path, capsys) -> None:
    assert main(["--data", str(count_only), "--task", "sales", "--out", str(tmp_path), *TINY]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"python -m training.fit: error: {NO_AMOUNT}"]
    assert not (tmp_path / "snapshot").exists()  # refused before any work


def test_all_tasks_train_churn_and_purchase_and_skip_sales(count_only: Path, tmp_path: Path, capsys) -> None:
    assert main(["--data", str(count_only), "--task", "all", "--out", str(tmp_path), *TINY]) == 0
    err = capsys.readouterr().err
    assert f"python -m training.fit: warning: skipped sales ({NO_AMOUNT})" in err.splitlines()
    assert (tmp_path / "churn").is_dir() and (tmp_path / "purchase").is_dir()
    assert not (tmp_path / "sales").exists()


def test_a_spec_given_with_spec_reads_another_directory(count_only: Path, tmp_path: Path, capsys) -> None:
    """--spec names a spec kept elsewhere; its file names are under --data."""
    spec = tmp_path / "shop.toml"
    spec.write_text((count_only / "relserve.toml").read_text())
    data = tmp_path / "data"
    data.mkdir()
    (data / "order_lines.csv").write_bytes((count_only / "order_lines.csv").read_bytes())
    out = tmp_path / "out"
    assert main(["--data", str(data), "--spec", str(spec), "--task", "churn", "--out", str(out), *TINY]) == 0
    assert (out / "churn").is_dir()
    # the snapshot records the spec: another spec for the same files is other data
    spec.write_text(spec.read_text().replace('FN = "categorical"', 'FN = "text"'))
    capsys.readouterr()
    assert main(["--data", str(data), "--spec", str(spec), "--task", "churn", "--out", str(out), *TINY]) == 2
    assert "was not built from the CSV files" in capsys.readouterr().err
