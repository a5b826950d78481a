"""One LitAPI per task of :mod:`models.registry`: predictions from a trained bundle.

Every hook runs in the task's inference worker process. ``setup`` does the heavy work once
(load the bundle, memory-map the snapshot, load the compile cache, compile and run every bucket);
the constructor only stores a small picklable :class:`WorkerSettings`, because LitServe pickles the
API into each spawned worker. Request bodies are validated by FastAPI before they are queued
(the pydantic annotation of ``decode_request``); an unknown id is a per-request 404 made by
``encode_response``, so no single request can fail the batch it shares with others.

A request holds one id or a list of them (:mod:`serve.http.schemas`). ``predict`` lines up the ids of
every request of the batch in order and runs them in forwards of at most ``max_batch_size`` ids,
the size the bucket ladder was compiled for (so a list never recompiles, and the tail of one list
shares a forward with the next request); each forward reads the graph version current when it
starts. A list is answered with one item per id, an unknown id by an item with an ``error``.
"""

# No ``from __future__ import annotations`` here: LitServe hands the *evaluated* annotations of
# decode_request / encode_response to FastAPI as the route's body and response models.
import gc
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import litserve as ls
import torch
from starlette.responses import JSONResponse, Response

from models.registry import TASKS, TaskSpec
from models.runtime.inference import InferenceResult, TaskInference
from models.schema import ARTICLE
from models.store.ids import id_text
from models.store.snapshot import GraphSnapshot
from serve.http.batching import BlockingBatchedLoop
from serve.http.encode import json_list_response, json_response
from serve.http.failed_starts import counted_start
from serve.http.metrics import WorkerMetrics
from serve.http.queries import Answer, ListQuery, Query, line_up, split_back
from serve.http.schemas import DEFAULT_K, LIST_RESPONSES, MAX_K, REQUESTS, RESPONSES
from serve.ingest.config import IngestConfig
from serve.processes import keep_progress_bars_in_process
from serve.versions.model_load import Served
from serve.versions.swap import VERSION_HEADER, ModelSlot, SwapSettings


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker needs to load its task (small and picklable).

    Args:
        bundle_dir: the task's checkpoint bundle.
        snapshot_dir: the graph snapshot the bundle was trained on.
        compile: ``none``, ``dynamic`` or ``buckets``.
        cuda_graphs: ``mode="reduce-overhead"`` over the buckets (CUDA only).
        max_batch_size: largest batch, which sizes the top bucket.
        batch_timeout_s: how long a batch waits to fill after its first request.
        threads: torch intra-op threads of this worker.
        compile_cache_dir: ``--compile-cache-dir`` (``None``: beside the bundle when writable).
        ingest: ingestion settings: the worker serves a live graph that follows the log (``None``:
            the snapshot as it is).
        models: the bundle's model version and how to follow new ones (``None``: version 1, fixed).
    """

    bundle_dir: str
    snapshot_dir: str
    compile: str = "buckets"
    cuda_graphs: bool = False
    max_batch_size: int = 32
    batch_timeout_s: float = 0.0
    threads: int = 1
    compile_cache_dir: str | None = None
    ingest: IngestConfig | None = None
    models: SwapSettings | None = None


class TaskAPI(ls.LitAPI):
    """Shared hooks; a subclass per registry entry names the task, its id field and its bodies."""

    task_spec: ClassVar[TaskSpec]
    task: ClassVar[str]
    id_field: ClassVar[str]

    def __init__(self, settings: WorkerSettings) -> None:
        super().__init__(max_batch_size=settings.max_batch_size, batch_timeout=settings.batch_timeout_s,
                         api_path=self.task_spec.path, loop=BlockingBatchedLoop())
        self.settings = settings
        self.inference: TaskInference | None = None
        self.metrics: WorkerMetrics | None = None
        self.follower: Any = None  # serve.graph.keys.KeyFollower: a ranking task with --state-dir
        self.served: Served | None = None  # the model and version answering (serve.versions.swap)
        self.models: ModelSlot | None = None
        self.device = "cpu"

    def setup(self, device: str) -> None:
        # A worker that fails to start again and again stops the server (serve.http.failed_starts).
        with counted_start(f"{self.task} worker {os.environ.get('LITSERVE_WORKER_ID', '0')}"):
            self._setup(device)

    def _setup(self, device: str) -> None:
        # First, before any parallel work: a spawned worker starts with one thread per core, and
        # several workers per machine would oversubscribe it.
        torch.set_num_threads(self.settings.threads)
        torch.set_num_interop_threads(1)
        keep_progress_bars_in_process()
        started = time.perf_counter()
        ingest = self.settings.ingest
        if ingest is None:
            graph = GraphSnapshot.open(self.settings.snapshot_dir)
        else:  # the graph owner's live graph (serve.graph), mapped: this worker applies nothing
            from models.store.live import wall_clock
            from models.store.shared_graph import SharedGraph
            from models.store.shared_header import shared_dir

            clock = wall_clock if ingest.clock == "wall" else None
            graph = SharedGraph(shared_dir(ingest.state_dir), clock=clock)
        self.device = device
        self.inference = self.load_model(Path(self.settings.bundle_dir), graph)
        report = self.inference.warm_up()
        self.metrics = WorkerMetrics(self.task)
        cache = "disabled" if self.settings.compile == "none" else "hit" if report.cache_hit else "miss"
        self.metrics.warmed_up(time.perf_counter() - started, cache)
        # The loaded model, torch and the compiled graphs leave the collector's reach: a full
        # collection over them stalled a batch by 100+ ms under load (docs/decisions.md,
        # "`gc.freeze()` after setup").
        gc.freeze()
        if ingest is not None and self.task_spec.ranks:
            # Purchase keys come from the graph owner; this thread recomputes them only while the
            # owner keys another model (a hot swap), so answering never waits on it.
            from serve.graph.keys import KeyFollower
            from serve.ingest.metrics import FollowerMetrics

            self.follower = KeyFollower(lambda: self.served.inference, graph, FollowerMetrics(self.task),
                                        ingest.poll_s, ingest.key_share)
        version = self.settings.models.version if self.settings.models else 1
        self.models = ModelSlot(self, Served(self.inference, version, time.time()), self.settings.models,
                                self.load_model)
        self.models.start()  # hot swaps of model versions in the background
        if self.follower is not None:
            self.follower.start()

    def load_model(self, bundle_dir: Path, graph: Any) -> TaskInference:
        """A bundle's model over ``graph``, compiled as configured (setup and hot swaps)."""
        return TaskInference.from_bundle(
            bundle_dir, graph, compile=self.settings.compile, device=self.device,
            cuda_graphs=self.settings.cuda_graphs, max_batch_size=self.settings.max_batch_size,
            cache_dir=Path(self.settings.compile_cache_dir) if self.settings.compile_cache_dir else None)

    def queue_waits(self, seconds: list[float]) -> None:
        self.metrics.queue_waits(seconds)  # called by BlockingBatchedLoop per batch

    def batch(self, inputs: list[Query]) -> list[Query]:
        return list(inputs)

    def predict(self, queries: list[Query | ListQuery]) -> list[tuple[Query | ListQuery, Any, int]]:
        """Answer every id of the batch's requests, in forwards of at most ``max_batch_size`` ids.

        Returns:
            per request, ``(request, answer, model version)``: the answer is a dict (``None``: an
            unknown id) for a :class:`Query`, a list of those for a :class:`ListQuery`.
        """
        served = self.served  # one model for the whole batch, whatever a hot swap does meanwhile
        ids, ks = line_up(queries)
        answers = split_back(queries, self.answer_ids(served, ids, ks))
        return [(q, a, served.version) for q, a in zip(queries, answers, strict=True)]

    def answer_ids(self, served: Served, ids: list[str], ks: list[int]) -> list[Answer]:
        """The answer to each of ``ids`` (``ks``: each one's ``k``), ``None`` for an unknown one.

        Each slice of ``max_batch_size`` ids is one lookup and one forward on one graph version;
        each answer carries the model's answer fields.
        """
        step = self.settings.max_batch_size
        out: list[Answer] = [None] * len(ids)
        with torch.inference_mode():
            for start in range(0, len(ids), step):
                chunk = ids[start:start + step]
                index, result = served.inference.run_ids(chunk, k=self.rank_k)
                if result is None:
                    continue
                self.metrics.batch(len(chunk), result.bucket, result.padding_ratio, result.stage_seconds)
                found = (index >= 0).nonzero()[0].tolist()
                answers = self.answers([chunk[i] for i in found], [ks[start + i] for i in found], result)
                for name, values in result.extras.items():
                    for answer, value in zip(answers, values.tolist(), strict=True):
                        answer[name] = value
                for i, answer in zip(found, answers, strict=True):
                    out[start + i] = answer
        self.metrics.recompiles(self.models.recompiles())
        return out

    def unbatch(self, output: list) -> list:
        return output

    @property
    def rank_k(self) -> int:
        """``k`` of every call (used by ranking tasks only): one value, so it never changes a shape."""
        return DEFAULT_K

    def answers(self, ids: Sequence[str], ks: Sequence[int], result: InferenceResult) -> list[dict[str, Any]]:
        """The answers to the known ``ids`` of ``result``, in order (``ks``: each one's ``k``)."""
        raise NotImplementedError

    def respond(self, output: tuple[Query | ListQuery, Any, int]) -> Response:
        query, answer, version = output
        headers = {VERSION_HEADER: str(version)}
        if type(query) is ListQuery:
            return json_list_response(answer, query.ids, self.id_field, headers)
        if answer is None:
            # !a: an id is any text, and a message shows no control or bidi characters.
            return JSONResponse({"detail": f"unknown {self.id_field} {query.id!a}"}, status_code=404,
                                headers=headers)
        return json_response(answer, headers)


