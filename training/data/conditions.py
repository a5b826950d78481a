"""The row filter of a dataset spec: a list of simple conditions, all of which a row must meet.

One condition is ``<column> <op> <value>``, the operator between spaces (column names may hold
spaces: ``Customer ID != null``):

- ``==``, ``!=``: equal or not; ``<``, ``<=``, ``>``, ``>=``: a numeric comparison;
- ``~``, ``!~``: the text matches / does not match a regular expression (RE2 syntax, what pyarrow
  matches with: Python's ``re`` without backreferences and lookaround; a search: anchor with ``^``
  and ``$``);
- a value is ``null`` (the empty field; only with ``==`` and ``!=``), a number (compared as a
  number), or text, quoted (``'C'``, ``"United Kingdom"``) or bare (``United Kingdom``).

An empty field fails every condition except ``== null``, as in SQL. See docs/dataset-spec.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

OPERATORS = ("==", "!=", "<=", ">=", "<", ">", "!~", "~")
_SPLIT = re.compile(r"\s(==|!=|<=|>=|<|>|!~|~)\s")
_USAGE = "expected '<column> <op> <value>' with op one of " + ", ".join(OPERATORS) + " between spaces"


class ConditionError(ValueError):
    """A condition that does not parse; the message is one line without the condition's position."""


@dataclass(frozen=True)
class Condition:
    """One parsed condition.

    Args:
        column: the column it reads.
        op: one of :data:`OPERATORS`.
        value: ``None`` for ``null``, a ``float`` for a number, else the text (or the regex).
        text: the condition as written, for messages.
    """

    column: str
    op: str
    value: float | str | None
    text: str

    @property
    def numeric(self) -> bool:
        """Whether the column is compared as a number."""
        return isinstance(self.value, float)


def parse_condition(text: str) -> Condition:
    """Parse ``text``; :class:`ConditionError` saying what is wrong otherwise."""
    match = _SPLIT.search(text)
    column = text[: match.start()].strip().strip("`") if match else ""
    raw = text[match.end():].strip() if match else ""
    if not match or not column or not raw:
        raise ConditionError(f"cannot parse {text!r}: {_USAGE}")
    op = match[1]
    value = _value(raw)
    if value is None and op not in ("==", "!="):
        raise ConditionError(f"cannot parse {text!r}: null goes only with == or !=")
    if op in ("<", "<=", ">", ">=") and not isinstance(value, float):
        raise ConditionError(f"cannot parse {text!r}: {op} compares numbers, got {raw}")
    if op in ("~", "!~"):
        value = raw if not isinstance(value, str) else value
        try:
            pc.match_substring_regex(pa.array([""], pa.string()), value)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            why = str(err).removeprefix("Invalid regular expression: ")
            raise ConditionError(f"cannot parse {text!r}: bad regular expression ({why}; RE2 syntax: no "
                                 "backreferences or lookaround)") from None
    return Condition(column, op, value, text)


def _value(raw: str) -> float | str | None:
    if raw == "null":
        return None
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    try:
        number = float(raw)
    except ValueError:
        return raw
    return number if math.isfinite(number) else raw


def row_mask(column: pa.Array | pa.ChunkedArray, condition: Condition) -> pa.Array:
    """``(N,)`` boolean without nulls: which rows meet ``condition``.

    Args:
        column: the condition's column, as float64 for a numeric condition, else as text.
        condition: what to test.
    """
    op, value = condition.op, condition.value
    if value is None:
        result = pc.is_null(column) if op == "==" else pc.is_valid(column)
    elif op in ("~", "!~"):
        result = pc.match_substring_regex(column, value)
        result = pc.invert(result) if op == "!~" else result
    else:
        function = {"==": "equal", "!=": "not_equal", "<": "less", "<=": "less_equal",
                    ">": "greater", ">=": "greater_equal"}[op]
        result = pc.call_function(function, [column, pa.scalar(value, column.type)])
    return pc.fill_null(result, False)
