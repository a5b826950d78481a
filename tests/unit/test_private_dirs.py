"""A server's private directories (serve.private_dirs): one left by a process killed with SIGKILL is
removed by the next of its kind; a live maker's, an unknown maker's and another prefix's stay.

The killed maker is a real ``python -c`` process that makes its directory and sends itself SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from serve.private_dirs import OWNER_FILE, private_dir, start_time, sweep

REPO = Path(__file__).resolve().parents[2]
KILLED_MAKER = """
import os, signal, sys
from serve.private_dirs import private_dir
print(private_dir(sys.argv[1], sys.argv[2]), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_makers_dir(prefix: str, parent: Path) -> Path:
    result = subprocess.run([sys.executable, "-c", KILLED_MAKER, prefix, str(parent)], capture_output=True,
                            text=True, cwd=REPO, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == -signal.SIGKILL, result.stderr
    return Path(result.stdout.strip())


def test_a_killed_makers_directory_goes_with_the_next_one_of_its_kind(tmp_path):
    left = killed_makers_dir("relserve-metrics-", tmp_path)
    assert (left / OWNER_FILE).exists()
    other_kind = killed_makers_dir("relserve-stop-", tmp_path)
    unknown = tmp_path / "relserve-metrics-older"  # no owner file: an older server's, or being made
    unknown.mkdir()
    live = private_dir("relserve-metrics-", tmp_path)
    assert not left.exists()
    assert live.is_dir() and unknown.is_dir() and other_kind.is_dir()
    assert sweep("relserve-metrics-", tmp_path) == []  # this process is alive: its own stays
    assert sweep("relserve-stop-", tmp_path) == [other_kind]


def test_a_reused_pid_does_not_keep_a_directory(tmp_path):
    reused = tmp_path / "relserve-models-reused"
    reused.mkdir()
    # This process's pid, but another start time: the maker that wrote it is gone.
    (reused / OWNER_FILE).write_text(f"{os.getpid()} {start_time(os.getpid()) - 1}")
    assert sweep("relserve-models-", tmp_path) == [reused]
    assert not reused.exists()


def test_start_time_of_a_gone_process_is_none():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert start_time(child.pid) is None
    assert start_time(os.getpid()) == start_time(os.getpid()) is not None