class ValueAPI(TaskAPI):
    """A task answered with one number per entity (``{id_field: ..., value_field: x}``)."""

    def answers(self, ids: Sequence[str], ks: Sequence[int], result: InferenceResult) -> list[dict[str, Any]]:
        id_field, value_field = self.task_spec.id_field, self.task_spec.value_field
        return [{id_field: i, value_field: v} for i, v in zip(ids, result.values.tolist(), strict=True)]


class RankAPI(TaskAPI):
    """A task answered with the ``k`` best articles (``{id_field: ..., value_field: [...]}``)."""

    @property
    def rank_k(self) -> int:
        return min(MAX_K, len(self.inference.snapshot.ids[ARTICLE]))

    def answers(self, ids: Sequence[str], ks: Sequence[int], result: InferenceResult) -> list[dict[str, Any]]:
        article_ids = result.graph.ids[ARTICLE]  # the version that answered
        scores, articles = result.scores.tolist(), result.articles.tolist()
        field = self.task_spec.value_field
        return [{self.task_spec.id_field: i,
                 field: [{"article_id": id_text(article_ids[a]), "score": s}
                         for a, s in zip(row_articles[:k], row_scores[:k], strict=True)]}
                for i, k, row_scores, row_articles in zip(ids, ks, scores, articles, strict=True)]


