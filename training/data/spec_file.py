"""Read and validate a dataset spec file (TOML): every problem is one line naming the table and key.

``relserve.toml: [transactions] unknown key 'custmer' (did you mean 'customer'?)``. The format is
documented in docs/dataset-spec.md; :func:`find_spec` picks the spec of a data directory.
"""

from __future__ import annotations

import codecs
import difflib
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from models.schema import MAX_ID_BYTES
from training.data.archives import is_archive
from training.data.common import UTF8, DataError
from training.data.conditions import ConditionError, parse_condition
from training.data.files import known_format
from training.data.spec import (
    AUTO,
    FEATURE_TYPES,
    FROM_TRANSACTIONS,
    HM_SPEC,
    DatasetSpec,
    Feature,
    FileOptions,
    JoinSpec,
    NodeSpec,
    TransactionsSpec,
)
from training.data.times import DAYS_SINCE, formatted

SPEC_FILE = "relserve.toml"
_TRANSACTION_KEYS = ("file", "customer", "article", "time", "time_format", "price", "amount", "quantity",
                     "channel", "sheet", "encoding", "decimal", "filter", "join")
_FILE_KEYS = ("sheet", "encoding", "decimal")  # FileOptions
_JOIN_KEYS = ("file", "on", "id", *_FILE_KEYS)
_REQUIRED = ("file", "customer", "article", "time")
_NODE_KEYS = ("file", "from", "id", "features", "max_id_bytes", "time_format", *_FILE_KEYS)
_TABLES = ("transactions", "customers", "articles")


class SpecError(DataError):
    """The spec file is not valid; the message is one line naming the file, the table and the key."""


def find_spec(data_dir: Path, spec_file: Path | None = None) -> DatasetSpec:
    """The spec of ``data_dir``: ``spec_file`` if given, else ``data_dir/relserve.toml`` if present,
    else the built-in H&M layout.

    Raises:
        SpecError: the spec file is missing or invalid.
    """
    if spec_file is None:
        spec_file = Path(data_dir) / SPEC_FILE
        if not spec_file.is_file():
            _check_hm_layout(Path(data_dir))
            return HM_SPEC
    return read_spec(spec_file)


def _check_hm_layout(data_dir: Path) -> None:
    """:class:`SpecError` with the way forward when ``data_dir`` holds table files but none of the
    H&M layout's, which is what a directory without a spec is read as: a shop's own files, whose spec
    is not written yet."""
    names = {p.name for p in data_dir.iterdir()} if data_dir.is_dir() else set()
    hm = {name for t in (HM_SPEC.transactions, HM_SPEC.customers, HM_SPEC.articles) if (name := t.file)}
    if not names or any(n in names or f"{n}.gz" in names for n in hm):
        return
    if any(known_format(n) or is_archive(n) for n in names):
        raise SpecError(f"--data {data_dir}: no {SPEC_FILE} says which files and columns to read, and "
                        f"these are not the H&M layout ({', '.join(sorted(hm))}): draft one with "
                        f"`python -m training.data.draft --data {data_dir}` (then check it), or write it "
                        "(docs/dataset-spec.md)")


def read_spec(path: Path) -> DatasetSpec:
    """Parse and validate the spec file ``path``."""
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise SpecError(f"{path}: cannot read the spec ({err.strerror})") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path.name}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path.name}: not valid TOML: {err}") from None
    return parse_spec(document, path.name, path)


def parse_spec(document: Mapping[str, Any], origin: str, path: Path | None = None) -> DatasetSpec:
    """Validate a parsed TOML document; ``origin`` (the file name) starts every message.

    Args:
        document: what ``tomllib`` read.
        origin: the spec's name in messages.
        path: the spec file, recorded in the spec.
    """
    _known_keys(origin, "", document, _TABLES, table_word=True)
    if "transactions" not in document:
        raise SpecError(f"{origin}: missing required table [transactions]")
    tables = {name: _table(origin, name, document.get(name, {})) for name in _TABLES}
    transactions = _transactions(origin, tables["transactions"])
    return DatasetSpec(
        transactions=transactions,
        customers=_node(origin, "customers", tables["customers"], transactions.customer),
        articles=_node(origin, "articles", tables["articles"], transactions.article),
        origin=origin,
        path=path,
    )


