"""The dataset ``training.fit`` reads: its spec (``--spec``, else the data directory's), its files'
signature (what a snapshot records about its source), and the tasks it can train.

A spec without a price or amount column is count-only data: every line counts 1.0, so churn and
purchase train as usual while sales, whose label sums the lines' values, is refused (``--task
sales``) or skipped with a warning (``--task all``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from training.data.common import DataError
from training.data.files import resolve_files
from training.data.spec import DatasetSpec
from training.data.spec_file import find_spec
from training.fit.config import FitError
from training.tasks.definitions import TASKS

# Label functions that sum the transactions' values: their tasks need a price or amount column.
AMOUNT_LABELS = frozenset({"training.tasks.definitions:sales_labels"})


def dataset_spec(data_dir: Path, spec_file: Path | None) -> DatasetSpec:
    """The spec of ``data_dir`` (``spec_file`` if given); :class:`FitError` with the spec's one-line error."""
    try:
        return find_spec(data_dir, spec_file)
    except DataError as exc:
        raise FitError(str(exc)) from None


def amount_problem(task: str, spec: DatasetSpec) -> str | None:
    """Why ``task`` cannot train on data of ``spec``, or ``None`` when it can."""
    if TASKS[task].labels in AMOUNT_LABELS and not spec.transactions.has_amount:
        return f"{task} needs an amount: the spec's [transactions] has no price or amount column"
    return None


def trainable_tasks(tasks: tuple[str, ...], spec: DatasetSpec, all_tasks: bool) -> tuple[tuple[str, ...],
                                                                                          list[str]]:
    """The tasks of ``tasks`` the data can train, and one line per task skipped.

    Args:
        tasks: the tasks asked for.
        spec: the dataset's spec.
        all_tasks: they are ``--task all``: a task the data cannot train is skipped, not refused.

    Raises:
        FitError: a task asked for by name cannot train on this data.
    """
    kept, skipped = [], []
    for task in tasks:
        problem = amount_problem(task, spec)
        if problem is None:
            kept.append(task)
        elif all_tasks:
            skipped.append(f"skipped {task} ({problem})")
        else:
            raise FitError(problem)
    if not kept:
        raise FitError("; ".join(skipped) or "no task to train")
    return tuple(kept), skipped


def source_signature(data_dir: Path, spec: DatasetSpec) -> dict[str, dict[str, int | str]]:
    """Per input file (and the spec file, if any), its size and sha256.

    Files are keyed by the spec's name for them (``customers.csv`` even when ``customers.csv.gz``
    was read), and by their path under ``data_dir`` where a glob matches several (a zip's member
    by the archive's path and its name in it).

    Raises:
        FitError: a file of the spec is missing.
    """
    signature: dict[str, dict[str, int | str]] = {}
    patterns = [n.file for n in (spec.customers, spec.articles) if n.file is not None]
    for pattern in [*patterns, spec.transactions.file, *(j.file for j in spec.transactions.join)]:
        try:
            files = resolve_files(data_dir, pattern)
        except DataError:
            raise FitError(f"--data {data_dir}: {pattern} not found") from None
        for file in files:
            key = pattern if len(files) == 1 else file.relative_to(data_dir)
            signature[key] = {"bytes": file.path.stat().st_size, "sha256": _sha256(file.path)}
    if spec.path is not None:
        signature["spec"] = {"file": spec.path.name, "sha256": _sha256(spec.path)}
    return signature


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()