def _api_class(spec: TaskSpec) -> type[TaskAPI]:
    """``<Task>API`` for a registry entry, with its request and answer bodies as the annotations."""

    many_field = REQUESTS[spec.name].many_field

    def decode_request(self: TaskAPI, request: Any) -> Query | ListQuery:
        many = getattr(request, many_field)
        if many is None:
            return Query(getattr(request, spec.id_field), getattr(request, "k", 0))
        return ListQuery(many, getattr(request, "k", 0))

    def encode_response(self: TaskAPI, output: tuple) -> Any:
        return self.respond(output)

    decode_request.__annotations__ = {"request": REQUESTS[spec.name], "return": Query | ListQuery}
    encode_response.__annotations__ = {"output": tuple,
                                       "return": RESPONSES[spec.name] | LIST_RESPONSES[spec.name]}
    name = f"{spec.name.capitalize()}API"
    cls = type(name, (RankAPI if spec.ranks else ValueAPI,), {
        "__doc__": f"``POST {spec.path}``: {spec.question}.", "__module__": __name__, "__qualname__": name,
        "task_spec": spec, "task": spec.name, "id_field": spec.id_field,
        "decode_request": decode_request, "encode_response": encode_response})
    globals()[name] = cls  # LitServe pickles the API into its worker: the class must be importable
    return cls


API_CLASSES: dict[str, type[TaskAPI]] = {name: _api_class(spec) for name, spec in TASKS.items()}
