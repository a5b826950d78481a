"""One ``python -m training.fit --task all`` run of ``python -m training.bench.seeds``, in its own process.

A fresh process per (dataset, seed): a crash, a leak or the peak memory of one run cannot touch
the next, and the operating system measures the child alone. CPU time and peak memory come from
``os.wait4`` on the child (its user + system time and its ``ru_maxrss``, which on Linux also
cover any processes the child itself waited for); the wall time is the parent's clock from
spawn to exit, so it includes the interpreter start, the CSV load and the snapshot build, as a
user's run does. The child's stdout and stderr go to a log file; the run's record holds the
test metrics of every task read back from the ``metrics.json`` files the child wrote.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.registry import TASKS
from models.runtime.bundle import CONFIG_FILE, METRICS_FILE, SNAPSHOT_DIR

RESERVED = ("--data", "--task", "--out", "--seed")
"""``training.fit`` options the benchmark sets itself; a user's ``--fit-args`` may not repeat them."""
TRAINING_KEYS = ("epochs_run", "best_epoch", "steps_run", "stopped_by_time_budget", "seconds",
                 "test_week_start", "calibration")
"""What a record keeps of each bundle's ``config.json`` ``training`` section."""


@dataclass(frozen=True)
class FitRun:
    """One run: ``training.fit --task all`` on ``data`` with ``seed``, artifacts in ``out``.

    Args:
        dataset: the label of the dataset in records and tables (the ``--data`` path as given).
        data: the CSV directory.
        seed: ``training.fit --seed``.
        out: the run's own artifacts directory; emptied before the run starts.
        log: file receiving the child's stdout and stderr.
        fit_args: further ``training.fit`` options, as given.
        task: ``training.fit --task`` (``all`` for every task).
    """

    dataset: str
    data: Path
    seed: int
    out: Path
    log: Path
    fit_args: tuple[str, ...] = ()
    task: str = "all"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "training.fit", "--data", str(self.data), "--task", self.task,
                "--out", str(self.out), "--seed", str(self.seed), *self.fit_args]

    def tasks(self) -> tuple[str, ...]:
        """The tasks the run trains."""
        return tuple(TASKS) if self.task == "all" else (self.task,)


def parse_with_fit_args(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[Any, tuple[str, ...]]:
    """``argv`` parsed by ``parser`` up to ``--``, and the ``training.fit`` options of every run:
    ``--fit-args`` (one shell-quoted string) then those after ``--``. Refuses a ``--data``
    directory given twice."""
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    try:
        fit_args = (*shlex.split(args.fit_args), *argv[split + 1:])
    except ValueError as exc:
        parser.error(f"--fit-args: {exc}")
    if len(set(map(os.path.abspath, args.data))) < len(args.data):
        parser.error("--data: the same directory is given twice")
    return args, fit_args


def reserved_option(fit_args: tuple[str, ...]) -> str | None:
    """The first of ``fit_args`` that names (or abbreviates, as argparse allows) an option in
    :data:`RESERVED` or asks for help; None when there is none."""
    for arg in fit_args:
        name = arg.split("=", 1)[0]
        if name in ("-h", "--help") or (len(name) > 3 and any(o.startswith(name) for o in RESERVED)):
            return arg
    return None


def run_fit(run: FitRun, keep_artifacts: bool = False, reuse_snapshot: bool = False) -> dict[str, Any]:
    """Run ``run`` to its end and return its record (``ok``, times, memory, test metrics per task).

    Artifacts are deleted afterwards unless ``keep_artifacts``; the log is kept. With
    ``reuse_snapshot`` a snapshot already in ``run.out`` is kept for the run (``training.fit`` checks
    it was built from the same files) and so is the new one after it; only the bundles go. On
    ``KeyboardInterrupt`` the child is terminated and reaped before the interrupt propagates.
    """
    clear(run.out, keep_snapshot=reuse_snapshot)  # a stale bundle must not be read as this run's
    run.out.mkdir(parents=True, exist_ok=True)
    run.log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with run.log.open("w") as log:
        child = subprocess.Popen(run.command(), stdout=log, stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(child.pid, 0)
        except KeyboardInterrupt:
            child.terminate()
            _, status, _ = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            raise
    wall = time.perf_counter() - started
    child.returncode = code = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    maxrss_kib = usage.ru_maxrss / (1024 if sys.platform == "darwin" else 1)  # bytes on macOS
    record: dict[str, Any] = {
        "dataset": run.dataset, "data": str(run.data), "seed": run.seed, "ok": code == 0, "returncode": code,
        "wall_s": round(wall, 3), "cpu_user_s": round(usage.ru_utime, 3),
        "cpu_sys_s": round(usage.ru_stime, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mib": round(maxrss_kib / 1024, 1),
        "command": run.command(), "log": str(run.log), "tasks": read_tasks(run.out)}
    missing = [task for task in run.tasks() if task not in record["tasks"]]
    if code == 0 and missing:
        record["ok"], record["error"] = False, f"exit 0 but no {METRICS_FILE} for {', '.join(missing)}"
    elif code != 0:
        record["error"] = last_error(run.log)
    if not keep_artifacts:
        clear(run.out, keep_snapshot=reuse_snapshot)
        with contextlib.suppress(OSError):  # the dataset's directory, once its last run is gone
            run.out.parent.rmdir()
            run.out.parent.parent.rmdir()
    return record


def clear(out: Path, keep_snapshot: bool = False) -> None:
    """Delete ``out`` (with ``keep_snapshot``: everything in it but the snapshot directory)."""
    if not keep_snapshot:
        shutil.rmtree(out, ignore_errors=True)
        return
    for path in out.iterdir() if out.is_dir() else ():
        if path.name != SNAPSHOT_DIR:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()


RECORD_KEYS = ("reliability_test", "target_std", "paired_test")
"""What a run's record keeps of ``metrics.json`` beside the test metrics, when the task has it."""


def read_tasks(out: Path) -> dict[str, dict[str, Any]]:
    """Per task with a ``metrics.json`` under ``out``: its primary metric, the test metrics of the
    model and every baseline, and a few facts of the training (epochs run, best epoch, steps)."""
    tasks = {}
    for task in TASKS:
        path = out / task / METRICS_FILE
        if not path.is_file():
            continue
        doc = json.loads(path.read_text())
        config = out / task / CONFIG_FILE
        training = json.loads(config.read_text()).get("training", {}) if config.is_file() else {}
        kept = {key: training[key] for key in TRAINING_KEYS if key in training}
        tasks[task] = {"primary": doc["primary"], "higher_is_better": doc["higher_is_better"],
                       "test": doc["test"], "training": kept,
                       **{key: doc[key] for key in RECORD_KEYS if key in doc}}
    return tasks


def last_error(log: Path, limit: int = 300) -> str:
    """The child's last line that says ``error`` (else its last line), shortened to ``limit``."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    errors = [line for line in lines if "error" in line.lower()]
    line = (errors or lines or ["(no output)"])[-1]
    return line if len(line) <= limit else line[:limit - 3] + "..."
