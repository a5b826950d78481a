"""``counted_start``: failed starts of one worker are counted in a row; the last allowed one writes
why and sends SIGTERM to the main process (a stand-in process here)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from serve.http.failed_starts import MAX_FAILED_STARTS, counted_start, failed_start_reason
from serve.processes import STOP_ORDERS_ENV


def fail(worker: str) -> None:
    with pytest.raises(RuntimeError), counted_start(worker):
        raise RuntimeError("no   model\nhere")


def test_failed_starts_in_a_row_stop_the_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = subprocess.Popen(["sleep", "60"])
    try:
        monkeypatch.setenv(STOP_ORDERS_ENV, f"{main.pid}:{tmp_path / 'released'}")
        for _ in range(MAX_FAILED_STARTS - 1):
            fail("churn worker 0")
        with counted_start("churn worker 0"):  # a good start forgets the failures before it
            pass
        for _ in range(MAX_FAILED_STARTS - 1):
            fail("churn worker 0")
            fail("sales worker 0")  # another worker's failures are its own
        assert failed_start_reason(tmp_path) is None and main.poll() is None
        fail("churn worker 0")
        assert main.wait(timeout=30) == -15  # SIGTERM
        assert failed_start_reason(tmp_path) == (
            f"the churn worker 0 failed to start {MAX_FAILED_STARTS} times in a row "
            "(RuntimeError: no model here); stopped the server")
    finally:
        main.kill()
        main.wait()


def test_outside_a_server_nothing_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STOP_ORDERS_ENV, raising=False)
    for _ in range(MAX_FAILED_STARTS + 1):
        fail("churn worker 0")
    assert failed_start_reason(tmp_path) is None and list(tmp_path.iterdir()) == []
