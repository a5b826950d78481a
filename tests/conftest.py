"""Shared fixtures: small synthetic H&M datasets in the Kaggle CSV layout, generated once per session.

``tiny_csv_dir`` (600 customers, 200 articles, 120 days) is for format and plumbing tests;
``small_csv_dir`` (3000 customers, 600 articles, 200 days) has enough weekly activity for
training-quality tests. Both end on 2020-09-22 and use seed 0; each takes well under a second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from training.synth.cli import SynthConfig, generate


@pytest.fixture(scope="session")
def tiny_synth_config() -> SynthConfig:
    """The config behind ``tiny_csv_dir``."""
    return SynthConfig(customers=600, articles=200, days=120, seed=0)


@pytest.fixture(scope="session")
def small_synth_config() -> SynthConfig:
    """The config behind ``small_csv_dir``."""
    return SynthConfig(customers=3000, articles=600, days=200, seed=0)


@pytest.fixture(scope="session")
def tiny_csv_dir(tmp_path_factory: pytest.TempPathFactory, tiny_synth_config: SynthConfig) -> Path:
    """Directory with ``customers.csv``, ``articles.csv``, ``transactions_train.csv`` (about 3k rows)."""
    out = tmp_path_factory.mktemp("tiny_csv")
    generate(tiny_synth_config, out)
    return out


@pytest.fixture(scope="session")
def small_csv_dir(tmp_path_factory: pytest.TempPathFactory, small_synth_config: SynthConfig) -> Path:
    """Directory with the three CSV files (about 26k transactions)."""
    out = tmp_path_factory.mktemp("small_csv")
    generate(small_synth_config, out)
    return out


@pytest.fixture(scope="session")
def trained_artifacts(tmp_path_factory: pytest.TempPathFactory, tiny_csv_dir: Path) -> Path:
    """``python -m training.fit --task all --epochs 1 --compile none`` on ``tiny_csv_dir`` (run in-process):
    a bundle per task in ``<dir>/<task>/`` and the snapshot in ``<dir>/snapshot/``. Treat as read-only."""
    from training.fit.run import main

    out = tmp_path_factory.mktemp("trained_artifacts")
    code = main(["--data", str(tiny_csv_dir), "--task", "all", "--out", str(out), "--epochs", "1",
                 "--compile", "none", "--quiet"])
    assert code == 0, "training.fit failed on tiny_csv_dir"
    return out
