"""The raw Online Retail II file read through ``unit-price.toml`` is the converted copy's data.

``data/real/online-retail-ii/unit-price.toml`` makes the converted copy's choices (a line worth its
unit price, no quantity, no customer or article features) on the file as published. What the model
reads must then be the same up to the ids' names and a price scale: the same lines on the same
days, the same articles in the same order, one customer of the copy per customer of the file (its
hashed id sorts elsewhere), every price 100 times the copy's, and no customer or article column
that says anything (the copy's are empty or constant). Test metrics of the two then differ by the
seed noise of training only (docs/results.md, "The converted copy and the raw file").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from training.data.load import load_tables

REAL = Path(__file__).resolve().parents[2] / "data" / "real"
RAW, CONVERTED = REAL / "online-retail-ii", REAL / "online-retail-2010"
SPEC = RAW / "unit-price.toml"


def _aligned(tables, cents: float) -> np.ndarray:
    """Row order of the lines sorted by day, article and price in cents."""
    tx = tables.transactions
    price = np.round(np.asarray(tx.price, dtype=np.float64) * cents).astype(np.int64)
    return np.lexsort((price, tx.article, tx.day))


@pytest.mark.skipif(not CONVERTED.is_dir(), reason="the converted copy is not in this checkout")
def test_the_unit_price_spec_reads_the_converted_copys_lines() -> None:
    raw = load_tables(RAW, progress=False, spec=SPEC)
    copy = load_tables(CONVERTED, progress=False)
    rt, ct = raw.transactions, copy.transactions
    assert len(rt.day) == len(ct.day) == 393_160
    assert len(raw.customers.ids) == len(copy.customers.ids)
    assert len(raw.articles.ids) == len(copy.articles.ids)
    r, c = _aligned(raw, 100.0), _aligned(copy, 10_000.0)
    assert np.array_equal(rt.day[r], ct.day[c])
    assert np.array_equal(rt.article[r], ct.article[c])  # stock codes and their renumbering sort alike
    np.testing.assert_allclose(np.asarray(rt.price[r], np.float64) / 100, ct.price[c], rtol=1e-5)
    pairs = np.unique(np.stack([rt.customer[r], ct.customer[c]]), axis=1)
    assert pairs.shape[1] == len(raw.customers.ids)  # a bijection of customers
    assert len(np.unique(pairs[0])) == len(np.unique(pairs[1])) == pairs.shape[1]
    assert raw.customers.categorical.shape[1] == raw.customers.numeric.shape[1] == 0
    assert raw.articles.categorical.shape[1] == raw.articles.numeric.shape[1] == 0
    for table in (copy.customers, copy.articles):  # the copy's columns hold one value each
        assert all(len(np.unique(np.asarray(table.categorical)[:, j])) == 1
                   for j in range(table.categorical.shape[1]))
        assert all(len(np.unique(np.asarray(table.numeric)[:, j])) == 1
                   for j in range(table.numeric.shape[1]))
