"""``python -m training.bench.backtest``: the defaults scored on several consecutive test weeks.

``python -m training.bench.backtest --data data/real/online-retail-2010 [--weeks 8] [--tasks churn,sales]
[--seed 0] [--out out/backtest] [--fit-args "--epochs 5"] [-- MORE TRAINING.FIT OPTIONS]``

A rolling-origin backtest: for each of the last ``--weeks`` full weeks of a dataset (newest first),
``python -m training.fit --test-weeks-back W`` trains on every week before that week's validation
week, keeps the epoch with the best validation score and scores the test week next to every
baseline (LightGBM and the rules are refitted for each week the same way). Fewer weeks are run when
the data is too short for one (at least ``--min-train-weeks`` training cutoffs before the validation
week). Each run is a fresh process (:mod:`training.bench.seed_runs`), ``--jobs`` weeks at a time;
the runs of a dataset share one graph snapshot (hard links), built first. Prints one line per run
with an estimate of what is left,
keeps every run's record in ``OUT/backtest.json`` (rewritten after each run) and ends with a table
per task (:mod:`training.bench.backtest_stats`): every week's score, the mean ± std over weeks, the
weeks the model won against each baseline and, for churn, the ECE and Brier score of all test weeks
pooled. It costs ``--weeks`` trainings: a cheaper training budget goes through ``--fit-args`` (e.g.
``--max-steps-per-epoch 60 --epochs 6``). Exit code 1 if a run failed, 2 on bad arguments.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from models.cli import OneLineErrors
from models.registry import TASKS
from models.runtime.bundle import SNAPSHOT_DIR
from training.bench.backtest_stats import report, summarize
from training.bench.seed_runs import FitRun, parse_with_fit_args, reserved_option, run_fit
from training.bench.seeds import check_data, check_fit_args, progress_line, run_names
from training.tasks.cutoffs import split_cutoffs

PROG = "python -m training.bench.backtest"
RESULTS_FILE = "backtest.json"
SHIFT_OPTION = "--test-weeks-back"


def parse_args(argv: list[str]) -> tuple[Any, tuple[str, ...]]:
    """The parsed options and the ``training.fit`` options (``--fit-args`` then those after ``--``)."""
    parser = OneLineErrors(prog=PROG, description="The defaults on several consecutive test weeks (a "
                           "rolling-origin backtest): one training.fit per week, each in its own process.",
                           epilog="Options after -- go to every training.fit run: -- --epochs 5 --threads 2.")
    parser.add_argument("--data", type=Path, action="append", required=True,
                        help="CSV directory of a dataset (repeat for several)")
    parser.add_argument("--weeks", type=int, default=8, help="test weeks, the last full week and the ones "
                        "before it (default: 8; fewer when the data is short)")
    parser.add_argument("--tasks", default="all", help=f"comma-separated tasks of {', '.join(TASKS)} "
                        "(default: all, one training.fit --task all per week)")
    parser.add_argument("--min-train-weeks", type=int, default=4,
                        help="skip the weeks with fewer weekly training cutoffs before them (default: 4)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="weeks trained at the same time, each in its own process (default: 1; with "
                             "-- --threads 1, as many as cores)")
    parser.add_argument("--seed", type=int, default=0, help="training.fit --seed (default: 0)")
    parser.add_argument("--out", type=Path, default=Path("out/backtest"),
                        help=f"where {RESULTS_FILE}, the logs and the runs' artifacts go "
                             "(default: out/backtest)")
    parser.add_argument("--fit-args", default="", metavar="ARGS",
                        help='further training.fit options in one string: --fit-args "--epochs 5"')
    parser.add_argument("--synth", action="store_true",
                        help="create a missing --data directory as the demo data (python -m training.synth)")
    parser.add_argument("--keep-artifacts", action="store_true",
                        help="keep the snapshot and the last week's bundles (default: only the logs "
                             "and the JSON)")
    args, fit_args = parse_with_fit_args(parser, argv)
    args.task_list = tuple(TASKS) if args.tasks == "all" else tuple(t.strip() for t in args.tasks.split(","))
    unknown = [t for t in args.task_list if t not in TASKS]
    if unknown or not args.task_list:
        parser.error(f"--tasks: unknown task {', '.join(unknown) or '(none)'}; use {', '.join(TASKS)} or all")
    if min(args.weeks, args.min_train_weeks, args.jobs) < 1 or not 0 <= args.seed < 2**32:
        parser.error("--weeks, --min-train-weeks and --jobs must be at least 1, --seed within 0..2**32-1")
    reserved = reserved_option(fit_args)
    if reserved is None and any(a.split("=", 1)[0] == SHIFT_OPTION for a in fit_args):
        reserved = SHIFT_OPTION
    if reserved is not None:
        parser.error(f"training.fit option {reserved}: the backtest sets --data, --task, --out, --seed "
                     f"and {SHIFT_OPTION}")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: exists and is not a directory")
    for data in args.data:
        problem = check_data(data, args.synth)
        if problem:
            parser.error(problem)
    problem = check_fit_args(fit_args)
    if problem:
        parser.error(problem)
    return args, fit_args


def weeks_available(snapshot: Path, weeks: int, min_train_weeks: int) -> int:
    """How many of the last ``weeks`` test weeks of the snapshot's data have at least
    ``min_train_weeks`` training cutoffs before their validation week."""
    from models.store.snapshot_files import META_FILE  # imports torch: only once the arguments are valid

    meta = json.loads((snapshot / META_FILE).read_text())
    count = 0
    for back in range(weeks):
        try:
            train = split_cutoffs(int(meta["min_day"]), int(meta["max_day"]), weeks_back=back)["train"]
        except ValueError:
            break
        if len(train) < min_train_weeks:
            break
        count += 1
    return count


def shared_snapshot(data: Path, base: Path) -> Path | str:
    """``base/snapshot``, built from ``data`` once for every week (as ``training.fit`` builds it),
    or why it cannot be."""
    from training.fit.config import FitError  # imports torch: only once the arguments are valid
    from training.fit.data import prepare_snapshot

    try:
        prepare_snapshot(data, base, progress=False)
    except FitError as exc:
        return str(exc)
    return base / SNAPSHOT_DIR


def week_runs(args: Any, fit_args: tuple[str, ...], data: Path, name: str, back: int) -> list[FitRun]:
    """The ``training.fit`` runs of one test week (one ``--task all``, or one per task of ``--tasks``),
    in ``runs/<name>/back<W>/`` beside a hard-linked copy of the shared snapshot."""
    base = args.out / "runs" / name
    out = base / f"back{back}"
    if not (out / SNAPSHOT_DIR).exists():
        shutil.copytree(base / SNAPSHOT_DIR, out / SNAPSHOT_DIR, copy_function=os.link)
    shifted = (*fit_args, SHIFT_OPTION, str(back))
    tasks = ("all",) if set(args.task_list) == set(TASKS) else args.task_list
    return [FitRun(str(data), data, args.seed, out, args.out / "logs" / f"{name}-back{back}-{task}.log",
                   shifted, task) for task in tasks]


def run_week(runs: list[FitRun], back: int) -> list[dict[str, Any]]:
    """Run one week's runs one after the other; their records, tagged with ``weeks_back``."""
    return [{**run_fit(run, keep_artifacts=True, reuse_snapshot=True), "weeks_back": back, "task": run.task}
            for run in runs]