def _table(origin: str, name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(f"{origin}: {name} must be a table [{name}], got {value!r}")
    return value


def _known_keys(origin: str, where: str, table: Mapping[str, Any], known: tuple[str, ...],
                table_word: bool = False) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            if table_word:
                hint = f" (did you mean [{close[0]}]?)" if close else f"; tables: {', '.join(known)}"
                raise SpecError(f"{origin}: unknown table [{key}]{hint}")
            hint = f" (did you mean {close[0]!r}?)" if close else f"; keys: {', '.join(known)}"
            raise SpecError(f"{origin}: {where} unknown key {key!r}{hint}")


def _text(origin: str, where: str, table: Mapping[str, Any], key: str, required: bool = False) -> str | None:
    if key not in table:
        if required:
            raise SpecError(f"{origin}: {where} missing required key {key!r}")
        return None
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{origin}: {where} {key}: must be a non-empty string, got {value!r}")
    return value


def _transactions(origin: str, table: Mapping[str, Any]) -> TransactionsSpec:
    where = "[transactions]"
    _known_keys(origin, where, table, _TRANSACTION_KEYS)
    text = {key: _text(origin, where, table, key, key in _REQUIRED) for key in _TRANSACTION_KEYS
            if key not in (*_FILE_KEYS, "filter", "join")}
    if text["price"] and text["amount"]:
        raise SpecError(f"{origin}: {where} give price (unit price) or amount (line total), not both")
    if text["quantity"] and not text["price"]:
        raise SpecError(f"{origin}: {where} quantity needs price (a unit price); an amount is already "
                        "the line total")
    _time_format(origin, where, table)
    conditions = table.get("filter", [])
    if not isinstance(conditions, list) or not all(isinstance(c, str) for c in conditions):
        raise SpecError(f"{origin}: {where} filter: must be a list of conditions such as "
                        f"[\"Quantity > 0\"], got {conditions!r}")
    parsed = []
    for k, condition in enumerate(conditions):
        try:
            parsed.append(parse_condition(condition))
        except ConditionError as err:
            raise SpecError(f"{origin}: {where} filter[{k}]: {err}") from None
    return TransactionsSpec(**text, filter=tuple(parsed), join=_joins(origin, where, table.get("join", [])),
                            options=_file_options(origin, where, table))


def _file_options(origin: str, where: str, table: Mapping[str, Any]) -> FileOptions:
    encoding = _text(origin, where, table, "encoding") or UTF8
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise SpecError(f"{origin}: {where} encoding: unknown text encoding {encoding!r} (e.g. 'utf-8', "
                        "'latin-1', 'cp1252')") from None
    decimal = _text(origin, where, table, "decimal") or "."
    if decimal not in (".", ","):
        raise SpecError(f"{origin}: {where} decimal: the decimal mark must be \".\" or \",\", "
                        f"got {decimal!r}")
    return FileOptions(encoding, _text(origin, where, table, "sheet"), decimal)


def _joins(origin: str, where: str, value: Any) -> tuple[JoinSpec, ...]:
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(j, Mapping) for j in value):
        raise SpecError(f"{origin}: {where} join: must be a list of tables such as "
                        f"[{{ file = \"orders.csv\", on = \"order_id\" }}], got {value!r}")
    joins = []
    for k, join in enumerate(value):
        at = f"{where} join[{k}]"
        _known_keys(origin, at, join, _JOIN_KEYS)
        file, on = _text(origin, at, join, "file", True), _text(origin, at, join, "on", True)
        joins.append(JoinSpec(file, on, _text(origin, at, join, "id") or on, _file_options(origin, at, join)))
    return tuple(joins)


def _node(origin: str, name: str, table: Mapping[str, Any], role_column: str) -> NodeSpec:
    where = f"[{name}]"
    _known_keys(origin, where, table, _NODE_KEYS)
    source = _text(origin, where, table, "from")
    file = _text(origin, where, table, "file")
    if source is not None and source != FROM_TRANSACTIONS:
        raise SpecError(f"{origin}: {where} from: must be \"{FROM_TRANSACTIONS}\", got {source!r}")
    if file is not None and source is not None and "id" not in table:
        raise SpecError(f"{origin}: {where} from = \"transactions\" with a file needs id (the file's id "
                        "column): the ids are the transactions', the features the file's where it has them")
    if table and file is None and source is None:
        raise SpecError(f"{origin}: {where} missing required key 'file' (or from = \"transactions\")")
    if file is None and "id" in table:
        raise SpecError(f"{origin}: {where} id: a derived table's id is the transactions' column "
                        f"{role_column!r}; leave id out")
    id_column = _text(origin, where, table, "id", required=file is not None) or role_column
    limit = table.get("max_id_bytes", MAX_ID_BYTES)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ID_BYTES:
        raise SpecError(f"{origin}: {where} max_id_bytes: must be an integer 1..{MAX_ID_BYTES}, "
                        f"got {limit!r}")
    features = _features(origin, where, table["features"], id_column) if "features" in table else None
    time_format = _time_format(origin, where, table)
    return NodeSpec(name, file, id_column, features, limit, time_format=time_format,
                    ids_from_transactions=file is None or source is not None,
                    options=_file_options(origin, where, table))


def _time_format(origin: str, where: str, table: Mapping[str, Any]) -> str | None:
    value = _text(origin, where, table, "time_format")
    if value is not None and value.strip().startswith(DAYS_SINCE):
        try:
            formatted(value)  # integer day numbers: the date of day 0 must parse
        except DataError as e:
            raise SpecError(f"{origin}: {where} {e}") from None
    elif value is not None and "%" not in value:
        raise SpecError(f"{origin}: {where} time_format: must be a strptime format such as '%Y-%m-%d "
                        f"%H:%M', or 'days since YYYY-MM-DD' for integer day numbers, got {value!r}")
    return value


def _features(origin: str, where: str, value: Any, id_column: str) -> tuple[Feature, ...]:
    if isinstance(value, list) and all(isinstance(c, str) and c for c in value):
        pairs = [(column, AUTO) for column in value]
        if len(set(value)) < len(value):
            repeated = next(c for c in value if value.count(c) > 1)
            raise SpecError(f"{origin}: {where} features: {repeated!r} is listed twice")
    elif isinstance(value, Mapping):
        pairs = list(value.items())
    else:
        raise SpecError(f"{origin}: {where} features: must be a list of columns or a table column = type, "
                        f"got {value!r}")
    for column, kind in pairs:
        if kind != AUTO and kind not in FEATURE_TYPES:
            raise SpecError(f"{origin}: {where} features.{column}: type must be one of "
                            f"{', '.join(FEATURE_TYPES)} (or {AUTO}), got {kind!r}")
        if column == id_column:
            raise SpecError(f"{origin}: {where} features.{column}: the id column is not a feature")
    return tuple(Feature(column, kind) for column, kind in pairs)
