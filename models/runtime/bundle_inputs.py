"""A bundle's input definitions, compared with this code and with the snapshot it is loaded over.

At training time a bundle records :func:`models.feature_definitions.feature_definition` (names,
windows and scales of the computed inputs, and their version) and the snapshot's
:func:`models.feature_definitions.snapshot_schema` (per node type, its columns and cardinalities).
:func:`models.runtime.bundle.load_bundle` refuses a bundle when either differs, naming what differs in
one line, so a changed window, scale or column never serves skewed inputs without a word. Only
definitions are compared, never contents: a snapshot rebuilt or compacted with the same columns passes.

Bundles written before definitions were recorded (no ``feature_definition`` in ``config.json``) are
read as :data:`models.feature_definitions.FEATURE_DEFINITION_V1`: they load while this code's
definition equals version 1, and are refused with the differences (retrain) once it does not. Their
snapshot side is checked through their ``specs`` (column and value counts) only.
"""

from __future__ import annotations

from typing import Any

from models.feature_definitions import (
    FEATURE_DEFINITION_V1,
    SchemaSource,
    feature_definition,
    snapshot_schema,
)
from models.nn.inputs import TableSpec

_LABELS = {"categorical": "categorical columns", "numeric": "numeric columns",
           "num_numeric": "numeric inputs"}
_SHOWN = 4  # names listed per side before "..."


def code_mismatch(recorded: dict[str, Any] | None) -> str | None:
    """Why a bundle's recorded feature definition does not fit this code; ``None`` if it does.

    Args:
        recorded: ``config.json``'s ``feature_definition``; ``None`` for a bundle written before
            definitions were recorded (read as version 1).
    """
    current = feature_definition()
    if recorded is None:
        if current == FEATURE_DEFINITION_V1:
            return None
        return ("bundle written before feature definitions were recorded, so read as version 1, which "
                f"differs from this code (bundle != code): {differences(FEATURE_DEFINITION_V1, current)}; "
                "retrain it")
    found = differences(recorded, current)
    return f"feature definition differs from this code (bundle != code): {found}; retrain the bundle" \
        if found else None


def snapshot_mismatch(recorded: dict[str, Any] | None, snapshot: SchemaSource, where: object) -> str | None:
    """Why a bundle's recorded snapshot columns differ from ``snapshot``'s; ``None`` if they do not
    (or the bundle recorded none).

    Args:
        recorded: ``config.json``'s ``snapshot_schema``.
        snapshot: the snapshot the bundle is loaded over.
        where: how to name the snapshot in the message (its directory).
    """
    if recorded is None:
        return None
    found = differences(recorded, snapshot_schema(snapshot))
    return (f"snapshot {where} has other feature columns than the bundle was trained on "
            f"(bundle != snapshot): {found}; retrain or use a snapshot with its columns") if found else None


def specs_mismatch(recorded: dict[str, TableSpec], current: dict[str, TableSpec],
                   where: object) -> str | None:
    """Why the input widths a bundle's network was built for differ from ``current``'s (the check
    that remains for bundles without a recorded snapshot schema)."""
    def plain(specs: dict[str, TableSpec]) -> dict[str, Any]:
        return {t: {"cardinalities": list(s.cardinalities), "num_numeric": s.num_numeric}
                for t, s in specs.items()}

    found = differences(plain(recorded), plain(current))
    return (f"feature columns differ from snapshot {where} (bundle != snapshot): {found}; "
            "retrain or use the matching snapshot") if found else None


def differences(recorded: Any, current: Any, path: tuple[str, ...] = ()) -> str:
    """Every leaf where two JSON-like definitions differ, as ``"; "``-joined ``"<path> <a> != <b>"``;
    ``""`` when they are equal."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        keys = [*recorded, *(k for k in current if k not in recorded)]
        found = [differences(recorded.get(k, _ABSENT), current.get(k, _ABSENT), (*path, str(k)))
                 for k in keys]
        return "; ".join(f for f in found if f)
    if _plain(recorded) == _plain(current):
        return ""
    label = " ".join((*path[:-1], _LABELS.get(path[-1], path[-1]))) if path else "definition"
    return f"{label} {_compare(recorded, current)}"


class _Absent:
    def __repr__(self) -> str:
        return "absent"


_ABSENT = _Absent()


def _plain(value: Any) -> Any:
    # JSON has no tuples: a definition read back from config.json holds lists.
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def _compare(recorded: Any, current: Any) -> str:
    if _names(recorded) and _names(current) and set(recorded) != set(current):
        gone, new = ([n for n in a if n not in b] for a, b in ((recorded, current), (current, recorded)))
        return (f"{len(recorded)} != {len(current)} names (only in the bundle: {_short(gone)}; "
                f"only here: {_short(new)})")
    return f"{_show(recorded)} != {_show(current)}"


def _names(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _short(names: list[str]) -> str:
    more = f", ... ({len(names)} in all)" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more if names else "none"


def _show(value: Any) -> str:
    text = repr(tuple(value)) if isinstance(value, list) else repr(value)
    return text if len(text) <= 120 else text[:116] + " ..."
