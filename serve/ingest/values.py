"""The value rules of ingested rows: one function per kind of value, each returning the value as the
batch stores it or raising ``ValueError`` with what is wrong (validation names the row and field)."""

from __future__ import annotations

import math
import re
from typing import Any

from models.schema import MAX_ID_BYTES, day_number
from serve.id_fields import integral
from serve.ingest.problems import show

DATE = re.compile(r"^([0-9]{4}-[0-9]{2}-[0-9]{2})([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?)?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_INT = 2**31 - 1


def day(value: Any) -> int:
    match = DATE.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"must be a date YYYY-MM-DD, got {show(value)}")
    try:
        return day_number(match.group(1))
    except ValueError:
        raise ValueError(f"{show(value)} is not a calendar date") from None


def node_id(value: Any) -> str:
    value = integral(value)  # 13085.0 is the id 13085, as JSON Schema's integer reads it
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (a lone surrogate is not)") from None
    if not value or size > MAX_ID_BYTES:
        raise ValueError(f"must be 1 to {MAX_ID_BYTES} bytes of UTF-8, got {size}")
    if _CONTROL.search(value):
        raise ValueError(f"must not hold control characters, got {show(value)}")
    return value


def number(value: Any, text: bool, minimum: float | None = None) -> float:
    if isinstance(value, str) and text:
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"must be a number, got {show(value)}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"must be finite, got {value}")
    if minimum is not None and number < minimum:
        raise ValueError(f"must be >= {minimum:g}, got {value}")
    return number


def integer(value: Any, text: bool) -> int:
    if isinstance(value, str) and text and value.strip().lstrip("+").isdigit():
        value = int(value)
    value = integral(value)  # 2.0 is an integer in JSON Schema's reading
    if isinstance(value, bool) or not isinstance(value, int):
        got = show(value) if isinstance(value, str) else type(value).__name__
        raise ValueError(f"must be an integer, got {got}")
    if not 0 <= value <= MAX_INT:
        raise ValueError(f"must be in 0..{MAX_INT}, got {value}")
    return value


def category(value: Any) -> str | int | float:
    """As sent: the graph matches ``1`` and ``1.0`` to the same spelling of the training data."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be text or a number, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be finite, got {value}")
    return value


def feature_number(value: Any) -> float | str:
    """A numeric feature: a number (or its text), or a date, which counts as its day number."""
    if isinstance(value, str) and DATE.match(value):
        day(value)
        return value
    return number(value, text=True)
