"""Row validation: every row of a batch is checked before anything is appended (all or nothing).

Rows come as dicts (JSON objects, NDJSON lines, CSV records; from CSV every value is text and
numbers are parsed). A batch either becomes the columns of one :class:`models.store.records.IngestBatch`
or raises :class:`BatchRejected`, whose problems name the row index and the field, e.g.
``rows[3].customer_id: unknown customer '00a1...' (create it with POST /ingest/customers first)``.

The rules (docs/ingestion.md repeats them):

* transactions: ``t_dat`` a date (``YYYY-MM-DD``, or an ISO date and time, which counts as its day),
  ``customer_id`` and ``article_id`` known ids (in the snapshot or ingested before), ``price`` a
  finite number >= 0, ``sales_channel_id`` an integer >= 0. A row older than the graph's latest
  transaction day minus the lateness (``--ingest-lateness-days``) is rejected (``late``), and so is
  a row dated after tomorrow, UTC (``future``): one bad clock must not move the graph's "now".
* customers / articles: the id (``customer_id`` / ``article_id``) must be new, once per batch;
  the snapshot's feature columns are optional (missing = ``None``), categorical values are kept
  as text (an unseen value becomes "missing" in the graph), numeric ones must be numbers. Other
  columns of the H&M CSV layout are accepted and dropped; any other column is an error.
* ids: non-empty text of at most :data:`models.schema.MAX_ID_BYTES` UTF-8 bytes without control
  characters (an integer counts as its decimal digits).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from models.schema import (
    ARTICLE,
    ARTICLE_COLUMNS,
    CUSTOMER,
    CUSTOMER_COLUMNS,
    TRANSACTION_COLUMNS,
    day_number,
    day_to_date,
)
from serve.ingest import values
from serve.ingest.problems import BatchRejected, Problem, show

ID_FIELDS = {CUSTOMER: "customer_id", ARTICLE: "article_id"}
NODE_KINDS = {"customers": CUSTOMER, "articles": ARTICLE}
LAYOUT_COLUMNS = {CUSTOMER: CUSTOMER_COLUMNS, ARTICLE: ARTICLE_COLUMNS}


@dataclass(frozen=True)
class NodeColumns:
    """What a customers or articles row may hold: the id, the graph's feature columns, and the
    columns of the CSV layout that are accepted and dropped."""

    id_field: str
    categorical: tuple[str, ...]
    numeric: tuple[str, ...]
    dropped: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, node_type: str, categorical: Sequence[str], numeric_names: Sequence[str]) -> NodeColumns:
        """From a snapshot's feature names (each numeric column is stored with a ``_missing`` twin)."""
        numeric = tuple(n for n in numeric_names if f"{n}_missing" in numeric_names)
        used = {ID_FIELDS[node_type], *categorical, *numeric}
        return cls(ID_FIELDS[node_type], tuple(categorical), numeric,
                   frozenset(LAYOUT_COLUMNS[node_type]) - used)


class GraphFacts(Protocol):
    """What validation asks of the current graph (implemented by :class:`serve.ingest.view.GraphView`)."""

    @property
    def latest_day(self) -> int:
        """The latest transaction day in the graph (snapshot or ingested)."""
        ...

    def known(self, node_type: str, ids: list[str]) -> list[bool]:
        """Per id, whether the graph has a node of ``node_type`` with it."""
        ...


