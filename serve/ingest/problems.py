"""Why a batch was refused: problems naming the row and the field, and the HTTP status they map to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_SHOWN = 24  # characters of a client value quoted in a message
MAX_PROBLEMS = 5  # sentences in ``detail``; the ``problems`` list holds up to MAX_LISTED
MAX_LISTED = 100
# Reasons a batch is refused, the label of relserve_ingest_rejected_rows_total.
REASONS = ("invalid", "unknown_id", "exists", "late", "future", "too_large", "key_conflict")


def show(value: Any) -> str:
    """A client value for a message: ``ascii()``-quoted and cut, so no control characters or
    kilobytes of text reach an answer or a log line."""
    text = str(value)
    shown = ascii(text[:MAX_SHOWN])
    return shown if len(text) <= MAX_SHOWN else f"{shown[:-1]}...{shown[-1]} ({len(text)} characters)"


@dataclass(frozen=True)
class Problem:
    """One problem: ``row`` (index in the batch; ``None``: the batch) and ``field`` (``None``: the row)."""

    row: int | None
    field: str | None
    message: str
    reason: str = "invalid"

    @property
    def where(self) -> str:
        if self.row is None:
            return self.field or "rows"
        place = f"rows[{self.row}]"
        return place if self.field is None else f"{place}.{show_field(self.field)}"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"

    def as_json(self) -> dict[str, Any]:
        return {"row": self.row, "field": self.field, "problem": self.message, "reason": self.reason}


def show_field(name: str) -> str:
    return name if name.replace("_", "").isalnum() and len(name) <= 40 and name.isascii() else show(name)


class BatchRejected(Exception):
    """The batch was refused as a whole; nothing was appended.

    Args:
        problems: what is wrong, in row order (at least one).
        status: the HTTP status (422 for bad rows, 413 too large, 409 key reuse).
    """

    def __init__(self, problems: list[Problem], status: int = 422) -> None:
        super().__init__(problems[0].message)
        self.problems = problems
        self.status = status

    @property
    def reason(self) -> str:
        """The first problem's reason (a batch is counted once, under it)."""
        return self.problems[0].reason

    @property
    def detail(self) -> str:
        shown = "; ".join(str(p) for p in self.problems[:MAX_PROBLEMS])
        more = len(self.problems) - MAX_PROBLEMS
        return shown + (f"; and {more} more" if more > 0 else "")

    def body(self) -> dict[str, Any]:
        """The answer: the usual ``detail`` plus every problem (up to MAX_LISTED) as data."""
        return {"detail": self.detail, "problems": [p.as_json() for p in self.problems[:MAX_LISTED]]}
