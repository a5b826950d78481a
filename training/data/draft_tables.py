"""Which files a drafted spec reads as what (:mod:`training.data.draft`): the purchase lines, an order
header joined to them, attribute files of customers and articles, and the per-customer or per-article
columns of the lines themselves."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from training.data.common import DataError
from training.data.draft_columns import FileGuess, first_text, normalised
from training.data.files import SourceFile

_SAMPLE_ROWS = 20_000
_MOST_VALUES = 1000  # a per-entity column with more distinct values is a name or a text, not a category
_PURCHASE_EVENTS = ("purchase", "purchased", "transaction", "buy", "order", "sale", "checkout")
_FEW = 5  # ids seen more than once needed before a column counts as one value per id
_ID_ENDINGS = ("id", "key", "no", "nr", "number", "code")


@dataclass
class Draft:
    """The tables chosen for a spec.

    Args:
        lines_name: the spec name of the lines file (``file`` of ``[transactions]``).
        lines: its guess.
        roles: the chosen column of each role (``customer``, ``article``, ``time``, ``amount``,
            ``price``, ``quantity``; ``None`` where none).
        time_format: what the time column needs, if anything.
        value_column: ``"amount"``, ``"price"`` or ``None`` (every line counts 1).
        header_name: an order header joined to the lines, or ``None``.
        header: its guess.
        join_on: the column the lines and the header share.
        attributes: per role (``customer``, ``article``), the spec name and guess of its attribute file.
        notes: what the comments should say.
    """

    lines_name: str
    lines: FileGuess
    roles: dict[str, str | None]
    time_format: str | None
    value_column: str | None
    header_name: str | None = None
    header: FileGuess | None = None
    join_on: str | None = None
    attributes: dict[str, tuple[str, FileGuess]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def owner(self, column: str) -> SourceFile:
        """The file that holds ``column`` (the lines', else the header's)."""
        if column in self.lines.columns or self.header is None:
            return self.lines.file
        return self.header.file


def _size(guess: FileGuess) -> int:
    return guess.file.path.stat().st_size


def _complete(found: dict[str, FileGuess]) -> Draft | None:
    """The largest file with a customer, an article and a time of its own."""
    complete = [(name, g) for name, g in found.items() if g.has("customer", "article", "time")]
    if not complete:
        return None
    name, lines = max(complete, key=lambda item: _size(item[1]))
    return Draft(name, lines, dict(lines.roles), lines.time_format, None)


def _joined(found: dict[str, FileGuess]) -> Draft | None:
    """Lines with articles and an order header with the customer (and the time), sharing a key."""
    best = None
    for name, lines in found.items():
        for header_name, header in found.items():
            if header_name == name or not lines.has("article") or not header.has("customer"):
                continue
            if not (header.has("time") or lines.has("time")):
                continue
            used = {c for g in (lines, header) for c in g.roles.values() if c}
            shared = [c for c in lines.columns if c in header.columns and c not in used]
            if not shared:
                continue
            on = max(shared, key=lambda c: normalised(c).endswith(_ID_ENDINGS))
            if best is None or _size(lines) > _size(best.lines):
                timed = header if header.has("time") else lines
                roles = {**lines.roles, "customer": header.roles["customer"], "time": timed.roles["time"]}
                best = Draft(name, lines, roles, timed.time_format, None, header_name, header, on)
    return best


def choose_tables(found: dict[str, FileGuess]) -> Draft:
    """The lines (joined to an order header if they lack the customer), the value, and the attribute
    files: any other file holding the customer's or the article's column by the same name.

    Raises:
        DataError: no file holds (or joins into) a customer, an article and a time.
    """
    draft = _complete(found) or _joined(found)
    if draft is None:
        seen = "; ".join(f"{name}: " + (", ".join(f"{r} {c!r}" for r, c in g.roles.items() if c) or "no role")
                         for name, g in found.items()) or "no table file"
        raise DataError(f"no file holds (or joins into) a customer, an article and a time column ({seen}): "
                        "write the spec by hand (docs/dataset-spec.md)")
    draft.value_column = next((r for r in ("amount", "price") if draft.roles.get(r)), None)
    draft.notes += [*draft.lines.notes, *(draft.header.notes if draft.header else [])]
    taken = {draft.lines_name, draft.header_name}
    for role in ("customer", "article"):
        column = draft.roles[role]
        holders = [(n, g) for n, g in found.items()
                   if n not in taken and column in g.columns and len(g.columns) > 1]
        if holders:
            draft.attributes[role] = holders[0]
            taken.add(holders[0][0])
            if len(holders) > 1:
                draft.notes.append(f"{role} features from {holders[0][0]}; "
                                   f"{', '.join(n for n, _ in holders[1:])} also hold {column}")
    return draft


def derived_features(file: SourceFile, entity: str, roles: dict[str, str | None]) -> list[str]:
    """Columns of the lines that hold one value per ``entity`` (a customer's country, an article's
    department) in the first rows: categories to derive that table's features from."""
    used = {c for c in roles.values() if c}
    ids = first_text(file, entity, _SAMPLE_ROWS)
    repeated = {i for i, n in Counter(ids).items() if i and n > 1}
    features = []
    for column in file.columns():
        if column in used or column == entity:
            continue
        values = first_text(file, column, _SAMPLE_ROWS)
        per_id: dict[str, set] = {}
        for i, v in zip(ids, values, strict=False):
            if i in repeated and v:
                per_id.setdefault(i, set()).add(v)
        distinct = {v for v in values if v}
        single = sum(len(s) == 1 for s in per_id.values())
        if len(per_id) >= _FEW and single >= 0.95 * len(per_id) and 2 <= len(distinct) <= _MOST_VALUES:
            features.append(column)
    return features


def purchase_event(file: SourceFile, roles: dict[str, str | None]) -> tuple[str, str] | None:
    """``(column, value)`` when the lines are an event log (views, carts and purchases in one
    column, as a web shop's tracking export has them): the value that marks a purchase."""
    used = {c for c in roles.values() if c}
    for column in file.columns():
        if column in used:
            continue
        values = {v for v in first_text(file, column, _SAMPLE_ROWS) if v}
        if not 2 <= len(values) <= 20:
            continue
        marks = [v for v in values if normalised(v) in _PURCHASE_EVENTS]
        if len(marks) == 1:
            return column, marks[0]
    return None
