"""What a file's columns look like they are, for a drafted spec (:mod:`training.data.draft`).

A column's role (customer, article, time, value, quantity) is guessed from its name, the way a person
reads a header: ``Customer ID``, ``household_key`` and ``user_id`` name customers; ``StockCode``,
``PRODUCT_ID`` and ``sku`` articles; ``InvoiceDate``, ``t_dat`` and ``DAY`` times. Each guess is then
checked against the first values: a time column must read as times (inferred, or in one of the
usual ``strptime`` formats), a value column as numbers.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from training.data.common import DataError, convert_options, open_binary, parse_options, read_options
from training.data.convert import to_text
from training.data.files import CSV, PARQUET, SourceFile
from training.data.sheets import sheet_table
from training.data.sources import first_values
from training.data.times import DAYS_SINCE, time_form

_SAMPLE_ROWS = 2000
_MOST_DISTINCT = 50_000  # distinct times tried against each format (a strided sample beyond)
_ID_SUFFIXES = ("id", "key", "no", "nr", "number", "num", "code", "nummer", "numero", "cod")
# Per role, the words a header uses for it (compared without case, spaces or punctuation), in English
# and the languages back offices most often export in.
ROLE_WORDS = {
    "customer": ("customer", "client", "user", "household", "member", "buyer", "shopper", "account",
                 "cust", "hh", "loyalty", "card", "visitor", "kunde", "kunden", "cliente", "klant"),
    "article": ("article", "product", "item", "sku", "stockcode", "stock", "upc", "ean", "gtin", "asin",
                "prod", "material", "goods", "variant", "artikel", "produit", "producto", "produto",
                "articulo", "articolo"),
    "time": ("date", "time", "timestamp", "datetime", "day", "tdat", "ordered", "created", "purchased",
             "invoicedate", "orderdate", "purchasetimestamp", "datum", "fecha"),
    "amount": ("amount", "sales", "salesvalue", "revenue", "total", "linetotal", "spend", "payment",
               "netsales", "value", "betrag", "umsatz", "montant", "importe", "valor"),
    "price": ("price", "unitprice", "saleprice", "salesprice", "listprice", "preis", "prix", "precio",
              "preco", "prezzo"),
    "quantity": ("quantity", "qty", "units", "pieces", "count", "menge", "anzahl", "quantite",
                 "cantidad", "quantidade", "quantita"),
}
_ENDINGS = {"time": ("date", "time", "timestamp", "datetime", "dt", "datum", "fecha"),
            "price": ("price", "preis", "prix", "precio"), "amount": ("amount", "revenue", "sales", "total",
                                                                     "betrag", "umsatz"),
            "quantity": ("qty", "quantity", "menge")}
_NOT_VALUE = ("freight", "ship", "tax", "disc", "coupon", "deliver", "limit", "approved")
TIME_FORMATS = ("%d/%m/%Y %H:%M", "%m/%d/%Y %H:%M", "%d/%m/%Y %H:%M:%S", "%m/%d/%Y %H:%M:%S",
                "%d/%m/%Y", "%m/%d/%Y", "%d.%m.%Y %H:%M:%S", "%d.%m.%Y %H:%M", "%d.%m.%Y", "%d-%m-%Y",
                "%d-%m-%Y %H:%M:%S", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d", "%d/%m/%y", "%m/%d/%y",
                "%d-%b-%Y", "%d %b %Y", "%b %d, %Y", "%Y-%m-%d %H:%M:%S.%f")
DAY_ORIGIN = "2000-01-01"
_NUMBER = re.compile(r"[-+]?\d[\d.,' ]*")
_NON_POSITIVE = re.compile(r"-\s*\d[\d.,' ]*|[-+]?0[0.,' ]*")
_DECIMAL_COMMA = re.compile(r"^-?\d{1,3}(\.\d{3})*,\d+$|^-?\d+,\d+$")


def normalised(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def role_score(name: str, role: str) -> int:
    """How surely header ``name`` names ``role``: 3 the word itself (``StockCode``), 2 the word and an
    id suffix (``customer_id``, ``household_key``), 1 a name that holds a long word of the role
    (``order_purchase_timestamp``) or ends as the role's names do (``transaction_date``,
    ``item_price``), else 0."""
    key, best = normalised(name), 0
    for word in ROLE_WORDS[role]:
        if key == word:
            return 3
        if any(key == word + suffix for suffix in _ID_SUFFIXES):
            best = 2
        elif len(word) >= 6 and word in key:
            best = max(best, 1)
    if role in _ENDINGS and key.endswith(_ENDINGS[role]) and not any(w in key for w in _NOT_VALUE):
        best = max(best, 1)
    return best


@dataclass
class FileGuess:
    """A file's columns, which role each best fits, and how its text is written.

    Args:
        file: the file.
        columns: its column names.
        roles: per role, the best-fitting column (``None``: none fits).
        time_format: what ``time_format`` the time column needs (``None``: inferred as it is).
        notes: why something was chosen, for the draft's comments.
    """

    file: SourceFile
    columns: list[str]
    roles: dict[str, str | None] = field(default_factory=dict)
    time_format: str | None = None
    notes: list[str] = field(default_factory=list)

    def has(self, *roles: str) -> bool:
        return all(self.roles.get(r) for r in roles)


def guess_encoding(file: SourceFile) -> str:
    """``utf-8`` when the CSV file's first megabyte decodes as UTF-8, else ``cp1252`` (what older
    Windows exports are; it reads any byte, as latin-1 does)."""
    if file.format != CSV:
        return "utf-8"
    with open_binary(file.path) as f:
        block = f.read(1 << 20)
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(block) - 4:  # not merely a character cut at the block's end
            return "cp1252"
    return "utf-8"


def first_text(file: SourceFile, column: str, rows: int) -> tuple[str | None, ...]:
    """About the first ``rows`` values of ``column`` as text, empty ones ``None`` or ``""``, in
    file order (read once while the file is unchanged: several guesses look at the same column)."""
    return _first_text(file, _mtime(file), column, rows)


@lru_cache(maxsize=256)
def _first_text(file: SourceFile, mtime_ns: int, column: str, rows: int) -> tuple[str | None, ...]:
    return tuple(to_text(first_values(file, column, rows)).to_pylist())


def _mtime(file: SourceFile) -> int:
    return file.path.stat().st_mtime_ns


def sample(file: SourceFile, column: str) -> list[str]:
    """The first non-empty values of ``column`` as text."""
    return [v for v in first_text(file, column, _SAMPLE_ROWS) if v not in (None, "")]


def distinct_values(file: SourceFile, column: str) -> tuple[str, ...]:
    """The distinct non-empty values of the whole ``column`` as text (a strided sample of
    :data:`_MOST_DISTINCT` when there are more): the first rows of an export are often one day.
    Read once while the file is unchanged (the time format, the filters and the decimal mark each
    look)."""
    return _distinct_values(file, _mtime(file), column)


@lru_cache(maxsize=64)
def _distinct_values(file: SourceFile, mtime_ns: int, column: str) -> tuple[str, ...]:
    if file.format == PARQUET:
        values = pq.read_table(file.path, columns=[column])[column]
    elif file.format == CSV:
        values = pa_csv.read_csv(file.path, read_options=read_options(encoding=file.encoding),
                                 parse_options=parse_options(file.path, file.encoding),
                                 convert_options=convert_options({column: pa.string()}))[column]
    else:
        values = sheet_table(file.path, file.sheet)[1][column]
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    distinct = [v for v in pc.unique(to_text(values)).to_pylist() if v]
    return tuple(distinct[::max(1, len(distinct) // _MOST_DISTINCT)])


def guess_file(file: SourceFile) -> FileGuess:
    """Each role's column in ``file``, checked against its first values."""
    guess = FileGuess(file, file.columns())
    for role in ROLE_WORDS:
        ranked = sorted(((role_score(c, role), -k, c) for k, c in enumerate(guess.columns)), reverse=True)
        taken = {v for v in guess.roles.values() if v}
        # the first that fits, tried in order (a time's check also sets the file's time_format)
        guess.roles[role] = next((c for score, _, c in ranked
                                  if score > 0 and c not in taken and _fits(guess, role, c)), None)
    return guess


