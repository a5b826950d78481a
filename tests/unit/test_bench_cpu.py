"""serve.bench.cpu: CPU time of a server's processes from /proc, per answered request and by role."""

from __future__ import annotations

import os
import subprocess
import sys

from serve.bench.cpu import CpuSample, cpu_report, role_group


class Group:
    """The part of ServerProcess that CpuSample reads: the processes of one server."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def group_pids(self) -> list[int]:
        return self.pids


BURN = ("import sys\nsys.stdin.readline()\nx = sum(range(20_000_000))\nprint('done', flush=True)\n"
        "sys.stdin.read()")


def test_cpu_a_busy_process_spends_is_counted():
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        group = Group([os.getpid(), child.pid])
        before = CpuSample.of(group)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"
        spent = CpuSample.of(group).since(before)
    finally:
        child.kill()
        child.wait(timeout=60)
    assert spent[child.pid] > 0.1 and spent[os.getpid()] >= 0.0  # 20M additions: a good part of a second
    assert CpuSample.of(Group([child.pid])).seconds == {}  # a process gone is left out, not an error


def test_report_per_request_and_by_role():
    spent = {1: 0.5, 2: 1.0, 3: 0.25, 4: 0.25}
    roles = {1: "api-server", 2: "worker:churn", 3: "worker:sales#1", 4: "manager"}
    report = cpu_report(spent, answered=1000, roles=roles)
    assert report["cpu_s"] == 2.0 and report["ms_per_request"] == 2.0
    assert report["by_role_ms"] == {"api-server": 0.5, "manager": 0.25, "workers": 1.25}
    assert "by_role_ms" not in cpu_report(spent, answered=0) and role_group("main") == "main"
