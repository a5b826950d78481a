"""CPU time a server's processes spend, read from ``/proc`` before and after a load run.

What a request costs in CPU does not depend on how many cores the machine has (req/s does), so
``serve.bench --ceiling`` reports CPU-milliseconds per answered request, summed over every process
of the server (main, LitServe's Manager, inference workers, API servers: the whole process group
:class:`serve.bench.process.ServerProcess` starts), beside the no-model servers' figure, and split
by role for the model servers.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from serve.bench.proc import cpu_seconds
from serve.bench.process import ServerProcess


@dataclass(frozen=True)
class CpuSample:
    """User + system CPU seconds of each live process of a server at one moment."""

    seconds: dict[int, float]

    @classmethod
    def of(cls, server: ServerProcess) -> CpuSample:
        seconds = {}
        for pid in server.group_pids():
            with contextlib.suppress(OSError, IndexError, ValueError):  # exited meanwhile
                seconds[pid] = cpu_seconds(pid)
        return cls(seconds)

    def since(self, before: CpuSample) -> dict[int, float]:
        """CPU seconds each process spent since ``before`` (a process started since: all of it).
        A process that exited in between is missing: none should during a load run."""
        return {pid: s - before.seconds.get(pid, 0.0) for pid, s in self.seconds.items()}


def role_group(role: str) -> str:
    """``worker:churn#1`` -> ``workers``; the other roles of :meth:`ServerProcess.roles` as they are."""
    return "workers" if role.startswith("worker") else role


def cpu_report(spent: dict[int, float], answered: int, roles: dict[int, str] | None = None) -> dict:
    """``ms_per_request`` over all processes and, with ``roles``, ``{role: ms per request}``.

    Args:
        spent: CPU seconds per process over the run (:meth:`CpuSample.since`).
        answered: requests answered in the run (2xx).
        roles: the role of each process (:meth:`ServerProcess.roles`).
    """
    per = 1000.0 / max(answered, 1)
    report: dict = {"cpu_s": round(sum(spent.values()), 3), "ms_per_request": sum(spent.values()) * per}
    if roles is not None:
        by_role: dict[str, float] = {}
        for pid, seconds in spent.items():
            group = role_group(roles.get(pid, "other"))
            by_role[group] = by_role.get(group, 0.0) + seconds * per
        report["by_role_ms"] = dict(sorted(by_role.items()))
    return report
