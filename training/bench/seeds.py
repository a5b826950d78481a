"""``python -m training.bench.seeds``: the model against every baseline over several seeds and datasets.

``python -m training.bench.seeds --data data/demo --data data/real/online-retail-ii [--seeds 3]
[--out out/seeds] [--fit-args "--epochs 1"] [-- MORE TRAINING.FIT OPTIONS]``

For every dataset and seed (``0 .. N-1`` by default) runs ``python -m training.fit --task all``
in a fresh process (:mod:`training.bench.seed_runs`), prints one line per finished run, keeps
every run's record in ``OUT/seeds.json`` (rewritten after each run, so an interrupted benchmark
keeps what finished) and ends with a table per dataset: per task, mean ± std over seeds of the
model and every baseline on the test week, and the model's margin over each baseline with its
spread over seeds (:mod:`training.bench.seed_stats`). Exit code 1 if a run failed, 2 on bad
arguments. Pass ``--threads`` through for runs that repeat exactly (docs/reproducibility.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from models.cli import OneLineErrors
from models.registry import TASKS
from training.bench.seed_runs import FitRun, parse_with_fit_args, reserved_option, run_fit
from training.bench.seed_stats import LIGHTGBM, MODEL, costs, report, summarize
from training.data.common import DataError
from training.data.files import resolve_files
from training.data.spec_file import find_spec

PROG = "python -m training.bench.seeds"
RESULTS_FILE = "seeds.json"


def parse_args(argv: list[str]) -> tuple[Any, tuple[str, ...]]:
    """The parsed options and the ``training.fit`` options (``--fit-args`` then those after ``--``)."""
    parser = OneLineErrors(prog=PROG, description="The model against every baseline over several seeds and "
                           "datasets: training.fit --task all per dataset and seed, each in its own process.",
                           epilog="Options after -- go to every training.fit run: -- --epochs 1 --threads 2.")
    parser.add_argument("--data", type=Path, action="append", required=True,
                        help="CSV directory of a dataset (repeat for several)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per dataset (default: 3)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default: 0)")
    parser.add_argument("--out", type=Path, default=Path("out/seeds"),
                        help=f"where {RESULTS_FILE}, the logs and the runs' artifacts go "
                             "(default: out/seeds)")
    parser.add_argument("--fit-args", default="", metavar="ARGS",
                        help='further training.fit options in one string: --fit-args "--epochs 1 '
                             '--threads 2", --fit-args=--quiet; or put them after --')
    parser.add_argument("--synth", action="store_true",
                        help="create a missing --data directory as the demo data (python -m training.synth)")
    parser.add_argument("--keep-artifacts", action="store_true",
                        help="keep each run's snapshot and bundles (default: only the logs and the JSON)")
    args, fit_args = parse_with_fit_args(parser, argv)
    if args.seeds < 1 or not 0 <= args.first_seed < 2**32 - args.seeds:
        parser.error(f"--seeds must be at least 1 and the seeds within 0..{2**32 - 1}")
    reserved = reserved_option(fit_args)
    if reserved is not None:
        parser.error(f"training.fit option {reserved}: the benchmark sets --data, --task, --out and --seed")
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


def check_data(data: Path, synth: bool) -> str | None:
    """Why ``data`` cannot be trained on, or None; with ``synth`` a missing directory is created as
    the demo data first."""
    if synth and not (data.is_dir() and any(data.iterdir())):
        print(f"{data}: no data, generating the demo data (python -m training.synth --out {data})",
              flush=True)
        done = subprocess.run([sys.executable, "-m", "training.synth", "--out", str(data), "--quiet"],
                              check=False)
        if done.returncode != 0:
            return f"--data {data}: python -m training.synth failed (exit {done.returncode})"
    if not data.is_dir():
        return (f"--data {data}: no such directory (make the demo data with "
                f"`python -m training.synth --out {data}`, or pass --synth)")
    try:  # the spec's first file (DATA/relserve.toml's, else customers.csv of the H&M layout)
        spec = find_spec(data)
        resolve_files(data, spec.customers.file or spec.transactions.file)
    except DataError as exc:
        return f"--data {data}: {exc}"
    return None


def check_fit_args(fit_args: tuple[str, ...]) -> str | None:
    """``training.fit``'s own complaint about ``fit_args``, or None: checked here, before any run,
    so a typo fails in a second instead of after the first dataset's load."""
    from training.fit.config import parse_args as fit_parse  # imports torch: only once the rest is valid

    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            fit_parse(["--data", tmp, "--task", "all", "--out", tmp, *fit_args])
        except SystemExit:
            message = (err.getvalue().strip().splitlines() or ["invalid"])[-1]
            return "training.fit options: " + message.split("error: ", 1)[-1]
    return None


