"""What a simulated client sends: request bodies with Zipf-popular ids, and a few deliberately bad ones.

A share of the good requests (``list_share``) asks for a list of ``list_size`` ids at once
(``{"customer_ids": [...]}``), as a page of customers or a campaign list would; each of its
answers is checked as a one-id answer would be.

Pure request planning, independent of Locust, so the same plans can be checked without a load
generator. A bad request carries the one status a correct server answers it with; anything else
is a failure of the server, and the load test reports it as one.
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loadtest.id_pool import IdPool
from models.registry import BINARY, REGRESSION, TASKS
from models.schema import ARTICLE, MAX_ID_BYTES
from serve.http.schemas import DEFAULT_K, MAX_K
from serve.id_fields import MAX_IDS

TASK_PATHS = {name: spec.path for name, spec in TASKS.items()}
ID_FIELDS = {name: spec.id_field for name, spec in TASKS.items()}
RANKING_TASKS = tuple(name for name, spec in TASKS.items() if spec.ranks)
JSON = "application/json"
DEFAULT_BAD_SHARE = 0.03
DEFAULT_LIST_SHARE = 0.02
DEFAULT_LIST_SIZE = 50
# Most shoppers ask for the default list; a few page further or ask for a short one.
RANKED_KS = (DEFAULT_K, DEFAULT_K, DEFAULT_K, DEFAULT_K, 5, 24, MAX_K)


@dataclass(frozen=True)
class PlannedRequest:
    """One request to send.

    Args:
        task: a task name of the registry.
        body: the raw request body.
        expected: the status a correct server answers (200, or the 4xx of a bad request).
        kind: ``ok`` or what is wrong with the request (``unknown id``, ``k out of range``, ...).
        content_type: the ``Content-Type`` header.
        k: the ranked list length asked for (0 for a task answering one number).
        ids: the number of ids of a list request (0: one id).
    """

    task: str
    body: bytes
    expected: int = 200
    kind: str = "ok"
    content_type: str = JSON
    k: int = 0
    ids: int = 0

    @property
    def path(self) -> str:
        return TASK_PATHS[self.task]

    @property
    def label(self) -> str:
        """Locust's stats name: the path, with the kind appended for a bad request or a list."""
        if self.kind != "ok":
            return f"{self.path} [{self.kind}]"
        return f"{self.path} [list]" if self.ids else self.path


class Zipf:
    """Draws ``items[r]`` with probability proportional to ``1 / (r + 1) ** exponent``.

    Args:
        items: most popular first.
        exponent: skew; about 1 for web and retail popularity.
    """

    def __init__(self, items: Sequence[str], exponent: float = 1.0) -> None:
        if not items:
            raise ValueError("Zipf needs at least one item")
        self.items = list(items)
        self.cumulative = list(itertools.accumulate((r + 1) ** -exponent for r in range(len(items))))

    def draw(self, rng: random.Random) -> str:
        index = bisect.bisect_right(self.cumulative, rng.random() * self.cumulative[-1])
        return self.items[min(index, len(self.items) - 1)]


@dataclass(frozen=True)
class BadKind:
    """A way to get a request wrong: the tasks it applies to, the status it earns, its body."""

    name: str
    tasks: tuple[str, ...]
    expected: int
    make: Callable[[Traffic, str, random.Random], tuple[bytes, str]]


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


def _unknown_id(t: Traffic, task: str, rng: random.Random) -> tuple[bytes, str]:
    return _json({ID_FIELDS[task]: t.unknown_id(task, rng)}), JSON


def _truncated_json(t: Traffic, task: str, rng: random.Random) -> tuple[bytes, str]:
    return b'{"' + ID_FIELDS[task].encode() + b'": "', JSON


def _empty_object(t: Traffic, task: str, rng: random.Random) -> tuple[bytes, str]:
    return b"{}", JSON


def _extra_field(t: Traffic, task: str, rng: random.Random) -> tuple[bytes, str]:
    return _json({ID_FIELDS[task]: t.served_id(task, rng), "since": "2020-09-01"}), JSON


def _malformed_id(t: Traffic, task: str, rng: random.Random) -> tuple[bytes, str]:
    # Any string or integer up to MAX_ID_BYTES is an id (a cut one is merely unknown): malformed is
    # another JSON type, or past the byte limit.
    served = t.served_id(task, rng)
    value = rng.choice(([served], served + "x" * (MAX_ID_BYTES + 1 - len(served.encode()))))
    return _json({ID_FIELDS[task]: value}), JSON


def _plain_text(t: Traffic, task: str, rng: random.Random) -> tuple[bytes, str]:
    return _json({ID_FIELDS[task]: t.served_id(task, rng)}), "text/plain"


def _k_out_of_range(t: Traffic, task: str, rng: random.Random) -> tuple[bytes, str]:
    return _json({ID_FIELDS[task]: t.served_id(task, rng), "k": rng.choice((0, MAX_K + 1))}), JSON


