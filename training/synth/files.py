"""The three Kaggle-format CSV files, written from the synthetic tables.

Values are formatted exactly as in the real files: hex ids, ten-digit article ids with their
leading zero, ``1.0`` or empty flags, empty optional fields, ``YYYY-MM-DD`` dates and prices
with sixteen decimals. Rows are in the real files' order: customers and articles by id,
transactions by date, then customer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from models.progress import progress_bar
from models.schema import ARTICLE_COLUMNS, CUSTOMER_COLUMNS, TRANSACTION_COLUMNS
from training.synth.catalog import Catalog
from training.synth.csv_format import (
    csv_field,
    date_strings,
    decimal_digits,
    int_strings,
    price_table,
    write_csv,
)
from training.synth.customers import Customers
from training.synth.shopping import Purchases
from training.synth.vocab import (
    APPEARANCES,
    CLUB_STATUSES,
    COLOURS,
    DEPARTMENTS,
    GARMENT_GROUPS,
    INDEXES,
    NEWS_FREQUENCIES,
    PERCEIVED_MASTERS,
    PERCEIVED_VALUES,
    PRODUCT_TYPES,
)


def _lut(values: list[str]) -> np.ndarray:
    """Strings as a CSV-quoted ``S<w>`` lookup table."""
    return np.array([csv_field(v).encode() for v in values])


def article_ids(catalog: Catalog) -> np.ndarray:
    """``(A,)`` ``S10`` ids: ``0`` + six-digit product code + three-digit variant, e.g. ``0108775015``."""
    return decimal_digits(catalog.product_code * 1000 + catalog.variant, 10)


def write_customers(path: Path, customers: Customers) -> None:
    """``customers.csv`` in id order."""
    flag = np.array([b"", b"1.0"])
    columns = [
        customers.ids,
        flag[customers.fn.astype(np.int64)],
        flag[customers.active.astype(np.int64)],
        _lut(list(CLUB_STATUSES))[customers.club],
        _lut(list(NEWS_FREQUENCIES))[customers.news],
        int_strings(customers.age, missing=customers.age == 0),
        customers.postal_code,
    ]
    write_csv(path, CUSTOMER_COLUMNS, len(customers), lambda a, b: [c[a:b] for c in columns])


def write_articles(path: Path, catalog: Catalog) -> None:
    """``articles.csv`` in id order."""
    types = sorted(PRODUCT_TYPES)
    of_type = np.searchsorted(types, catalog.product_type)
    appearances = sorted(APPEARANCES)
    of_appearance = np.searchsorted(appearances, catalog.appearance)
    colour, dept = catalog.colour, catalog.department
    index = [next(i for i in INDEXES if i.code == d.index_code) for d in DEPARTMENTS]
    columns = [
        article_ids(catalog),
        int_strings(catalog.product_code),
        _lut(list(catalog.prod_name)),
        *_coded(types, [PRODUCT_TYPES[t][0] for t in types], of_type),
        _lut([PRODUCT_TYPES[t][1] for t in types])[of_type],
        *_coded(appearances, [APPEARANCES[a][0] for a in appearances], of_appearance),
        *_coded([c.code for c in COLOURS], [c.name for c in COLOURS], colour),
        *_coded([c.value_id for c in COLOURS], [PERCEIVED_VALUES[c.value_id] for c in COLOURS], colour),
        *_coded([c.master_id for c in COLOURS], [PERCEIVED_MASTERS[c.master_id] for c in COLOURS], colour),
        *_coded([d.no for d in DEPARTMENTS], [d.name for d in DEPARTMENTS], dept),
        *_coded([i.code for i in index], [i.name for i in index], dept),
        *_coded([i.group_no for i in index], [i.group_name for i in index], dept),
        *_coded([d.section_no for d in DEPARTMENTS], [d.section_name for d in DEPARTMENTS], dept),
        *_coded(
            [d.garment_group_no for d in DEPARTMENTS],
            [GARMENT_GROUPS[d.garment_group_no] for d in DEPARTMENTS],
            dept,
        ),
        _lut(list(catalog.detail_desc)),
    ]
    write_csv(path, ARTICLE_COLUMNS, len(catalog), lambda a, b: [c[a:b] for c in columns])


def _coded(codes: list[int] | list[str], names: list[str], rows: np.ndarray) -> list[np.ndarray]:
    """A code column and its name column for articles pointing at vocabulary ``rows``."""
    return [_lut([str(c) for c in codes])[rows], _lut(names)[rows]]


def write_transactions(
    path: Path,
    purchases: Purchases,
    customer_ids: np.ndarray,
    article_id: np.ndarray,
    first_day: int,
    num_days: int,
    progress: bool = False,
) -> None:
    """``transactions_train.csv``; ``first_day`` is the absolute day (since 1970) of relative day 0."""
    dates = date_strings(first_day, num_days)
    prices = price_table(int(purchases.price_units.max(initial=0)))
    channels = np.array([b"0", b"1", b"2"])

    def chunk(a: int, b: int) -> list[np.ndarray]:
        return [
            dates[purchases.day[a:b]],
            customer_ids[purchases.customer[a:b]],
            article_id[purchases.article[a:b]],
            prices[purchases.price_units[a:b]],
            channels[purchases.channel[a:b]],
        ]

    bar = progress_bar(total=len(purchases), desc="writing", unit="row", unit_scale=True, enabled=progress)
    with bar:
        write_csv(path, TRANSACTION_COLUMNS, len(purchases), chunk, on_chunk=bar.update)