def write_results(path: Path, header: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """``path``: the header, every run's record and the summary so far (replaced atomically)."""
    summary = {dataset: {task: s.as_json() for task, s in tasks.items()}
               for dataset, tasks in summarize(runs, primaries()).items()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**header, "runs": runs, "summary": summary}, indent=2) + "\n")
    tmp.replace(path)


def primaries() -> dict[str, tuple[str, bool]]:
    return {name: (spec.primary_metric, spec.higher_is_better) for name, spec in TASKS.items()}


def main(argv: list[str] | None = None) -> int:
    args, fit_args = parse_args(sys.argv[1:] if argv is None else argv)
    args.out.mkdir(parents=True, exist_ok=True)
    header = {"benchmark": PROG, "tasks": list(args.task_list), "weeks": args.weeks, "seed": args.seed,
              "datasets": [str(data) for data in args.data], "fit_args": list(fit_args),
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "host": {"cpus": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)),
                       "python": platform.python_version(), "platform": platform.platform()}}
    print(f"{PROG}: up to {args.weeks} test weeks x {len(args.data)} dataset(s), tasks "
          f"{', '.join(args.task_list)}{' with ' + shlex.join(fit_args) if fit_args else ''}; "
          f"logs in {args.out / 'logs'}", flush=True)
    runs: list[dict[str, Any]] = []
    try:
        for data, name in zip(args.data, run_names(args.data), strict=True):
            runs += backtest_dataset(args, fit_args, data, name, header, runs)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the finished runs are in {args.out / RESULTS_FILE}", file=sys.stderr)
        return 130
    table = report(runs, {task: primaries()[task] for task in args.task_list})
    print(f"\n{table}\n\nevery run: {args.out / RESULTS_FILE}")
    return 0 if runs and all(run["ok"] for run in runs) else 1


def backtest_dataset(args: Any, fit_args: tuple[str, ...], data: Path, name: str, header: dict[str, Any],
                     earlier: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every week's runs of one dataset, ``--jobs`` weeks at a time; returns their records
    (``earlier``: the other datasets' records, rewritten with these to the results file after each week)."""
    started = time.perf_counter()
    snapshot = shared_snapshot(data, args.out / "runs" / name)
    if isinstance(snapshot, str):
        print(f"{data}: cannot build its snapshot ({snapshot}); skipped", flush=True)
        return [{"dataset": str(data), "data": str(data), "ok": False, "weeks_back": 0, "task": "all",
                 "error": snapshot, "tasks": {}}]
    weeks = weeks_available(snapshot, args.weeks, args.min_train_weeks)
    if weeks < args.weeks:
        print(f"{data}: {weeks} test weeks have at least {args.min_train_weeks} training weeks before "
              f"them; running {weeks}", flush=True)
    runs: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max(1, min(args.jobs, weeks))) as pool:
        pending = [pool.submit(run_week, week_runs(args, fit_args, data, name, back), back)
                   for back in range(weeks)]
        for done, future in enumerate(as_completed(pending), 1):
            records = future.result()
            runs = sorted([*runs, *records], key=lambda run: run["weeks_back"])  # newest week first
            write_results(args.out / RESULTS_FILE, header, [*earlier, *runs])
            for record in records:
                week = next((doc["training"].get("test_week_start") for doc in record["tasks"].values()), "?")
                line = progress_line(done, weeks, record)
                print(line.replace(f" seed {args.seed}:", f" test week {week} ({record['weeks_back']} back), "
                                   f"{record['task']}:"), flush=True)
            elapsed = time.perf_counter() - started
            print(f"  {data}: {elapsed / 60:.1f} min so far, ~{elapsed / done * (weeks - done) / 60:.1f} min "
                  "left", flush=True)
    if not args.keep_artifacts:
        shutil.rmtree(args.out / "runs" / name, ignore_errors=True)
        with contextlib.suppress(OSError):  # once the last dataset's snapshot is gone
            (args.out / "runs").rmdir()
    return runs

if __name__ == "__main__":
    sys.exit(main())
