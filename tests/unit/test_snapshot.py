"""GraphSnapshot: build/open round trip, zero-copy opening, fingerprint, and corrupt directories."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.schema import ARTICLE, CUSTOMER, NODE_TYPES, day_number
from models.store.snapshot import GraphSnapshot, SnapshotError
from models.store.tables import RelTables
from training.data.load import load_tables
from training.synth.cli import SynthConfig, generate
from training.synth.tables import SyntheticSize, synthetic_tables

SMALL = SyntheticSize(num_customers=80, num_articles=30, num_transactions=2000, num_days=25)


@pytest.fixture(scope="module")
def tables() -> RelTables:
    return synthetic_tables(SMALL, seed=1)


@pytest.fixture(scope="module")
def snapshot_dir(tables: RelTables, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("snapshot")
    GraphSnapshot.build(tables, directory, progress=False)
    return directory


@pytest.fixture
def snapshot_copy(snapshot_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(snapshot_dir, tmp_path / "copy"))


def test_node_tables_round_trip(tables: RelTables, snapshot_dir: Path) -> None:
    snapshot = GraphSnapshot.open(snapshot_dir)
    for node_type, table in ((CUSTOMER, tables.customers), (ARTICLE, tables.articles)):
        np.testing.assert_array_equal(snapshot.ids[node_type], table.ids)
        np.testing.assert_array_equal(snapshot.categorical[node_type].numpy(), table.categorical)
        np.testing.assert_array_equal(snapshot.numeric[node_type].numpy(), table.numeric)
        assert snapshot.categorical_names[node_type] == table.categorical_names
        assert snapshot.numeric_names[node_type] == table.numeric_names
        assert snapshot.cardinalities[node_type] == table.cardinalities
        assert snapshot.num_nodes[node_type] == len(table)


def test_meta_times(tables: RelTables, snapshot_dir: Path) -> None:
    snapshot = GraphSnapshot.open(snapshot_dir)
    assert snapshot.min_day == tables.transactions.day.min()
    assert snapshot.max_day == tables.transactions.day.max()
    assert snapshot.end_time == snapshot.max_day + 1
    assert snapshot.num_transactions == len(tables.transactions)


def test_transactions_round_trip_customer_major(tables: RelTables, snapshot_dir: Path) -> None:
    got = GraphSnapshot.open(snapshot_dir).transactions()
    want = tables.transactions
    assert np.all(np.diff(got.customer) >= 0)
    same_customer = got.customer[1:] == got.customer[:-1]
    assert np.all(got.day[1:][same_customer] >= got.day[:-1][same_customer])
    key = lambda t: np.lexsort((t.price, t.day, t.article, t.customer))  # noqa: E731
    for column in ("customer", "article", "day", "price"):
        np.testing.assert_array_equal(getattr(got, column)[key(got)], getattr(want, column)[key(want)])


@pytest.mark.parametrize("src_type", NODE_TYPES)
def test_adjacency_rows_sorted_by_day_ties_in_input_order(
    tables: RelTables, snapshot_dir: Path, src_type: str
) -> None:
    tx = tables.transactions
    src, dst = (tx.customer, tx.article) if src_type == CUSTOMER else (tx.article, tx.customer)
    rows: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for position, (s, d, day) in enumerate(zip(src.tolist(), dst.tolist(), tx.day.tolist(), strict=True)):
        rows[s].append((day, position, d))
    dst_type = ARTICLE if src_type == CUSTOMER else CUSTOMER
    csr = GraphSnapshot.open(snapshot_dir).adjacency[(src_type, dst_type)]
    rowptr, col, day = csr.rowptr.tolist(), csr.col.tolist(), csr.day.tolist()
    for node in range(len(rowptr) - 1):
        want = sorted(rows[node])
        got = list(zip(day[rowptr[node]:rowptr[node + 1]], col[rowptr[node]:rowptr[node + 1]], strict=True))
        assert got == [(d, n) for d, _, n in want]


def test_lookup(tables: RelTables, snapshot_dir: Path) -> None:
    snapshot = GraphSnapshot.open(snapshot_dir)
    ids = [tables.articles.ids[7].decode(), tables.articles.ids[0], "0000000000", "not an id at all"]
    np.testing.assert_array_equal(snapshot.lookup(ARTICLE, ids), [7, 0, -1, -1])


def test_open_memory_maps_instead_of_copying(snapshot_copy: Path) -> None:
    snapshot = GraphSnapshot.open(snapshot_copy)
    assert isinstance(snapshot.ids[CUSTOMER], np.memmap)
    before = int(snapshot.adjacency[(CUSTOMER, ARTICLE)].day[5])
    on_disk = np.load(snapshot_copy / "customer_article.day.npy", mmap_mode="r+")
    on_disk[5] = before + 1000
    on_disk.flush()
    # The tensor sees a write made to the file after opening: it is a view of the mapping.
    assert int(snapshot.adjacency[(CUSTOMER, ARTICLE)].day[5]) == before + 1000
    with pytest.raises(SnapshotError, match="fingerprint"):
        snapshot.verify()


def test_verify_accepts_untouched_snapshot(snapshot_dir: Path) -> None:
    GraphSnapshot.open(snapshot_dir).verify()


def test_fingerprint_is_deterministic_and_content_sensitive(tables: RelTables, tmp_path: Path) -> None:
    base = GraphSnapshot.build(tables, tmp_path / "a", progress=False)
    assert GraphSnapshot.build(tables, tmp_path / "b", progress=False).fingerprint == base.fingerprint
    changes = {
        "price": lambda t: t.transactions.price.__setitem__(3, t.transactions.price[3] + 0.01),
        "category": lambda t: t.articles.categorical.__setitem__((2, 1), t.articles.categorical[2, 1] + 1),
        "name": lambda t: setattr(t.customers, "numeric_names", ("a", "b")),
    }
    for name, change in changes.items():
        changed = synthetic_tables(SMALL, seed=1)
        change(changed)
        other = GraphSnapshot.build(changed, tmp_path / name, progress=False)
        assert other.fingerprint != base.fingerprint, name


def _rewrite_meta(directory: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    meta = json.loads((directory / "meta.json").read_text())
    edit(meta)
    (directory / "meta.json").write_text(json.dumps(meta))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


CORRUPTIONS = {
    "missing meta": ("meta.json", lambda d: (d / "meta.json").unlink()),
    "invalid meta json": ("meta.json", lambda d: (d / "meta.json").write_text("{not json")),
    "wrong format version": ("meta.json", lambda d: _rewrite_meta(d, lambda m: m.update(format_version=99))),
    "meta without counts": ("meta.json", lambda d: _rewrite_meta(d, lambda m: m.pop("num_nodes"))),
    "cardinalities disagree": ("meta.json", lambda d: _rewrite_meta(
        d, lambda m: m["features"]["article"]["cardinalities"].pop())),
    "missing array": ("customer_article.col.npy", lambda d: (d / "customer_article.col.npy").unlink()),
    "truncated array": ("article_customer.day.npy", lambda d: _truncate(d / "article_customer.day.npy")),
    "garbage header": ("customer.ids.npy", lambda d: (d / "customer.ids.npy").write_bytes(b"garbage" * 20)),
    "empty file": ("article.numeric.npy", lambda d: (d / "article.numeric.npy").write_bytes(b"")),
    "wrong shape": ("customer_article.price.npy",
                    lambda d: np.save(d / "customer_article.price.npy", np.zeros(3, np.float32))),
    "wrong dtype": ("article_customer.col.npy", lambda d: np.save(
        d / "article_customer.col.npy", np.load(d / "article_customer.col.npy").astype(np.int64))),
    "count disagrees": ("customer.ids.npy",
                        lambda d: _rewrite_meta(d, lambda m: m["num_nodes"].update(customer=81))),
    "bad row pointers": ("customer_article.rowptr.npy", lambda d: np.save(
        d / "customer_article.rowptr.npy", np.load(d / "customer_article.rowptr.npy") + 1)),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupt_snapshot_raises_one_line_naming_the_file(snapshot_copy: Path, case: str) -> None:
    filename, corrupt = CORRUPTIONS[case]
    corrupt(snapshot_copy)
    with pytest.raises(SnapshotError) as info:
        GraphSnapshot.open(snapshot_copy)
    message = str(info.value)
    assert filename in message
    assert "\n" not in message


def test_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no such directory"):
        GraphSnapshot.open(tmp_path / "nowhere")


def test_snapshot_error_is_a_value_error() -> None:
    assert issubclass(SnapshotError, ValueError)


def test_build_rejects_broken_tables(tmp_path: Path) -> None:
    unsorted = synthetic_tables(SMALL, seed=2)
    unsorted.articles.ids = unsorted.articles.ids[::-1].copy()
    with pytest.raises(ValueError, match="sorted"):
        GraphSnapshot.build(unsorted, tmp_path / "a", progress=False)
    out_of_range = synthetic_tables(SMALL, seed=2)
    out_of_range.transactions.article[0] = SMALL.num_articles
    with pytest.raises(ValueError, match="out of range"):
        GraphSnapshot.build(out_of_range, tmp_path / "b", progress=False)


def test_rejected_rebuild_leaves_the_old_snapshot_intact(snapshot_copy: Path) -> None:
    before = GraphSnapshot.open(snapshot_copy).fingerprint
    broken = synthetic_tables(SMALL, seed=2)
    broken.transactions.customer[0] = -1
    with pytest.raises(ValueError, match="out of range"):
        GraphSnapshot.build(broken, snapshot_copy, progress=False)
    reopened = GraphSnapshot.open(snapshot_copy)
    assert reopened.fingerprint == before
    reopened.verify()


def test_snapshot_of_generated_csvs(tmp_path: Path) -> None:
    """The real path: generator CSVs -> load_tables -> snapshot, ids and purchases intact."""
    summary = generate(SynthConfig(customers=300, articles=60, days=60), tmp_path / "csv")
    tables = load_tables(tmp_path / "csv", progress=False)
    snapshot = GraphSnapshot.build(tables, tmp_path / "snapshot", progress=False)
    assert snapshot.num_transactions == summary.transactions > 0
    assert snapshot.end_time == day_number(summary.last_date) + 1
    np.testing.assert_array_equal(snapshot.ids[ARTICLE], tables.articles.ids)
    got, want = snapshot.transactions(), tables.transactions
    for column in ("customer", "article", "day"):
        np.testing.assert_array_equal(np.sort(getattr(got, column)), np.sort(getattr(want, column)))