def run_names(datasets: list[Path]) -> list[str]:
    """A distinct directory name per dataset (its last path part, numbered when two share one)."""
    names: list[str] = []
    for data in datasets:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", data.resolve().name) or "data"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def progress_line(index: int, total: int, record: dict[str, Any]) -> str:
    """The one line printed when a run ends."""
    head = f"[{index}/{total}] {record['dataset']} seed {record['seed']}:"
    cost = (f"{record['wall_s']:.1f} s wall, {record['cpu_s']:.1f} s CPU, "
            f"peak {record['peak_rss_mib']:.0f} MiB")
    if not record["ok"]:
        return (f"{head} FAILED (exit {record['returncode']}) after {cost}: {record.get('error')}; "
                f"log {record['log']}")
    parts = []
    for task, doc in record["tasks"].items():
        metric, test = doc["primary"], doc["test"]
        gbdt = test["baselines"].get(LIGHTGBM, {}).get(metric)
        parts.append(f"{task} {metric} {test[MODEL][metric]:.4f}"
                     + (f" (lightgbm {gbdt:.4f})" if gbdt is not None else ""))
    return f"{head} {cost}; {', '.join(parts)}"


def write_results(path: Path, header: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """``path``: the header, every run's record and the summary so far (replaced atomically)."""
    summary = {}
    for dataset, tasks in summarize(runs).items():
        cost = costs([run for run in runs if run["dataset"] == dataset])
        summary[dataset] = {"tasks": {task: s.as_json() for task, s in tasks.items()},
                            "per_run": {name: s.as_json() for name, s in cost.items()}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**header, "runs": runs, "summary": summary}, indent=2) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    args, fit_args = parse_args(sys.argv[1:] if argv is None else argv)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    plan = [FitRun(str(data), data, seed, args.out / "runs" / name / f"seed{seed}",
                   args.out / "logs" / f"{name}-seed{seed}.log", fit_args)
            for data, name in zip(args.data, run_names(args.data), strict=True) for seed in seeds]
    args.out.mkdir(parents=True, exist_ok=True)
    header = {"benchmark": PROG, "tasks": list(TASKS), "seeds": seeds,
              "datasets": [str(data) for data in args.data],
              "fit_args": list(fit_args), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "host": {"cpus": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)),
                       "python": platform.python_version(), "platform": platform.platform()}}
    datasets = f"{len(args.data)} dataset{'s' if len(args.data) > 1 else ''}"
    print(f"{len(plan)} runs of training.fit --task all ({datasets} x seeds "
          f"{', '.join(map(str, seeds))}){' with ' + shlex.join(fit_args) if fit_args else ''}; "
          f"logs in {args.out / 'logs'}", flush=True)
    runs: list[dict[str, Any]] = []
    try:
        for index, run in enumerate(plan, 1):
            runs.append(run_fit(run, args.keep_artifacts))
            write_results(args.out / RESULTS_FILE, header, runs)
            print(progress_line(index, len(plan), runs[-1]), flush=True)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; the {len(runs)} finished runs are in {args.out / RESULTS_FILE}",
              file=sys.stderr)
        return 130
    print(f"\n{report(runs)}\n\nevery run: {args.out / RESULTS_FILE}")
    return 0 if all(run["ok"] for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
