"""Run ``python -m serve`` as a child process on a free loopback port (tests and benchmarks).

The server runs in a session of its own, so its main process, LitServe's Manager, the
inference workers and the API servers form one process group that :meth:`ServerProcess.stop`
can always clean up, even after a crash.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from serve.bench.proc import command_line, is_spawned_child, process_name, start_tick, state
from serve.processes import BACKGROUND_NAME, OWNER_NAME

HELPERS = {OWNER_NAME: "graph-owner", BACKGROUND_NAME: "background"}


def _name(pid: int) -> str:
    try:
        return process_name(pid)
    except OSError:  # gone meanwhile
        return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """Status of ``GET url``; ``None`` when nothing answers (refused, reset, timed out)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (OSError, urllib.error.URLError):
        return None


class ServerProcess:
    """``python -m MODULE --artifacts DIR --port P *args`` with its output in ``log_path``.

    Args:
        artifacts: the bundles to serve.
        args: further ``python -m serve`` arguments.
        log_path: where stdout and stderr go (a temporary file if ``None``).
        env: extra environment variables.
        module: the module run (``serve.bench.ceiling_server`` takes the same arguments).
    """

    def __init__(self, artifacts: str | Path, *args: str, log_path: str | Path | None = None,
                 env: dict[str, str] | None = None, module: str = "serve") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [sys.executable, "-m", module, "--artifacts", str(artifacts),
                        "--port", str(self.port), *args]
        self.env = {**os.environ, **(env or {})}
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self._log: IO | None = None

    def start(self) -> ServerProcess:
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="relserve-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop)
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.command, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def wait_ready(self, timeout: float = 300.0) -> float:
        """Wait for ``/health`` 200; returns seconds since :meth:`start`.

        Raises:
            RuntimeError: the server exited first.
            TimeoutError: not ready within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = "\n".join(self.log().splitlines()[-15:])
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{tail}")
            if http_status(self.url + "/health", timeout=1.0) == 200:
                return time.monotonic() - self.started_at
            time.sleep(0.05)
        raise TimeoutError(f"/health not 200 after {timeout:.0f} s; log: {self.log_path}")

    def group_pids(self) -> list[int]:
        """Live (non-zombie) processes of the server's process group."""
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError):
                if os.getpgid(int(entry)) == self.proc.pid and state(int(entry)) != "Z":
                    pids.append(int(entry))
        return sorted(pids)

    def worker_pids(self) -> list[int]:
        """The inference workers (spawned, where the rest is forked), oldest first: LitServe starts
        them in task order, a task's workers one after another."""
        spawned = (pid for pid in self.group_pids() if is_spawned_child(pid) and _name(pid) not in HELPERS)
        return sorted(spawned, key=start_tick)

    def helper_pids(self) -> dict[str, int]:
        """The server's own helper processes by name (``relserve-graph``: the graph owner,
        ``relserve-bg``: the background process)."""
        return {name: pid for pid in self.group_pids() if (name := _name(pid)) in HELPERS}

    def roles(self, tasks: list[str]) -> dict[int, str]:
        """Each process of the group by role: main, manager, worker:<task>[#i], api-server, tracker,
        graph-owner, background.

        LitServe forks its Manager, spawns the workers in task order, then forks the API servers.
        """
        roles, forked = {self.proc.pid: "main"}, []
        workers = self.worker_pids()
        helpers = {pid: name for name, pid in self.helper_pids().items()}
        roles.update({pid: HELPERS[name] for pid, name in helpers.items()})
        for pid in self.group_pids():
            if pid == self.proc.pid or pid in workers or pid in helpers:
                continue
            if b"resource_tracker" in command_line(pid):
                roles[pid] = "tracker"
            else:
                forked.append(pid)
        per_task = max(1, len(workers) // len(tasks))
        for i, pid in enumerate(workers):
            task = tasks[min(i // per_task, len(tasks) - 1)]
            roles[pid] = f"worker:{task}" + (f"#{i % per_task}" if per_task > 1 else "")
        first_worker = start_tick(workers[0]) if workers else 0
        for pid in sorted(forked, key=start_tick):
            roles[pid] = "manager" if start_tick(pid) <= first_worker else "api-server"
        return roles

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM to the main process only (what a container runtime sends); its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> int | None:
        """Terminate gracefully, then kill whatever of the process group is left."""
        if self.proc is None:
            return None
        code = self.terminate()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(10)
        if self._log:
            self._log.close()
        return code

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
