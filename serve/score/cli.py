"""``python -m serve.score``: every entity's prediction for the snapshot's next week, written to files.

The offline twin of ``python -m serve``: the same bundles, the same :class:`TaskInference` path
and seed time (the snapshot's end), so each row equals the server's answer for that id. Churn
and sales are one row per customer / article; purchase is the Kaggle H&M submission
(``customer_id,prediction``, 12 article ids per customer, every customer of ``customers.csv``,
those without purchases too). Batches are large and compiled into a short bucket ladder fitted
to the batch size, whose compile cache is kept with the bundle like the server's.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from models.cli import CliError, OneLineErrors, add_threads_option
from models.registry import TASK_NAMES
from serve.config import COMPILE_STRATEGIES, available_cores
from serve.score import FORMATS

PROG = "python -m serve.score"
MAX_BATCH = 8192


class ScoreError(CliError):
    """Cannot score; the message is the one line shown, ``exit_code`` the status."""


@dataclass
class ScoreConfig:
    """What ``python -m serve.score`` does.

    Args:
        artifacts: bundles and ``snapshot/`` from ``python -m training.fit``.
        out: the file for one task; for ``all``, the directory of ``<task>.<format>`` files.
        task: a task name or ``all`` (every task with a bundle in ``artifacts``).
        fmt: ``csv`` or ``parquet``.
        batch_size: entities per compiled forward.
        compile: ``buckets`` (a ladder fitted to ``batch_size``), ``dynamic`` or ``none`` (eager).
        threads: torch threads (``None``: every core this process may use).
        compile_cache_dir: as ``python -m serve --compile-cache-dir``.
        device: ``cpu`` or ``cuda``.
        progress: tqdm bars on stderr.
    """

    artifacts: Path
    out: Path
    task: str = "all"
    fmt: str = "csv"
    batch_size: int = 1024
    compile: str = "buckets"
    threads: int | None = None
    compile_cache_dir: Path | None = None
    device: str = "cpu"
    progress: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= MAX_BATCH:
            raise ValueError(f"--batch-size must be in 1..{MAX_BATCH}, got {self.batch_size}")
        if self.threads is not None and not 1 <= self.threads <= available_cores():
            raise ValueError(f"--threads must be in 1..{available_cores()} (the cores this process may use)")
        if self.task == "all" and self.out.exists() and not self.out.is_dir():
            raise ValueError(f"--out {self.out} is a file; --task all writes a directory of files")
        if self.task != "all" and not self.out.is_dir() and not self.out.parent.is_dir():
            raise ValueError(f"--out {self.out}: directory {self.out.parent} does not exist")

    def path_for(self, task: str) -> Path:
        """Where ``task``'s predictions go."""
        if self.task == "all" or self.out.is_dir():
            return self.out / f"{task}.{self.fmt}"
        return self.out


def parse_args(argv: list[str] | None = None) -> ScoreConfig:
    """A :class:`ScoreConfig` from ``argv``; exits 2 with one line on a bad argument (before torch)."""
    d = ScoreConfig(Path("."), Path("."))
    p = OneLineErrors(prog=PROG, description="Write every entity's prediction for the week after the "
                                             "snapshot: churn and sales per entity, purchase as a Kaggle "
                                             "H&M submission.")
    p.add_argument("--artifacts", type=Path, required=True, help="bundles from python -m training.fit")
    p.add_argument("--out", type=Path, required=True,
                   help="output file (one task) or directory (--task all: <task>.<format> in it)")
    p.add_argument("--task", default=d.task, choices=(*TASK_NAMES, "all"))
    p.add_argument("--format", default=d.fmt, choices=FORMATS)
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="entities per forward")
    p.add_argument("--compile", default=d.compile, choices=COMPILE_STRATEGIES)
    add_threads_option(p, "every core this process may use")
    p.add_argument("--compile-cache-dir", type=Path, default=None, metavar="DIR",
                   help="compile caches (default: beside each bundle if writable)")
    p.add_argument("--device", default=d.device, choices=("cpu", "cuda"))
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    a = p.parse_args(argv)
    if not a.artifacts.is_dir():
        p.error(f"--artifacts {a.artifacts} is not a directory (write one with python -m training.fit)")
    try:
        return ScoreConfig(artifacts=a.artifacts, out=a.out, task=a.task, fmt=a.format,
                           batch_size=a.batch_size, compile=a.compile, threads=a.threads,
                           compile_cache_dir=a.compile_cache_dir, device=a.device, progress=not a.quiet)
    except ValueError as e:
        p.error(str(e))
        raise  # unreachable: error() exits


def run(config: ScoreConfig) -> None:
    """Check the bundles, then score each task into its file (raises :class:`ScoreError`)."""
    import torch

    from models.runtime.inference import TaskInference
    from models.store.snapshot import GraphSnapshot
    from serve.score.run import score_to_file
    from serve.versions.bundles import ArtifactsError, check_bundles, find_bundles

    try:
        bundles = find_bundles(config.artifacts, None if config.task == "all" else (config.task,))
    except ArtifactsError as e:
        raise ScoreError(str(e), 2) from e
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ScoreError(f"--device cuda needs a CUDA device, and torch {torch.__version__} sees none", 2)
    try:
        check_bundles(bundles)
    except ArtifactsError as e:
        raise ScoreError(str(e)) from e
    torch.set_num_threads(config.threads or available_cores())
    if config.task == "all":
        config.out.mkdir(parents=True, exist_ok=True)
    snapshot = GraphSnapshot.open(bundles[0].snapshot_dir)
    for bundle in bundles:
        inference = TaskInference.from_bundle(
            bundle.bundle_dir, snapshot, compile=config.compile, device=config.device,
            max_batch_size=config.batch_size, cache_dir=config.compile_cache_dir,
            batch_sizes=(config.batch_size,))
        warm = inference.warm_up()
        say(config, f"{bundle.task}: warmed up in {warm.seconds:.1f} s ({warm.buckets} buckets, compile "
                    f"cache {'hit' if warm.cache_hit else 'miss'})")
        path = config.path_for(bundle.task)
        try:
            report = score_to_file(inference, path, config.fmt, config.batch_size, config.progress)
        except OSError as e:
            raise ScoreError(f"cannot write {path}: {e.strerror or e}") from e
        except ValueError as e:  # pyarrow.ArrowInvalid: an id that CSV cannot hold unquoted
            raise ScoreError(f"cannot write {path}: {e}") from e
        say(config, f"{bundle.task}: wrote {report.rows:,} rows to {path} in {report.seconds:.1f} s "
                    f"({report.rows_per_second:,.0f}/s, padding {report.padding_ratio:.0%})")


def say(config: ScoreConfig, message: str) -> None:
    if config.progress:
        print(f"{PROG}: {message}", file=sys.stderr, flush=True)


class Terminated(Exception):
    """SIGTERM, raised in the main thread so the file being written is removed on the way out."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the process exit code."""
    config = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        run(config)
    except ScoreError as e:
        return e.report(PROG)
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted (no partial file was left)", file=sys.stderr)
        return 130
    except Terminated:
        print(f"{PROG}: error: terminated (no partial file was left)", file=sys.stderr)
        return 143
    return 0


if __name__ == "__main__":
    sys.exit(main())
