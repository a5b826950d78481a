"""Score every entity of a task in batches and stream the rows into one file, written atomically.

Memory stays bounded by one batch: each batch's predictions become a :class:`pyarrow.Table`
chunk that is written (CSV or Parquet row group) and dropped before the next batch runs. The
file appears under its name only once complete (:func:`models.files.atomic_open`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import torch

from models.files import atomic_open
from models.progress import progress_bar
from models.registry import TASKS
from models.runtime.inference import InferenceResult, TaskInference
from serve.config import available_cores
from serve.score import FORMATS
from serve.score.tables import TableBuilder


@dataclass
class ScoreReport:
    """What :func:`score_to_file` did.

    Args:
        task: the task scored.
        path: the file written.
        rows: entities scored (one row each).
        seconds: wall seconds of scoring and writing (warm-up excluded).
        padding_ratio: mean share of padding rows in the compiled buckets (0 when eager).
    """

    task: str
    path: Path
    rows: int
    seconds: float
    padding_ratio: float = 0.0

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def prepare_threads_for(device: torch.device | str) -> int:
    """Threads sampling ahead of the model: one on CPU (the forward uses every core), and on CUDA
    enough to keep the GPU fed (sampling and gathering are the whole cost there; torch ops release
    the GIL), leaving a core for the thread that launches the forward."""
    if torch.device(device).type != "cuda":
        return 1
    return max(1, min(8, available_cores() - 1))


def batches(inference: TaskInference, batch_size: int, limit: int | None = None,
            prepare_threads: int = 1) -> Iterator[tuple[torch.Tensor, InferenceResult]]:
    """``(entity, result)`` for consecutive ``(batch_size,)`` slices of every entity index (or the
    first ``limit``), in order (the last slice may be shorter); the seed time is the snapshot's end,
    as the server's.

    The next ``prepare_threads`` batches are sampled in other threads while the model runs this
    one: sampling is torch ops that release the GIL, so the stages overlap. The first batch runs
    alone: it builds the snapshot's lazy caches.
    """
    total = inference.snapshot.num_nodes[inference.entity_type]
    total = total if limit is None else min(total, limit)
    k = TASKS[inference.task].k
    starts = range(0, total, batch_size)
    slices = [torch.arange(s, min(total, s + batch_size), dtype=torch.long) for s in starts]
    if not slices:
        return
    yield slices[0], inference.run(slices[0], k=k)
    with ThreadPoolExecutor(prepare_threads, thread_name_prefix="score-sample") as pool:
        pending = deque(pool.submit(inference.prepare, entity) for entity in slices[1:1 + prepare_threads])
        for i, entity in enumerate(slices[1:], start=1):
            inputs = pending.popleft().result()
            if i + prepare_threads < len(slices):
                pending.append(pool.submit(inference.prepare, slices[i + prepare_threads]))
            yield entity, inference.run(entity, k=k, inputs=inputs)


class _Sink:
    """A streaming CSV or Parquet writer over an open binary file.

    Args:
        file: where to write.
        schema: the columns.
        fmt: ``"csv"`` or ``"parquet"``.
        quote: CSV only: quote the string values (some hold a comma, a quote or a line break).
    """

    def __init__(self, file: BinaryIO, schema: pa.Schema, fmt: str, quote: bool = False) -> None:
        if fmt == "csv":
            # Header written here: Arrow quotes the names, Kaggle's files do not. Values are quoted
            # only when an id needs it (``quote``): then Arrow quotes every string, as it can only
            # do; otherwise none, as in Kaggle's files.
            file.write((",".join(schema.names) + "\n").encode())
            options = pa_csv.WriteOptions(include_header=False, quoting_style="needed" if quote else "none")
            self.writer = pa_csv.CSVWriter(file, schema, write_options=options)
        else:
            self.writer = pq.ParquetWriter(file, schema, compression="zstd")

    def write(self, table: pa.Table) -> None:
        self.writer.write_table(table)

    def close(self) -> None:
        self.writer.close()


def score_to_file(inference: TaskInference, path: Path, fmt: str = "csv", batch_size: int = 1024,
                  progress: bool = True, prepare_threads: int | None = None) -> ScoreReport:
    """Write every entity's prediction of ``inference``'s task to ``path`` (replaced atomically).

    Args:
        inference: a warmed-up :class:`TaskInference` (its ladder fitted for ``batch_size``).
        path: the output file.
        fmt: ``"csv"`` or ``"parquet"``.
        batch_size: entities per :meth:`TaskInference.run`.
        progress: a tqdm bar on stderr (only when it is a terminal).
        prepare_threads: threads sampling ahead (``None``: :func:`prepare_threads_for` the device).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {FORMATS}")
    builder = TableBuilder(inference.task, inference.snapshot)
    total = inference.snapshot.num_nodes[inference.entity_type]
    unit = f" {inference.entity_type}s"
    start, rows, padding, runs = time.perf_counter(), 0, 0.0, 0
    with atomic_open(path) as file, progress_bar(total=total, desc=inference.task, unit=unit, unit_scale=True,
                                                 enabled=progress, smoothing=0.1) as bar:
        sink = _Sink(file, builder.schema, fmt, quote=fmt == "csv" and builder.needs_quotes)
        threads = prepare_threads or prepare_threads_for(inference.device)
        for entity, result in batches(inference, batch_size, prepare_threads=threads):
            sink.write(builder(entity, result))
            rows, padding, runs = rows + len(entity), padding + result.padding_ratio, runs + 1
            bar.update(len(entity))
        sink.close()
    return ScoreReport(inference.task, path, rows, time.perf_counter() - start, padding / max(1, runs))