def _fits(guess: FileGuess, role: str, column: str) -> bool:
    if role == "time":
        return _time_fits(guess, column)
    if role in ("amount", "price", "quantity"):
        values = sample(guess.file, column)
        return bool(values) and all(_number(v) for v in values)
    return True


def _number(text: str) -> bool:
    """Whether ``text`` is a number as exports write them (``12.5``, ``12,50``, ``1.234,50``)."""
    return _NUMBER.fullmatch(text.strip()) is not None


def has_non_positive(file: SourceFile, column: str) -> bool:
    """Whether ``column`` holds a zero or a negative number anywhere (returns, free samples)."""
    return any(_NON_POSITIVE.fullmatch(v.strip()) for v in distinct_values(file, column))


def decimal_comma(values: Sequence[str]) -> bool:
    """Whether numbers are written with a decimal comma (``12,50``, ``1.234,5``)."""
    return any(_DECIMAL_COMMA.match(v) for v in values) and not any("." in v and "," not in v for v in values)


def _time_fits(guess: FileGuess, column: str) -> bool:
    try:
        time_form(guess.file, column, None)
        return True
    except DataError as err:
        if "as epoch seconds every line would fall in 1970" in str(err):  # day numbers
            guess.time_format = f"{DAYS_SINCE} {DAY_ORIGIN}"
            guess.notes.append(f"{column} counts days: day 0 is put at {DAY_ORIGIN} (set the real one if "
                               "known)")
            return True
    values = distinct_values(guess.file, column)
    fitting = [f for f in TIME_FORMATS if values and all(_parses(v, f) for v in values)]
    if not fitting:
        return False
    guess.time_format = fitting[0]
    other = fitting[1] if len(fitting) > 1 else ""
    if other.replace("%d", "%D").replace("%m", "%d").replace("%D", "%m") == fitting[0]:
        guess.notes.append(f"{column}: no day above 12 tells day from month; {fitting[0]!r} assumed, "
                           f"{fitting[1]!r} fits too")
    return True


def _parses(value: str, time_format: str) -> bool:
    try:
        dt.datetime.strptime(value.strip(), time_format)
    except ValueError:
        return False
    return True

