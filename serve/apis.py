"""One LitAPI per task: churn, sales and purchase predictions from a trained bundle.

Every hook runs in the task's inference worker process. ``setup`` does the heavy work once
(load the bundle, memory-map the snapshot, load the compile cache, compile and run every bucket);
the constructor only stores a small picklable :class:`WorkerSettings`, because LitServe pickles the
API into each spawned worker. Request bodies are validated by FastAPI before they are queued
(the pydantic annotation of ``decode_request``); an unknown id is a per-request 404 made by
``encode_response``, so no single request can fail the batch it shares with others.
"""

# No ``from __future__ import annotations`` here: LitServe hands the *evaluated* annotations of
# decode_request / encode_response to FastAPI as the route's body and response models.
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import litserve as ls
import torch
from starlette.responses import JSONResponse, Response

from models.inference import InferenceResult, TaskInference
from models.schema import ARTICLE
from models.snapshot import GraphSnapshot
from serve.batching import BlockingBatchedLoop
from serve.encode import json_response
from serve.metrics import WorkerMetrics
from serve.schemas import (
    DEFAULT_K,
    MAX_K,
    ArticleRequest,
    ChurnResponse,
    CustomerRequest,
    PurchaseRequest,
    PurchaseResponse,
    SalesResponse,
)


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
    """

    bundle_dir: str
    snapshot_dir: str
    compile: str = "buckets"
    cuda_graphs: bool = False
    max_batch_size: int = 32
    batch_timeout_s: float = 0.0
    threads: int = 1


@dataclass(frozen=True)
class Query:
    """One decoded request: the id as sent, its dense index (``-1``: unknown) and ``k``."""

    id: str
    index: int
    k: int = 0


class TaskAPI(ls.LitAPI):
    """Shared hooks; subclasses name the task, the id field and the answer's shape."""

    task: ClassVar[str]
    id_field: ClassVar[str]

    def __init__(self, settings: WorkerSettings) -> None:
        super().__init__(max_batch_size=settings.max_batch_size, batch_timeout=settings.batch_timeout_s,
                         api_path=f"/predict/{self.task}", loop=BlockingBatchedLoop())
        self.settings = settings
        self.inference: TaskInference | None = None
        self.metrics: WorkerMetrics | None = None

    def setup(self, device: str) -> None:
        # First, before any parallel work: a spawned worker starts with one thread per core, and
        # several workers per machine would oversubscribe it.
        torch.set_num_threads(self.settings.threads)
        torch.set_num_interop_threads(1)
        started = time.perf_counter()
        snapshot = GraphSnapshot.open(self.settings.snapshot_dir)
        self.inference = TaskInference.from_bundle(
            Path(self.settings.bundle_dir), snapshot, compile=self.settings.compile, device=device,
            cuda_graphs=self.settings.cuda_graphs, max_batch_size=self.settings.max_batch_size)
        report = self.inference.warm_up()
        self.metrics = WorkerMetrics(self.task)
        cache = "disabled" if self.settings.compile == "none" else "hit" if report.cache_hit else "miss"
        self.metrics.warmed_up(time.perf_counter() - started, cache)

    def lookup(self, entity_id: str, k: int = 0) -> Query:
        index = int(self.inference.snapshot.lookup(self.inference.entity_type, [entity_id])[0])
        return Query(entity_id, index, k)

    def queue_waits(self, seconds: list[float]) -> None:
        self.metrics.queue_waits(seconds)  # called by BlockingBatchedLoop per batch

    def batch(self, inputs: list[Query]) -> list[Query]:
        return list(inputs)

    def predict(self, queries: list[Query]) -> list[tuple[Query, dict[str, Any] | None]]:
        """Run the known ids of the batch in one forward; ``None`` answers the unknown ones."""
        known = [q for q in queries if q.index >= 0]
        answers: list[dict[str, Any]] = []
        if known:
            entity = torch.tensor([q.index for q in known], dtype=torch.long)
            with torch.inference_mode():
                result = self.inference.run(entity, k=self.rank_k)
            self.metrics.batch(len(queries), result.bucket, result.padding_ratio, result.stage_seconds)
            self.metrics.recompiles(self.inference.recompiles())
            answers = self.answers(known, result)
        in_order = iter(answers)
        return [(q, next(in_order) if q.index >= 0 else None) for q in queries]

    def unbatch(self, output: list) -> list:
        return output

    @property
    def rank_k(self) -> int:
        """``k`` of every call (used by ranking tasks only): one value, so it never changes a shape."""
        return DEFAULT_K

    def answers(self, queries: list[Query], result: InferenceResult) -> list[dict[str, Any]]:
        raise NotImplementedError

    def respond(self, output: tuple[Query, dict[str, Any] | None]) -> Response:
        query, answer = output
        if answer is None:
            return JSONResponse({"detail": f"unknown {self.id_field} {query.id!r}"}, status_code=404)
        return json_response(answer)


class ChurnAPI(TaskAPI):
    """``POST /predict/churn``: probability that a customer buys nothing in the next 7 days."""

    task = "churn"
    id_field = "customer_id"

    def decode_request(self, request: CustomerRequest) -> Query:
        return self.lookup(request.customer_id)

    def answers(self, queries: list[Query], result: InferenceResult) -> list[dict[str, Any]]:
        return [{"customer_id": q.id, "churn_probability": p}
                for q, p in zip(queries, result.values.tolist(), strict=True)]

    def encode_response(self, output: tuple) -> ChurnResponse:
        return self.respond(output)


class SalesAPI(TaskAPI):
    """``POST /predict/sales``: an article's summed sales price over the next 7 days."""

    task = "sales"
    id_field = "article_id"

    def decode_request(self, request: ArticleRequest) -> Query:
        return self.lookup(request.article_id)

    def answers(self, queries: list[Query], result: InferenceResult) -> list[dict[str, Any]]:
        return [{"article_id": q.id, "sales_7d": s}
                for q, s in zip(queries, result.values.tolist(), strict=True)]

    def encode_response(self, output: tuple) -> SalesResponse:
        return self.respond(output)


class PurchaseAPI(TaskAPI):
    """``POST /predict/purchase``: the ``k`` articles a customer most likely buys next."""

    task = "purchase"
    id_field = "customer_id"

    @property
    def rank_k(self) -> int:
        return min(MAX_K, len(self.inference.snapshot.ids[ARTICLE]))

    def decode_request(self, request: PurchaseRequest) -> Query:
        return self.lookup(request.customer_id, request.k)

    def answers(self, queries: list[Query], result: InferenceResult) -> list[dict[str, Any]]:
        article_ids = self.inference.snapshot.ids[ARTICLE]
        scores, articles = result.scores.tolist(), result.articles.tolist()
        return [{"customer_id": q.id,
                 "articles": [{"article_id": article_ids[a].decode("ascii"), "score": s}
                              for a, s in zip(row_articles[: q.k], row_scores[: q.k], strict=True)]}
                for q, row_scores, row_articles in zip(queries, scores, articles, strict=True)]

    def encode_response(self, output: tuple) -> PurchaseResponse:
        return self.respond(output)


API_CLASSES: dict[str, type[TaskAPI]] = {api.task: api for api in (ChurnAPI, SalesAPI, PurchaseAPI)}
