"""python -m serve with ingestion options: parsing, and start-up refusals in one line (exit 2) before
anything heavy starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from serve.config import parse_args
from serve.ingest.config import WAL
from tests.cli_batch import Finished, run_many
from tests.ingest_helpers import free_port


def test_without_a_state_dir_there_is_no_ingestion() -> None:
    assert parse_args(["--artifacts", "."]).ingest is None


def test_a_state_dir_turns_ingestion_on_with_its_defaults(tmp_path: Path) -> None:
    ingest = parse_args(["--artifacts", ".", "--state-dir", str(tmp_path / "s"), "--ingest-lateness-days",
                         "2", "--compact-every", "60", "--clock", "wall"]).ingest
    assert ingest.state_dir == tmp_path / "s" and ingest.log == WAL and ingest.lateness_days == 2
    assert (ingest.max_rows, ingest.sync_timeout_s, ingest.poll_s) == (10_000, 10.0, 0.05)
    assert (ingest.compact_every_s, ingest.clock) == (60.0, "wall")
    assert (ingest.follow_share, ingest.key_share, ingest.lag_target_s) == (0.3, 0.5, 0.8)
    off = parse_args(["--artifacts", ".", "--state-dir", "s", "--ingest-lag-target", "0"]).ingest
    assert off.lag_target_s == 0.0  # the share alone paces the owner


@pytest.mark.parametrize(("args", "message"), [
    (["--ingest-dir", "d"], "need --state-dir"),
    (["--compact-every", "5"], "need --state-dir"),
    (["--ingest-lag-target", "2"], "need --state-dir"),
    (["--state-dir", "s", "--ingest-lag-target", "0.01"], "--ingest-lag-target must be 0 (off) or in"),
    (["--state-dir", "s", "--ingest-lag-target", "nan"], "--ingest-lag-target must be 0 (off) or in"),
    (["--state-dir", "s", "--ingest-max-rows", "0"], "--ingest-max-rows must be in"),
    (["--state-dir", "s", "--ingest-log", "http://x"], "--ingest-log must be wal or redis[s]://"),
    (["--state-dir", "s", "--compact-every", "0.5"], "--compact-every must be at least 1 s"),
    (["--state-dir", "s", "--ingest-lateness-days", "-1"], "must not be negative"),
    (["--state-dir", "s", "--clock", "moon"], "invalid choice"),
])
def test_bad_ingestion_arguments_exit_2_with_one_line(args: list[str], message: str,
                                                      capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(["--artifacts", ".", *args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and err.count("\n") == 1


def fake_artifacts(root: Path) -> Path:
    (root / "snapshot").mkdir(parents=True)
    (root / "churn").mkdir()
    (root / "churn" / "config.json").write_text("{}")
    return root


REFUSALS = {
    # case: (environment, state directory under the test's folder, --ingest-log, what the line says)
    "no-write-key": ({}, "state", WAL, "need a write key: set RELSERVE_WRITE_KEY"),
    "empty-write-key": ({"RELSERVE_WRITE_KEY": ""}, "state", WAL, "RELSERVE_WRITE_KEY must be non-empty"),
    "bad-read-key": ({"RELSERVE_WRITE_KEY": "k", "RELSERVE_READ_KEY": "a b"}, "state", WAL,
                     "RELSERVE_READ_KEY must be"),
    "state-inside-artifacts": ({"RELSERVE_WRITE_KEY": "k"}, "artifacts/state", WAL,
                               "must not be inside --artifacts"),
    "redis-down": ({"RELSERVE_WRITE_KEY": "k"}, "state", "redis://127.0.0.1:{port}/0", "ingestion log: redis://"),
}


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Finished]:
    """Every case of :data:`REFUSALS` run as ``python -m serve`` (one interpreter for all,
    :mod:`tests.cli_batch`, each case with its own environment: finding the bundles imports torch)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RELSERVE_")}
    cases = {}
    for case, (env, state, log, _) in REFUSALS.items():
        tmp_path = tmp_path_factory.mktemp(case)
        artifacts = fake_artifacts(tmp_path / "artifacts")
        cases[case] = ("serve", ["--artifacts", str(artifacts), "--state-dir", str(tmp_path / state),
                                 "--ingest-log", log.format(port=free_port())], {**clean, **env})
    return run_many(cases)


@pytest.mark.parametrize("case", list(REFUSALS))
def test_start_up_refusals_are_one_line(refusals: dict[str, Finished], case: str) -> None:
    result, message = refusals[case], REFUSALS[case][3]
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
