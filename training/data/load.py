"""Load a dataset, as its spec describes it, into typed, indexed :class:`models.store.tables.RelTables`.

The spec (:mod:`training.data.spec`) is ``DIR/relserve.toml`` when the data directory has one,
else the built-in Kaggle H&M layout (``customers.csv``, ``articles.csv``, ``transactions_train.csv``).
A customers or articles table is a file of its own, derived from the transactions, or partial (the
transactions' ids, a file's features where it has them: :mod:`training.data.partial`).
Every id is read as text (``article_id`` ``0108775015`` keeps its leading zero), entity rows are
sorted by id so that an id's dense index is its rank, and the transactions refer to customers and
articles by those indices. Bad input raises :class:`DataError` with one message naming the file,
the line or column, and the problem.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from models.store.tables import NodeTable, RelTables
from training.data.common import DataError
from training.data.derive import derive_entities
from training.data.lines import value_note
from training.data.nodes import read_entities
from training.data.spec import HM_SPEC, DatasetSpec
from training.data.spec_file import SpecError, find_spec
from training.data.transactions import UnknownReferences, read_purchases

__all__ = ["DataError", "SpecError", "UnknownReferenceWarning", "UnknownReferences", "load_tables"]


class UnknownReferenceWarning(UserWarning):
    """Transactions naming unknown customers or articles were dropped (``strict=False``).

    Args:
        message: the one-line description.
        references: the counts, also as attribute ``references``.
    """

    def __init__(self, message: str, references: UnknownReferences) -> None:
        super().__init__(message)
        self.references = references


def load_tables(data_dir: Path, progress: bool = True, strict: bool = True,
                spec: DatasetSpec | Path | None = None) -> RelTables:
    """Read the dataset in ``data_dir``.

    Args:
        data_dir: the data directory; the spec's file names are under it.
        progress: show a tqdm bar per table on stderr, and the notes (skipped columns, what a
            line's value is).
        strict: a transaction naming an unknown customer or article is an error; if ``False`` such
            rows are dropped with an :class:`UnknownReferenceWarning` carrying the counts.
        spec: the spec, or a spec file; ``None``: ``data_dir/relserve.toml`` if present, else the
            H&M layout (see :func:`training.data.spec_file.find_spec`).

    Returns:
        Customers and articles as :class:`models.store.tables.NodeTable` (ids ``S<w>``, ``w`` the
        longest id, sorted), transactions as :class:`models.store.tables.Transactions` in file order.

    Raises:
        DataError: a bad spec (:class:`SpecError`), a missing file or column, a file without rows, an
            empty, too long or repeated id, a time or number that does not parse, or (``strict``) an
            unknown reference.
    """
    data_dir = Path(data_dir)
    if not isinstance(spec, DatasetSpec):
        spec = find_spec(data_dir, spec)
    note = _notes(progress)
    if spec is not HM_SPEC:
        note(value_note(spec.transactions))
    derived = derive_entities(data_dir, spec, note, progress) if _any_derived(spec) else {}
    nodes: dict[str, NodeTable] = {}
    for node in (spec.customers, spec.articles):
        nodes[node.table] = (derived[node.table] if node.ids_from_transactions
                             else read_entities(data_dir, node, note, progress))
    transactions, unknown = read_purchases(data_dir, spec.transactions, nodes["customers"], nodes["articles"],
                                           strict, progress, note)
    if unknown:
        warnings.warn(
            UnknownReferenceWarning(f"{unknown.message()}; dropped {unknown.rows_dropped} rows", unknown),
            stacklevel=2,
        )
    return RelTables(customers=nodes["customers"], articles=nodes["articles"], transactions=transactions)


def _any_derived(spec: DatasetSpec) -> bool:
    return spec.customers.ids_from_transactions or spec.articles.ids_from_transactions


def _notes(progress: bool) -> Callable[[str], None]:
    def note(line: str) -> None:
        if progress:
            print(f"relserve data: {line}", file=sys.stderr, flush=True)

    return note
