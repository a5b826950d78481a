"""Decoded prediction requests, and how the ids of a batch's requests line up for the forwards.

A request holds one id (:class:`Query`) or a list of them (:class:`ListQuery`). The worker answers
a batch by lining up every request's ids in order (:func:`line_up`), answering those ids in
forwards of its bucket sizes, and handing each request its share of the answers back
(:func:`split_back`). A batch of single ids, the common case, is lined up without copying.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Answer = dict[str, Any] | None  # None: the id is unknown


@dataclass(frozen=True)
class Query:
    """One decoded request: the id as sent and ``k``. The id is looked up in ``predict``, on the
    graph version that answers it (a live graph's node indices can move with a compaction).

    ``k`` is always the request's own: a ranking task's body carries it (defaulting to the task's
    :attr:`models.registry.TaskSpec.k`, the one default), and a task that answers one value, whose
    body has none, passes 0 (no list). So neither class has a default of its own."""

    id: str
    k: int


@dataclass(frozen=True)
class ListQuery:
    """One decoded request for a list of ids (request order, repeats kept), each answered with ``k``
    (as :class:`Query`'s)."""

    ids: tuple[str, ...]
    k: int


def line_up(queries: Sequence[Query | ListQuery]) -> tuple[list[str], list[int]]:
    """Every id of ``queries`` in order, and each one's ``k``."""
    if not any(type(q) is ListQuery for q in queries):
        return [q.id for q in queries], [q.k for q in queries]
    ids: list[str] = []
    ks: list[int] = []
    for q in queries:
        many = q.ids if type(q) is ListQuery else (q.id,)
        ids.extend(many)
        ks.extend([q.k] * len(many))
    return ids, ks


def split_back(queries: Sequence[Query | ListQuery], answers: list[Answer]) -> list[Answer | list[Answer]]:
    """Per request, its answer (a :class:`Query`) or its list of answers (a :class:`ListQuery`);
    ``answers`` are those of :func:`line_up`'s ids, in the same order."""
    if len(answers) == len(queries) and not any(type(q) is ListQuery for q in queries):
        return list(answers)
    out: list[Answer | list[Answer]] = []
    start = 0
    for q in queries:
        if type(q) is ListQuery:
            out.append(answers[start:start + len(q.ids)])
            start += len(q.ids)
        else:
            out.append(answers[start])
            start += 1
    return out
