"""Ids as they are: integers, UUIDs, SKUs with letters and unicode round-trip through the snapshot."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from models.schema import ARTICLE, CUSTOMER, MAX_ID_BYTES
from models.store.ids import id_bytes, ids_text, lookup_sorted
from models.store.snapshot import GraphSnapshot
from models.store.tables import NodeTable, RelTables
from training.synth.tables import SyntheticSize, synthetic_tables

SIZE = SyntheticSize(num_customers=60, num_articles=24, num_transactions=900, num_days=20)
LONGEST = "é" * (MAX_ID_BYTES // 2)  # 128 bytes in 64 characters


def odd_ids(count: int, seed: int) -> list[str]:
    """``count`` distinct ids of every shape: integers, UUIDs, SKUs, unicode, punctuation, the longest."""
    rng = np.random.default_rng(seed)
    fixed = ["13085", "85123A", "POST", "Müller, Anna", 'say "hi"', "客户-7", "\U0001f600", LONGEST, "0042"]
    numbers = [str(n) for n in rng.choice(np.arange(10_000, 99_999), count, replace=False)]
    uuids = [str(uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | i)) for i in range(count)]
    skus = [f"{rng.integers(10_000, 99_999)}{chr(65 + i % 26)}" for i in range(count)]
    pool = list(dict.fromkeys(fixed + [x for trio in zip(numbers, uuids, skus, strict=True) for x in trio]))
    return pool[:count]


def relabelled(table: NodeTable, ids: list[str]) -> NodeTable:
    """``table`` with ``ids`` (sorted bytewise, as the loader stores them) in place of its own."""
    stored = np.array(sorted(i.encode() for i in ids))
    return NodeTable(stored, table.categorical, table.numeric, table.categorical_names, table.numeric_names,
                     table.cardinalities)


@pytest.fixture(scope="module")
def tables() -> RelTables:
    base = synthetic_tables(SIZE, seed=3)
    return RelTables(relabelled(base.customers, odd_ids(SIZE.num_customers, 0)),
                     relabelled(base.articles, odd_ids(SIZE.num_articles, 1)), base.transactions)


@pytest.fixture(scope="module")
def snapshot(tables: RelTables, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return GraphSnapshot.build(tables, tmp_path_factory.mktemp("odd_ids"), progress=False)


def test_ids_of_every_shape_round_trip_as_text(tables: RelTables, snapshot: GraphSnapshot) -> None:
    for node_type, table in ((CUSTOMER, tables.customers), (ARTICLE, tables.articles)):
        reopened = GraphSnapshot.open(snapshot.directory).ids[node_type]
        assert reopened.dtype == np.dtype(f"S{MAX_ID_BYTES}")  # the longest id sets the width
        np.testing.assert_array_equal(reopened, table.ids)
        text = ids_text(reopened)
        assert {"13085", "85123A", "Müller, Anna", "客户-7", "\U0001f600", LONGEST} <= set(text)
        assert snapshot.lookup(node_type, text).tolist() == list(range(len(text)))


def test_an_integer_id_is_its_decimal_digits(snapshot: GraphSnapshot) -> None:
    index = int(snapshot.lookup(CUSTOMER, ["13085"])[0])
    assert index >= 0
    assert snapshot.lookup(CUSTOMER, [13085, np.int64(13085), b"13085"]).tolist() == [index] * 3
    assert snapshot.lookup(CUSTOMER, np.array([13085, 1])).tolist() == [index, -1]
    assert snapshot.lookup(CUSTOMER, np.array([b"13085", b"1308"])).tolist() == [index, -1]
    assert int(snapshot.lookup(CUSTOMER, ["0042"])[0]) >= 0  # text: the leading zeros are the id's
    assert snapshot.lookup(CUSTOMER, [42]).tolist() == [-1]


NEAR_MISSES = ["1308", "130850", "13085\x00", "\x0013085", " 13085", "85123a", "", LONGEST + "é",
               LONGEST[:-1], "\ud800", "x" * 10_000, b"13085\x00", 130850]


@pytest.mark.parametrize("query", NEAR_MISSES)
def test_near_misses_are_unknown_never_a_neighbour(snapshot: GraphSnapshot, query: str) -> None:
    assert snapshot.lookup(CUSTOMER, [query]).tolist() == [-1]  # one id: the scalar search


def test_near_misses_among_many_are_unknown(snapshot: GraphSnapshot) -> None:
    found = snapshot.lookup(CUSTOMER, [*NEAR_MISSES, "13085"]).tolist()  # the array search
    assert found[:-1] == [-1] * len(NEAR_MISSES) and found[-1] >= 0


def test_lookup_handles_empty_inputs() -> None:
    ids = np.array([b"a", b"b"])
    assert lookup_sorted(ids, []).tolist() == []
    assert lookup_sorted(np.zeros(0, "S4"), ["a"]).tolist() == [-1]


def test_id_bytes_refuses_other_types() -> None:
    assert id_bytes("85123A") == b"85123A" and id_bytes(13085) == b"13085" and id_bytes(-7) == b"-7"
    for value in (True, 1.5, None, ["a"]):
        with pytest.raises(TypeError):
            id_bytes(value)


def test_build_refuses_an_empty_or_too_long_id(tables: RelTables, tmp_path: Path) -> None:
    base = tables.customers
    for ids, words in (([""], "must not be empty"), (["x" * (MAX_ID_BYTES + 1)], f"at most {MAX_ID_BYTES}")):
        table = relabelled(base, ids + ids_text(base.ids)[: len(base) - 1])
        bad = RelTables(table, tables.articles, tables.transactions)
        with pytest.raises(ValueError, match=words):
            GraphSnapshot.build(bad, tmp_path, progress=False)
