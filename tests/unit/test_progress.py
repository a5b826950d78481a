"""Progress bars draw only on a terminal: logs and pipes get plain lines, never ``\\r`` redraws."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from models.progress import on_terminal, progress_bar
from training.fit.run import main as fit_main

REPO = Path(__file__).resolve().parents[2]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def drawn(stream: io.StringIO, **kwargs) -> str:
    for _ in progress_bar(range(50), file=stream, mininterval=0, **kwargs):
        pass
    return stream.getvalue()


def test_a_bar_draws_on_a_terminal_unless_disabled() -> None:
    assert "\r" in drawn(Terminal())
    assert drawn(Terminal(), enabled=False) == ""


def test_a_bar_into_a_file_or_pipe_writes_nothing_yet_counts() -> None:
    assert drawn(io.StringIO()) == ""
    bar = progress_bar(total=10, file=io.StringIO())
    bar.update(4)
    bar.set_postfix(loss="0.1")
    bar.close()
    assert not on_terminal(io.StringIO()) and on_terminal(Terminal())


def test_a_stream_without_isatty_or_closed_is_no_terminal() -> None:
    closed = io.StringIO()
    closed.close()  # isatty() now raises ValueError
    assert not on_terminal(closed) and not on_terminal(object())  # type: ignore[arg-type]


def test_synth_into_a_pipe_writes_no_carriage_returns(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "training.synth", "--out", str(tmp_path / "csv"),
                             "--customers", "300", "--articles", "80", "--days", "60"],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "\r" not in result.stderr + result.stdout


@pytest.mark.slow  # trains one short epoch
def test_training_logs_one_plain_line_per_epoch_off_a_terminal(tiny_csv_dir: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture) -> None:
    # capsys's stderr is no terminal, like a log file: the snapshot, CSV and epoch bars stay silent
    code = fit_main(["--data", str(tiny_csv_dir), "--task", "churn", "--out", str(tmp_path / "out"),
                     "--epochs", "2", "--max-steps-per-epoch", "3", "--patience", "5", "--compile", "none"])
    err = capsys.readouterr().err
    assert code == 0, err[-3000:]
    assert "\r" not in err
    for epoch in (1, 2):
        lines = [line for line in err.splitlines() if line.startswith(f"churn epoch {epoch}/2: ")]
        assert len(lines) == 1 and " steps in " in lines[0] and "steps/s), loss " in lines[0], err[-3000:]
