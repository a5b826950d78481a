"""Shared fixtures: small synthetic H&M datasets in the Kaggle CSV layout, generated once per session.

``tiny_csv_dir`` (600 customers, 200 articles, 120 days) is for format and plumbing tests;
``small_csv_dir`` (3000 customers, 600 articles, 200 days) has enough weekly activity for
training-quality tests. Both end on 2020-09-22 and use seed 0; each takes well under a second.

The suite runs in two pytest-xdist workers (pyproject.toml: ``-n 2 --dist loadgroup``; ``-n 0`` runs
it in one process): each test module runs whole on one worker, and all that use the session's
``server`` on the same one (:mod:`tests.xdist_groups`). Trained bundles are built once per run, not
once per worker (:mod:`tests.built_once`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.built_once import built_once
from training.synth.cli import SynthConfig, generate

# OpenMP threads that wait for work sleep instead of spinning, in the test process and in every process
# it starts (servers, training, compiles; set before any of them imports torch). The suite's processes
# share 2 cores: a torch op's threads spinning at a barrier burn the core another process needed. On a
# busy 2-core machine test_real_slice_fit took 100-190 s spinning and 17-24 s waiting passively (10 s
# on the idle machine). Nothing computed changes; a value set outside the tests is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether this process hands the tests out to pytest-xdist workers of ``--dist loadgroup``."""
    return (bool(getattr(config.option, "numprocesses", None)) and config.getvalue("dist") == "loadgroup"
            and not os.environ.get("PYTEST_XDIST_WORKER"))


def pytest_configure(config: pytest.Config) -> None:
    if _xdist_controller(config):  # before the workers start: they inherit the environment
        from tests.xdist_groups import GROUPS_ENV

        os.environ[GROUPS_ENV] = str(Path(tempfile.mkdtemp(prefix="relserve-xdist-")) / "groups.json")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _xdist_controller(config):
        from tests.xdist_groups import GROUPS_ENV

        shutil.rmtree(Path(os.environ.pop(GROUPS_ENV)).parent, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, on the controller
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if not _xdist_controller(config):
        return None  # xdist's own scheduling for the other --dist modes
    from tests.xdist_groups import ModuleGroupScheduling

    return ModuleGroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") and config.getvalue("loadgroup"):
        from tests.xdist_groups import order_and_record

        order_and_record(items)


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

    def train(out: Path) -> None:
        code = main(["--data", str(tiny_csv_dir), "--task", "all", "--out", str(out), "--epochs", "1",
                     "--compile", "none", "--quiet"])
        assert code == 0, "training.fit failed on tiny_csv_dir"

    return built_once(tmp_path_factory, "trained_artifacts", train)
