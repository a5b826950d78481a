"""Draft a dataset spec from a directory of a shop's files: ``python -m training.data.draft --data DIR``.

Reads every table in ``DIR`` (:mod:`training.data.draft_files`: top level, one folder down, the
members of each zip; files side by side with the same columns as the parts of one table), guesses
which holds the purchase lines and which columns are the customer, the article, the time and the
value (:mod:`training.data.draft_columns`), joins an order header when the lines lack the customer,
takes attribute files that share the customer or article column as partial tables, keeps an event
log's purchases (:mod:`training.data.draft_tables`), and writes ``DIR/relserve.toml`` with a comment
on every guess. Then it loads the data through the draft and prints what it holds, so a wrong guess
shows at once. A draft is a start, not an answer: read it (docs/dataset-spec.md) before training.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

from models.cli import OneLineErrors
from training.data.common import DataError
from training.data.draft_columns import (
    FileGuess,
    decimal_comma,
    distinct_values,
    guess_encoding,
    guess_file,
    has_non_positive,
)
from training.data.draft_files import table_files
from training.data.draft_tables import choose_tables, derived_features, purchase_event
from training.data.files import SHEET, SourceFile, resolve_files
from training.data.load import load_tables
from training.data.sheets import sheet_names
from training.data.spec import FileOptions
from training.data.spec_file import SPEC_FILE


def guesses(data_dir: Path) -> tuple[dict[str, FileGuess], list[str]]:
    """Each table file's :class:`FileGuess` by its spec name, read in its own encoding; and notes on
    files that could not be read."""
    out, notes = {}, []
    for name, files in table_files(data_dir):
        try:
            encoding = guess_encoding(files[0])
            if encoding != "utf-8":
                files = resolve_files(data_dir, name, FileOptions(encoding=encoding))
            out[name] = guess_file(files[0])
            if files[0].format == SHEET and len(sheets := sheet_names(files[0].path)) > 1:
                listed = ", ".join(map(repr, sheets))
                notes.append(f"{name} has {len(sheets)} sheets ({listed}): the first is read; name another "
                             "with sheet = \"...\" in its table")
        except DataError as err:
            notes.append(f"skipped {name}: {err}")
    return out, notes


def draft_spec(data_dir: Path) -> str:
    """The drafted spec's TOML text for the files in ``data_dir``.

    Raises:
        DataError: no file holds (or joins into) customers, articles and times.
    """
    found, notes = guesses(data_dir)
    draft = choose_tables(found)
    lines, value_column = draft.lines, draft.value_column
    filters = [f"{draft.roles['customer']} != null", f"{draft.roles['article']} != null"]
    event = purchase_event(lines.file, draft.roles)
    if event is not None:
        filters.insert(0, f"{event[0]} == '{event[1]}'")
        draft.notes.append(f"{draft.lines_name} reads as an event log: only its {event[0]} == '{event[1]}' "
                           "lines are kept as purchases")
    for role in ("quantity", value_column):
        column = draft.roles.get(role) if role else None
        if column and has_non_positive(draft.owner(column), column):
            filters.append(f"{column} > 0")
    out = [f"# Drafted by `python -m training.data.draft` on {dt.date.today()} from this folder's files.",
           "# Every choice is a guess from the column names and first values: check each one",
           "# (docs/dataset-spec.md), then: python -m training.fit --data THIS_FOLDER --task all --out OUT",
           *(f"# Note: {n}" for n in [*notes, *draft.notes]), "", "[transactions]",
           _kv("file", draft.lines_name)]
    for key in ("customer", "article", "time"):
        out.append(_kv(key, draft.roles[key]))
    if draft.time_format:
        out.append(_kv("time_format", draft.time_format))
    if value_column:
        out.append(_kv(value_column, draft.roles[value_column]))
        if value_column == "price" and draft.roles.get("quantity"):
            out.append(_kv("quantity", draft.roles["quantity"]) + "   # a line's value = price x quantity")
    else:
        out.append("# no price or amount column found: every line counts 1 (sales cannot train)")
    value = draft.roles.get(value_column or "")
    out += _file_options(lines.file, value if value in lines.columns else None)
    out.append("filter = [" + ", ".join(json.dumps(f) for f in filters) + "]   # lines a model cannot use")
    if draft.header is not None:
        encoding = draft.header.file.encoding
        extra = f", encoding = {json.dumps(encoding)}" if encoding != "utf-8" else ""
        table = f"file = {json.dumps(draft.header_name)}, on = {json.dumps(draft.join_on)}{extra}"
        out.append(f"join = [{{ {table} }}]   # the order header: its customer and time")
    for section, role in (("customers", "customer"), ("articles", "article")):
        out += ["", f"[{section}]", _kv("from", "transactions")]
        attribute = draft.attributes.get(role)
        if attribute is not None:
            out += [_kv("file", attribute[0]) + "   # its features where it has the id",
                    _kv("id", draft.roles[role])]
            out += _file_options(found[attribute[0]].file, None)
        else:
            features = derived_features(draft.owner(draft.roles[role]), draft.roles[role], draft.roles)
            if features:
                out.append("features = [" + ", ".join(map(json.dumps, features)) + "]   # one value per "
                           f"{role} in the lines: its most frequent")
    return "\n".join(out) + "\n"


def _kv(key: str, value: str) -> str:
    return f"{key} = {json.dumps(value, ensure_ascii=False)}"


def _file_options(file: SourceFile, value_column: str | None) -> list[str]:
    options = []
    if file.encoding != "utf-8":
        options.append(_kv("encoding", file.encoding) + "   # not UTF-8 text")
    if value_column and decimal_comma(distinct_values(file, value_column)[:2000]):
        options.append(_kv("decimal", ",") + "   # numbers like 12,50")
    return options


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = OneLineErrors(prog="python -m training.data.draft",
                           description="Draft DATA/relserve.toml from a shop's files, then load the data "
                                       "through it and say what it holds.")
    parser.add_argument("--data", type=Path, required=True, help="the folder of the shop's files")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"where to write the draft (default: DATA/{SPEC_FILE})")
    parser.add_argument("--force", action="store_true", help="replace an existing spec file")
    args = parser.parse_args(argv)
    out = args.out or args.data / SPEC_FILE
    if not args.data.is_dir():
        what = "not a directory" if args.data.exists() else "no such directory"
        parser.exit(1, f"{parser.prog}: error: --data {args.data}: {what}\n")
    if out.exists() and not args.force:
        parser.exit(1, f"{parser.prog}: error: {out} exists: pass --force to replace it, or write the "
                       "draft elsewhere with --out\n")
    try:
        text = draft_spec(args.data)
    except DataError as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    out.write_text(text)
    print(text, end="")
    print(f"\nwrote {out}; loading the data through it ...", flush=True)
    try:
        tables = load_tables(args.data, progress=True, spec=out)
    except DataError as exc:
        parser.exit(1, f"{parser.prog}: error: the draft does not load yet ({exc}): edit {out}\n")
    days = tables.transactions.day
    first, last = (dt.date(1970, 1, 1) + dt.timedelta(days=int(d)) for d in (days.min(), days.max()))
    print(f"{len(days):,} lines, {len(tables.customers.ids):,} customers, {len(tables.articles.ids):,} "
          f"articles, {first} .. {last}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
