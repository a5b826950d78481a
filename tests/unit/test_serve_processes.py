"""Who acts on SIGINT and SIGTERM (serve.processes): a child ignores them until the main process
releases it or is gone; a handler of its own (uvicorn's) waits for the release too; a child spawned
under :func:`signals_held` starts with SIGINT blocked.

The children are real ``python -c`` processes answering ``ping`` on stdin with ``pong``: a pong after
a signal proves the child handled it (a pending signal's handler runs before the next line is read)
and lived on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from serve.processes import STOP_ORDERS_ENV, defer_handlers_to_main, signals_held

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import sys
from serve.processes import defer_to_main
defer_to_main()
print("ready", flush=True)
for line in sys.stdin:
    print("pong", flush=True)
"""


def start_child(orders: str | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != STOP_ORDERS_ENV}
    if orders is not None:
        env[STOP_ORDERS_ENV] = orders
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env, cwd=REPO)
    assert child.stdout.readline() == "ready\n"
    return child


def lives_on(child: subprocess.Popen) -> bool:
    child.stdin.write("ping\n")
    child.stdin.flush()
    return child.stdout.readline() == "pong\n"


@pytest.fixture
def child_of_this_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    flag = tmp_path / "released"
    child = start_child(f"{os.getpid()}:{flag}")
    yield child, flag
    child.kill()
    child.wait(60)


def test_a_child_ignores_the_group_signals_until_released(child_of_this_process):
    child, flag = child_of_this_process
    for signum in (signal.SIGINT, signal.SIGTERM):
        child.send_signal(signum)
        assert lives_on(child)
    flag.touch()
    child.send_signal(signal.SIGTERM)
    assert child.wait(60) == -signal.SIGTERM  # the default action, as LitServe's terminate() expects


def test_a_child_of_a_main_process_that_is_gone_stops_on_the_signal(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(60)
    child = start_child(f"{gone.pid}:{tmp_path / 'released'}")
    child.send_signal(signal.SIGINT)
    assert child.wait(60) == -signal.SIGINT


def test_outside_a_server_the_signals_keep_their_default():
    child = start_child(None)
    child.send_signal(signal.SIGTERM)
    assert child.wait(60) == -signal.SIGTERM


def test_a_handler_of_its_own_runs_only_once_released(tmp_path, monkeypatch):
    flag = tmp_path / "released"
    monkeypatch.setenv(STOP_ORDERS_ENV, f"{os.getpid()}:{flag}")
    calls: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    try:
        defer_handlers_to_main()
        signal.raise_signal(signal.SIGTERM)
        assert calls == []
        flag.touch()
        signal.raise_signal(signal.SIGTERM)
        assert calls == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_child_spawned_under_signals_held_starts_with_sigint_blocked():
    with signals_held():
        child = subprocess.run([sys.executable, "-c", "import signal; print(*(int(s) for s in "
                                "signal.pthread_sigmask(signal.SIG_BLOCK, [])))"], capture_output=True,
                               text=True, timeout=120)
    assert int(signal.SIGINT) in [int(s) for s in child.stdout.split()]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # this thread: restored


SPAWNING_PARENT = """
import multiprocessing as mp, sys, time
from pathlib import Path


def child(fix: bool, ready: str) -> None:
    if fix:
        from serve.processes import keep_progress_bars_in_process
        keep_progress_bars_in_process()
    from tqdm import tqdm
    for _ in tqdm(range(2), disable=True):  # what Inductor does while it waits for its kernels
        pass
    Path(ready).touch()
    time.sleep(60)


if __name__ == "__main__":
    ready = Path(sys.argv[2])
    process = mp.get_context("spawn").Process(target=child, args=(sys.argv[1] == "fix", str(ready)))
    process.start()
    while not ready.exists():
        time.sleep(0.05)
    process.terminate()  # as LitServe stops its workers: SIGTERM, no Python clean-up
    process.join()
"""


@pytest.mark.parametrize("fix", [True, False], ids=["kept-in-process", "default-lock"])
def test_a_spawned_child_stopped_by_a_signal_leaks_no_semaphore(tmp_path, fix):
    script = tmp_path / "parent.py"
    script.write_text(SPAWNING_PARENT)
    mode = "fix" if fix else "default"
    result = subprocess.run([sys.executable, str(script), mode, str(tmp_path / "ready")],
                            capture_output=True, text=True, cwd=REPO, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    # The resource tracker outlives the parent and reports what the child left behind.
    assert ("leaked semaphore" in result.stderr) != fix, result.stderr
