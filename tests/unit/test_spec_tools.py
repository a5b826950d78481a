"""The benchmarks take a data directory described by its relserve.toml, as training.fit does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from raw_export import REPO, stock_code, write_export

from models.schema import ARTICLE
from models.store.snapshot import GraphSnapshot
from training.bench.seeds import check_data


def test_the_seeds_benchmark_accepts_a_raw_export_with_its_spec(tiny_csv_dir: Path, tmp_path: Path) -> None:
    data = write_export(tiny_csv_dir, tmp_path / "shop")
    assert check_data(data, synth=False) is None
    (data / "online_retail_II_2010_2011.parquet").unlink()
    assert "online_retail_II_2010_2011.parquet: file not found" in check_data(data, synth=False)


@pytest.mark.slow
def test_the_data_pipeline_benchmark_reads_a_raw_export(tiny_csv_dir: Path, tmp_path: Path) -> None:
    data = write_export(tiny_csv_dir, tmp_path / "shop")
    done = subprocess.run([sys.executable, "-m", "training.bench.data", "--data", str(data), "--snapshot",
                           str(tmp_path / "snapshot"), "--batch-sizes", "4", "--seconds", "0.1"],
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert GraphSnapshot.open(tmp_path / "snapshot").lookup(ARTICLE, [stock_code(0)]).tolist()[0] >= 0