@dataclass
class Validator:
    """Checks batches against a graph (see the module docstring).

    Args:
        columns: per node type, its :class:`NodeColumns`.
        lateness_days: how many days before the graph's latest transaction day a row may be.
        today: the current day number, UTC (a parameter for tests).
    """

    columns: dict[str, NodeColumns]
    lateness_days: int = 7
    today: Callable[[], int] = lambda: day_number(dt.datetime.now(dt.UTC).date())

    def validate(self, kind: str, rows: list[Any], graph: GraphFacts, text: bool = False) -> dict[str, list]:
        """The batch's columns, or :class:`BatchRejected` listing the problems (``text``: values
        came as text, from CSV)."""
        if not rows:
            raise BatchRejected([Problem(None, "rows", "must hold at least one row")])
        problems: list[Problem] = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                problems.append(Problem(i, None, f"must be an object, got {type(row).__name__}"))
        if problems:
            raise BatchRejected(problems)
        if kind == "transactions":
            return self._transactions(rows, graph, text)
        return self._nodes(NODE_KINDS[kind], rows, graph, text)

    def _transactions(self, rows: list[dict], graph: GraphFacts, text: bool) -> dict[str, list]:
        out: dict[str, list] = {"day": [], "customer_id": [], "article_id": [], "price": [],
                                "sales_channel_id": []}
        problems: list[Problem] = []
        oldest, newest = graph.latest_day - self.lateness_days, self.today() + 1
        price = functools.partial(values.number, text=text, minimum=0.0)
        channel = functools.partial(values.integer, text=text)
        for i, row in enumerate(rows):
            problems += _fields(i, row, TRANSACTION_COLUMNS, TRANSACTION_COLUMNS)
            day = _checked(problems, i, "t_dat", row, values.day)
            if day is not None and day < oldest:
                problems.append(Problem(i, "t_dat", f"{day_to_date(day)} is too late: the graph's latest day "
                                        f"is {day_to_date(graph.latest_day)} and rows may be at most "
                                        f"{self.lateness_days} days older (from {day_to_date(oldest)})",
                                        "late"))
            elif day is not None and day > newest:
                problems.append(Problem(i, "t_dat", f"{day_to_date(day)} is in the future (after "
                                        f"{day_to_date(newest)}, UTC)", "future"))
            out["day"].append(day)
            out["customer_id"].append(_checked(problems, i, "customer_id", row, values.node_id))
            out["article_id"].append(_checked(problems, i, "article_id", row, values.node_id))
            out["price"].append(_checked(problems, i, "price", row, price))
            out["sales_channel_id"].append(_checked(problems, i, "sales_channel_id", row, channel))
        for node_type, column in ((CUSTOMER, "customer_id"), (ARTICLE, "article_id")):
            problems += _unknown(out[column], node_type, column, graph)
        if problems:
            raise BatchRejected(problems)
        return out

    def _nodes(self, node_type: str, rows: list[dict], graph: GraphFacts, text: bool) -> dict[str, list]:
        spec = self.columns[node_type]
        features = (*spec.categorical, *spec.numeric)
        out: dict[str, list] = {spec.id_field: [], **{name: [] for name in features}}
        problems: list[Problem] = []
        allowed = (spec.id_field, *features, *sorted(spec.dropped))
        first_row: dict[str, int] = {}
        for i, row in enumerate(rows):
            problems += _fields(i, row, allowed, (spec.id_field,))
            node_id = _checked(problems, i, spec.id_field, row, values.node_id)
            if node_id is not None and node_id in first_row:
                repeated = f"{show(node_id)} also in rows[{first_row[node_id]}]"
                problems.append(Problem(i, spec.id_field, repeated, "exists"))
            elif node_id is not None:
                first_row[node_id] = i
            out[spec.id_field].append(node_id)
            for name in spec.categorical:
                out[name].append(_checked(problems, i, name, row, values.category, missing_ok=True))
            for name in spec.numeric:
                out[name].append(_checked(problems, i, name, row, values.feature_number, missing_ok=True))
        ids = [(i, node_id) for i, node_id in enumerate(out[spec.id_field]) if node_id is not None]
        for (i, node_id), known in zip(ids, graph.known(node_type, [v for _, v in ids]), strict=True):
            if known:
                exists = f"{node_type} {show(node_id)} already exists"
                problems.append(Problem(i, spec.id_field, exists, "exists"))
        if problems:
            raise BatchRejected(problems)
        return out


def _fields(i: int, row: dict, allowed: Sequence[str], required: Sequence[str]) -> list[Problem]:
    problems = [Problem(i, name, "field required") for name in required if name not in row]
    return problems + [Problem(i, str(name), "unexpected field") for name in row if name not in allowed]


def _checked(problems: list[Problem], i: int, name: str, row: dict, check: Callable[[Any], Any],
             missing_ok: bool = False) -> Any:
    """``check(row[name])``; a ``ValueError`` becomes a problem of row ``i`` and ``None``."""
    if name not in row:
        return None
    value = row[name]
    if missing_ok and (value is None or value == ""):
        return None
    try:
        return check(value)
    except ValueError as e:
        problems.append(Problem(i, name, str(e)))
        return None


def _unknown(values: list, node_type: str, column: str, graph: GraphFacts) -> list[Problem]:
    rows = [(i, v) for i, v in enumerate(values) if v is not None]
    hint = "customers" if node_type == CUSTOMER else "articles"
    known = graph.known(node_type, [v for _, v in rows])
    return [Problem(i, column, f"unknown {node_type} {show(v)} (create it with POST /ingest/{hint} first)",
                    "unknown_id") for (i, v), ok in zip(rows, known, strict=True) if not ok]