ALL_TASKS = tuple(TASK_PATHS)
BAD_KINDS: tuple[BadKind, ...] = (
    BadKind("unknown id", ALL_TASKS, 404, _unknown_id),
    BadKind("malformed json", ALL_TASKS, 422, _truncated_json),
    BadKind("missing field", ALL_TASKS, 422, _empty_object),
    BadKind("unexpected field", ALL_TASKS, 422, _extra_field),
    BadKind("malformed id", ALL_TASKS, 422, _malformed_id),
    BadKind("not json", ALL_TASKS, 415, _plain_text),
    BadKind("k out of range", RANKING_TASKS, 422, _k_out_of_range),
)


class Traffic:
    """Plans requests for one simulated client population.

    Args:
        pool: the ids to ask about.
        bad_share: share of requests that are deliberately bad (0..1).
        zipf_exponent: popularity skew of the ids.
        list_share: share of the good requests that ask for a list of ids (0..1).
        list_size: ids per list request.
    """

    def __init__(self, pool: IdPool, bad_share: float = DEFAULT_BAD_SHARE,
                 zipf_exponent: float = 1.0, list_share: float = DEFAULT_LIST_SHARE,
                 list_size: int = DEFAULT_LIST_SIZE) -> None:
        for name, share in (("bad_share", bad_share), ("list_share", list_share)):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be in 0..1, got {share}")
        if not 1 <= list_size <= MAX_IDS:
            raise ValueError(f"list_size must be in 1..{MAX_IDS}, got {list_size}")
        self.pool = pool
        self.bad_share = bad_share
        self.list_share = list_share
        self.list_size = list_size
        self.customers = Zipf(pool.customers, zipf_exponent)
        self.articles = Zipf(pool.articles, zipf_exponent)
        self.bad_kinds = {task: [k for k in BAD_KINDS if task in k.tasks] for task in TASK_PATHS}

    def served_id(self, task: str, rng: random.Random) -> str:
        return (self.articles if TASKS[task].entity_type == ARTICLE else self.customers).draw(rng)

    def unknown_id(self, task: str, rng: random.Random) -> str:
        article = TASKS[task].entity_type == ARTICLE
        return rng.choice(self.pool.unknown_articles if article else self.pool.unknown_customers)

    def plan(self, task: str, rng: random.Random) -> PlannedRequest:
        """A good request for ``task``, or with probability ``bad_share`` a bad one."""
        if rng.random() < self.bad_share:
            return self.bad(task, rng)
        if self.list_share and rng.random() < self.list_share:
            return self.good_list(task, rng)
        return self.good(task, rng)

    def good(self, task: str, rng: random.Random) -> PlannedRequest:
        body: dict[str, object] = {ID_FIELDS[task]: self.served_id(task, rng)}
        k = 0
        if TASKS[task].ranks:
            k = body["k"] = rng.choice(RANKED_KS)
        return PlannedRequest(task, _json(body), k=k)

    def good_list(self, task: str, rng: random.Random) -> PlannedRequest:
        """A good request for a list of ``list_size`` served ids (repeats possible, as Zipf draws)."""
        body: dict[str, object] = {f"{ID_FIELDS[task]}s": [self.served_id(task, rng)
                                                           for _ in range(self.list_size)]}
        k = 0
        if TASKS[task].ranks:
            k = body["k"] = rng.choice(RANKED_KS)
        return PlannedRequest(task, _json(body), k=k, ids=self.list_size)

    def bad(self, task: str, rng: random.Random, kind: str | None = None) -> PlannedRequest:
        """A bad request of ``kind`` (a random applicable kind if ``None``)."""
        kinds = self.bad_kinds[task]
        chosen = rng.choice(kinds) if kind is None else next(k for k in kinds if k.name == kind)
        body, content_type = chosen.make(self, task, rng)
        return PlannedRequest(task, body, chosen.expected, chosen.name, content_type)


def answer_problem(planned: PlannedRequest, status: int, body: bytes | None) -> str | None:
    """Why an answer to ``planned`` is wrong, or ``None`` if it is what a correct server sends."""
    if status != planned.expected:
        snippet = (body or b"")[:120].decode("utf-8", "replace")
        return f"{planned.kind}: expected {planned.expected}, got {status} {snippet}"
    if status != 200:
        return None
    try:
        answer: Any = json.loads(body or b"")
        if planned.ids:
            items = answer["answers"]
            ok = len(items) == planned.ids and all(_plausible(planned, item) for item in items)
        else:
            ok = _plausible(planned, answer)
    except (ValueError, TypeError, KeyError):
        ok = False
    return None if ok else f"200 with an implausible answer: {(body or b'')[:120].decode('utf-8', 'replace')}"


def _plausible(planned: PlannedRequest, answer: Any) -> bool:
    """Whether one id's answer has the task's value in its range (raises on a missing field)."""
    spec = TASKS[planned.task]
    value = answer[spec.value_field]
    if spec.task_type == BINARY:
        return 0.0 <= float(value) <= 1.0
    if spec.task_type == REGRESSION:
        return float(value) >= 0.0
    return 1 <= len(value) <= planned.k
