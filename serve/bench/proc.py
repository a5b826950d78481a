"""What Linux's ``/proc`` says about one process: its state, start time, CPU time, command line and memory.

The benchmarks (soak, scale), :class:`serve.bench.process.ServerProcess` and the tests that watch or
kill a server's processes all read ``/proc`` through these functions. Linux only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` from the third (state) on.

    The second field, the command name in parentheses, may itself hold spaces and parentheses,
    so the split starts after its last ``)``.
    """
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def state(pid: int) -> str:
    """The one-letter state (``R``, ``S``, ``Z`` for a zombie, ...)."""
    return _stat(pid)[0]


def start_tick(pid: int) -> int:
    """Clock ticks from boot to the process's start (field 22): orders processes by age."""
    return int(_stat(pid)[19])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used so far (fields 14 and 15)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> tuple[float, float]:
    """``(busy, idle)`` CPU seconds of the whole machine since boot, all cores (``/proc/stat``; idle
    includes I/O wait): what no process listing shows, such as kernel threads and other jobs."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK"), idle / os.sysconf("SC_CLK_TCK")


def command_line(pid: int) -> bytes:
    """The raw ``argv``, NUL-separated."""
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def process_name(pid: int) -> str:
    """The process's name (``/proc/PID/comm``): the server names its own helpers
    (:func:`serve.processes.name_process`)."""
    return Path(f"/proc/{pid}/comm").read_text().strip()


def is_spawned_child(pid: int) -> bool:
    """Whether multiprocessing's *spawn* start method made the process (LitServe's inference workers,
    and the server's own named helpers: see :func:`process_name`)."""
    return b"spawn_main" in command_line(pid)


def _kib_fields(text: str) -> dict[str, int]:
    """``{name: kB}`` of the ``Name:   123 kB`` lines of a ``/proc`` file."""
    fields = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            fields[name] = int(value.split()[0])
    return fields


def _resident_kib_under(pid: int, directory: Path) -> int:
    """Resident kB of the process's mappings of files under ``directory``, from ``/proc/PID/smaps``."""
    root = str(directory.resolve())
    total, inside = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if _MAPPING.match(line):
            head = line.split()
            inside = len(head) >= 6 and head[5].startswith(root)
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def memory(pid: int, snapshot_dir: Path | None = None) -> dict[str, float] | None:
    """The memory of a live process in MiB; ``None`` once it is gone (or a zombie).

    ``rss`` (resident), ``anon`` (its anonymous part: the heap, where leaks show) and ``pss``
    (resident with each shared page split among its users: the forked Manager and API servers
    share the main process's copy-on-write pages, which RSS counts in full in each), all from
    ``/proc/PID/smaps_rollup``. With ``snapshot_dir`` also ``snapshot``, the resident pages of the
    files under it (shared by every process that maps them), and ``private``, ``rss - snapshot``
    (what each further worker adds).
    """
    try:
        totals = _kib_fields(Path(f"/proc/{pid}/smaps_rollup").read_text())
        if "Rss" not in totals:
            return None
        mib = {"rss": totals["Rss"] / 1024, "anon": totals["Anonymous"] / 1024, "pss": totals["Pss"] / 1024}
        if snapshot_dir is not None:
            mib["snapshot"] = _resident_kib_under(pid, snapshot_dir) / 1024
            mib["private"] = mib["rss"] - mib["snapshot"]
    except OSError:
        return None
    return mib
