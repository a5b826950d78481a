"""serve.layout: the processes and threads python -m serve derives from the machine."""

from __future__ import annotations

import pytest

from serve.config import parse_args
from serve.layout import CUDA_WORKERS_PER_TASK, Layout, choose_layout, derive_layout, describe, machine_cores

CORES = (2, 4, 16, 64)


def numbers(layout: Layout) -> tuple[int, int, int]:
    return layout.workers_per_task, layout.api_servers, layout.threads


@pytest.mark.parametrize("tasks, expected", [(3, (1, 1, 1)), (2, (1, 1, 1)), (1, (1, 1, 2))])
def test_two_cores_keep_the_layout_measured_there(tasks, expected):
    # Before the derivation: one worker per task, one API server, threads = cores // workers.
    assert numbers(derive_layout(2, tasks, "cpu")) == expected
    assert numbers(derive_layout(2, tasks, "cuda")) == expected


@pytest.mark.parametrize("cores, tasks, expected", [
    (4, 3, (1, 1, 1)), (16, 3, (3, 7, 1)), (64, 3, (14, 22, 1)),
    (4, 1, (3, 1, 1)), (16, 1, (11, 5, 1)), (64, 1, (32, 32, 1)),
])
def test_cpu_layouts(cores, tasks, expected):
    assert numbers(derive_layout(cores, tasks, "cpu")) == expected


@pytest.mark.parametrize("tasks", [1, 2, 3])
def test_cpu_layout_uses_every_core_and_grows_with_them(tasks):
    previous = None
    for cores in CORES:
        layout = derive_layout(cores, tasks, "cpu")
        used = tasks * layout.workers_per_task * layout.threads + layout.api_servers
        if cores > 2:
            assert layout.threads == 1  # processes, not threads, above two cores
            assert used >= cores or layout.workers_per_task == 32 or layout.api_servers == 32
            assert used <= cores + tasks  # a worker per task even on fewer cores than tasks
        if previous is not None:
            assert layout.workers_per_task >= previous.workers_per_task
            assert layout.api_servers >= previous.api_servers
            processes = tasks * layout.workers_per_task + layout.api_servers
            before = tasks * previous.workers_per_task + previous.api_servers
            # On 2 cores three tasks already run four processes; from 4 cores on, more cores, more processes.
            assert processes > before or (cores == 4 and processes == before == 4)
        previous = layout


@pytest.mark.parametrize("cores", CORES)
def test_cuda_caps_workers_and_gives_the_rest_as_threads(cores):
    layout = derive_layout(cores, 3, "cuda")
    assert 1 <= layout.workers_per_task <= CUDA_WORKERS_PER_TASK
    assert 1 <= layout.threads <= 4
    used = 3 * layout.workers_per_task * layout.threads + layout.api_servers
    assert used <= max(cores, 4) and (cores == 2 or used == cores or layout.api_servers == 32)
    if cores >= 16:
        assert layout.workers_per_task == CUDA_WORKERS_PER_TASK
    if cores >= 64:
        assert layout.threads > 1


@pytest.mark.parametrize("cores, tasks, accelerator", [(0, 3, "cpu"), (4, 0, "cpu"), (4, 3, "auto")])
def test_refuses_what_has_no_layout(cores, tasks, accelerator):
    with pytest.raises(ValueError, match="no layout"):
        derive_layout(cores, tasks, accelerator)


def test_flags_override_and_the_rest_is_derived():
    assert numbers(choose_layout(16, 3, "cpu", workers_per_task=2)) == (2, 7, 1)
    assert numbers(choose_layout(16, 3, "cpu", api_servers=1, threads=4)) == (3, 1, 4)
    # Given workers share the cores anew: 1 task on 2 cores with 2 workers gets 1 thread each.
    assert numbers(choose_layout(2, 1, "cpu", workers_per_task=2)) == (2, 1, 1)


def test_start_up_line_says_the_layout_and_why():
    line = describe(derive_layout(16, 3, "cpu"), 16, 3, "cpu", {})
    assert line.startswith("16 cores (cpu): 3 tasks x 3 workers x 1 threads, 7 API servers; ")
    assert "a third of the cores" in line
    given = describe(choose_layout(16, 3, "cpu", api_servers=2), 16, 3, "cpu", {"--api-servers": "2"})
    assert "2 API servers" in given and "given: --api-servers 2" in given
    every = {"--workers-per-task": "1", "--api-servers": "1", "--threads": "1"}
    assert describe(choose_layout(16, 3, "cpu", 1, 1, 1), 16, 3, "cpu", every).endswith(
        "; as given: --workers-per-task 1, --api-servers 1, --threads 1")


def test_config_fills_in_the_automatic_values_only():
    automatic, line = parse_args(["--artifacts", "."]).with_layout(3, "cpu")
    assert None not in (automatic.workers_per_task, automatic.api_servers, automatic.threads)
    assert "API servers" in line
    flags = ["--artifacts", ".", "--workers-per-task", "2", "--threads", "1"]
    given, _ = parse_args(flags).with_layout(3, "cpu")
    assert (given.workers_per_task, given.threads) == (2, 1)


@pytest.mark.parametrize("files, quota", [
    ({"cpu.max": "max 100000\n"}, None), ({"cpu.max": "150000 100000\n"}, 2),
    ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None), ({}, None),
])
def test_cores_are_lowered_to_a_container_quota(tmp_path, files, quota):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    affinity = machine_cores(tmp_path / "absent")
    assert machine_cores(tmp_path) == (min(affinity, quota) if quota else affinity)
