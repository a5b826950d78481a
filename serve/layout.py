"""How many processes and threads ``python -m serve`` starts on the machine it runs on.

Every request passes through two kinds of process, and both are worth cores: an **API server**
(uvicorn, FastAPI's body validation, LitServe's queueing and answer hand-back; a fixed cost per
request, whatever the model) and the task's **inference worker** (sampling, gathering and the forward
of a batch, then encoding its answers). Under the mixed traffic at 32 clients the API servers take
about a third of the server's CPU and the workers most of the rest (``serve.bench --ceiling``,
"CPU per request by role"), so beyond two cores the cores are shared out in that proportion: a third
to API servers, the rest to workers. Workers scale as processes with one torch thread each: the
compiled kernels run on one OpenMP thread anyway (docs/decisions.md, "The compiled training step"),
sampling is Python under one GIL per process, and two threads of one worker on busy cores wait on
each other at every parallel op. Each worker costs about 0.45-0.55 GiB of private memory (the
snapshot is memory-mapped and shared; BENCHMARKS.md, "Full size: serving").

On CUDA the forwards of all workers queue on the one GPU and each worker holds a CUDA context, so a
task gets at most :data:`CUDA_WORKERS_PER_TASK` workers (one samples and gathers on the CPU while the
other's forward runs), the cores they leave become torch threads, up to :data:`CUDA_THREADS`, and
what is left after that more API servers.

Two cores (the machine the defaults were tuned on) keep the layout measured there: one worker per
task and one API server, the cores shared out as torch threads.

:func:`derive_layout` is a pure function of (cores, tasks, accelerator); :func:`machine_cores` reads
the cores this process may use (its CPU affinity, and a container's CPU quota).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

API_SHARE = 1 / 3  # of the cores, for API servers (measured split; module docstring)
MAX_PROCESSES = 32  # per task (workers) or in all (API servers); more only thrashes one machine
CUDA_WORKERS_PER_TASK = 2
CUDA_THREADS = 4
TUNED_CORES = 2


@dataclass(frozen=True)
class Layout:
    """Processes and threads of one server.

    Args:
        workers_per_task: inference worker processes per task.
        api_servers: uvicorn processes answering HTTP.
        threads: torch threads per worker.
        why: one sentence saying where the numbers come from.
    """

    workers_per_task: int
    api_servers: int
    threads: int
    why: str


def _clamp(value: int, high: int = MAX_PROCESSES) -> int:
    return max(1, min(high, value))


def derive_layout(cores: int, tasks: int, accelerator: str) -> Layout:
    """The automatic layout for ``tasks`` served on ``cores`` cores (see the module docstring).

    Args:
        cores: cores the server may use (>= 1).
        tasks: tasks served (>= 1), each with its own workers.
        accelerator: ``cpu`` or ``cuda`` (resolved, never ``auto``).
    """
    if cores < 1 or tasks < 1 or accelerator not in ("cpu", "cuda"):
        raise ValueError(f"no layout for {cores} cores, {tasks} tasks on {accelerator!r}")
    if cores <= TUNED_CORES:
        return Layout(1, 1, max(1, cores // tasks),
                      "one worker per task and one API server, the cores shared out as torch threads "
                      "(the layout measured on 2 cores)")
    api = _clamp(round(cores * API_SHARE))
    worker_cores = max(1, cores - api)
    if accelerator == "cuda":
        workers = _clamp(worker_cores // tasks, CUDA_WORKERS_PER_TASK)
        threads = max(1, min(CUDA_THREADS, worker_cores // (tasks * workers)))
        api = _clamp(max(api, cores - tasks * workers * threads))
        return Layout(workers, api, threads,
                      f"a third of the cores to API servers; at most {CUDA_WORKERS_PER_TASK} workers per "
                      "task share the GPU, the cores left to them become torch threads")
    workers = _clamp(worker_cores // tasks)
    api = _clamp(max(api, cores - tasks * workers))  # cores no whole worker per task can use
    return Layout(workers, api, 1,
                  "a third of the cores to API servers, the rest to one-thread workers "
                  "(processes scale, threads of one small forward do not)")


def choose_layout(cores: int, tasks: int, accelerator: str, workers_per_task: int | None = None,
                  api_servers: int | None = None, threads: int | None = None) -> Layout:
    """The layout in use: each value given (a flag) as given, the others derived.

    Args:
        cores, tasks, accelerator: as for :func:`derive_layout`.
        workers_per_task, api_servers, threads: ``--workers-per-task``, ``--api-servers``,
            ``--threads``; ``None``: automatic.
    """
    auto = derive_layout(cores, tasks, accelerator)
    workers = workers_per_task or auto.workers_per_task
    # Given workers share the cores out anew: never more threads than the cores per worker.
    threads = threads or max(1, min(auto.threads, cores // (tasks * workers)))
    return Layout(workers, api_servers or auto.api_servers, threads, auto.why)


def _own_cgroup() -> str:
    """This process's cgroup v2 path (``0::/system.slice/x.service`` -> ``system.slice/x.service``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return ""
    return next((line[3:].strip("/") for line in lines if line.startswith("0::")), "")


def _quota_cores(cgroup_root: Path) -> int | None:
    """Cores a CPU quota allows (cgroup v2 ``cpu.max`` of this process's cgroup or the root, else v1
    ``cpu.cfs_quota_us``); ``None``: no quota."""
    for directory in dict.fromkeys((cgroup_root / _own_cgroup(), cgroup_root)):
        try:
            quota, period = (directory / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
        except (OSError, ValueError):
            continue
    try:
        quota = int((cgroup_root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup_root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else max(1, math.ceil(quota / period))


def machine_cores(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """Cores this process may use: its CPU affinity, lowered to a container's CPU quota if it has one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    quota = _quota_cores(cgroup_root)
    return min(cores, quota) if quota else cores


def describe(layout: Layout, cores: int, tasks: int, accelerator: str, chosen: dict[str, str]) -> str:
    """One line for start-up: the layout, and why (derived, or which flags chose it).

    Args:
        layout: the layout in use.
        cores, tasks, accelerator: what it was derived for.
        chosen: ``{flag: value}`` of the layout flags given on the command line.
    """
    task_word = "task" if tasks == 1 else "tasks"
    head = (f"{cores} cores ({accelerator}): {tasks} {task_word} x {layout.workers_per_task} workers x "
            f"{layout.threads} threads, {layout.api_servers} API servers")
    given = ", ".join(f"{flag} {value}" for flag, value in chosen.items())
    if len(chosen) == 3:
        return f"{head}; as given: {given}"
    return f"{head}; {layout.why}{'; given: ' + given if given else ''}"
