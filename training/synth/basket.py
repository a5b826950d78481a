"""What a visit buys: the article behind each basket item, and the price paid for it.

Each item is a repeat of something the customer bought before, a trend-follower's pick from
everything on sale weighted by today's popularity, a pick in one of the customer's signature
departments, or a pick guided by their persona's taste for department x colour cells. Every
pick among articles is weighted by the articles' popularity today.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.synth.catalog import Catalog, Lifecycle
from training.synth.csv_format import PRICE_UNITS
from training.synth.customers import Shoppers, Tastes
from training.synth.sampling import row_cdf, sample_in_ranges, sample_rows
from training.synth.vocab import DEPARTMENTS, PERCEIVED_MASTERS

HISTORY_SLOTS = 8  # a repeat purchase re-buys one of the customer's last 8 items
MAX_PRICE_STEP = 354  # prices are (100 * step - 1) / 59000, so at most about 0.6


@dataclass
class Shelves:
    """Articles laid out by (department, colour master) cell, so that a cell or a department is a range.

    Args:
        order: ``(A,)`` article index at each shelf position.
        cell_lo, cell_hi: ``(n_departments * n_masters,)`` shelf range of each cell.
        dept_lo, dept_hi: ``(n_departments,)`` shelf range of each department.
        lifecycle: the articles' lifecycles in shelf order.
        cell_taste: ``(K, n_cells)`` each persona's liking of each cell.
    """

    order: np.ndarray
    cell_lo: np.ndarray
    cell_hi: np.ndarray
    dept_lo: np.ndarray
    dept_hi: np.ndarray
    lifecycle: Lifecycle
    cell_taste: np.ndarray

    @classmethod
    def build(cls, catalog: Catalog, tastes: Tastes) -> Shelves:
        n_masters = len(PERCEIVED_MASTERS)
        cell = catalog.department * n_masters + catalog.master
        order = np.argsort(cell, kind="stable")
        sorted_cell = cell[order]
        cells = np.arange(len(DEPARTMENTS) * n_masters)
        depts = np.arange(len(DEPARTMENTS)) * n_masters
        return cls(
            order=order,
            cell_lo=np.searchsorted(sorted_cell, cells, "left"),
            cell_hi=np.searchsorted(sorted_cell, cells, "right"),
            dept_lo=np.searchsorted(sorted_cell, depts, "left"),
            dept_hi=np.searchsorted(sorted_cell, depts + n_masters, "left"),
            lifecycle=catalog.lifecycle.take(order),
            cell_taste=np.repeat(tastes.dept, n_masters, axis=1) * np.tile(tastes.master, len(DEPARTMENTS)),
        )

    def stock(self, day: int) -> tuple[np.ndarray, np.ndarray]:
        """Today's ``(A + 1,)`` running popularity total in shelf order and the personas' cell CDF."""
        cum0 = np.r_[0.0, np.cumsum(self.lifecycle.at(day))]
        return cum0, row_cdf(self.cell_taste * (cum0[self.cell_hi] - cum0[self.cell_lo]))


@dataclass
class PurchaseHistory:
    """Each customer's last :data:`HISTORY_SLOTS` articles (a ring buffer) and their item count."""

    ring: np.ndarray
    count: np.ndarray

    @classmethod
    def empty(cls, num_customers: int) -> PurchaseHistory:
        return cls(np.zeros((num_customers, HISTORY_SLOTS), np.int32), np.zeros(num_customers, np.int64))

    def remember(self, visitors: np.ndarray, size: np.ndarray, cust: np.ndarray, article: np.ndarray) -> None:
        """Record today's baskets: ``size[i]`` items of ``visitors[i]``, flat in ``cust`` and ``article``."""
        rank = np.arange(len(cust)) - np.repeat(np.cumsum(size) - size, size)
        self.ring[cust, (self.count[cust] + rank) % HISTORY_SLOTS] = article
        self.count[visitors] += size

    def recall(self, cust: np.ndarray, u: np.ndarray) -> np.ndarray:
        """One remembered article per customer in ``cust`` (each needs a non-empty history)."""
        slot = (u * np.minimum(self.count[cust], HISTORY_SLOTS)).astype(np.int64)
        return self.ring[cust, slot]


def pick_articles(
    rng: np.random.Generator,
    shoppers: Shoppers,
    shelves: Shelves,
    day: int,
    cust: np.ndarray,
    history: PurchaseHistory,
) -> np.ndarray:
    """``(m,)`` int32 article of each basket item; ``cust`` holds the buyer of each item."""
    m = len(cust)
    cum0, persona_cdf = shelves.stock(day)
    u = rng.random(m)
    repeat_p = np.where(history.count[cust] > 0, shoppers.repeat_p[cust], 0.0)
    popular_p = repeat_p + shoppers.popular_p[cust]
    signature_p = popular_p + shoppers.signature_p[cust]
    dept = shoppers.signature[cust, (rng.random(m) < 0.3).astype(np.int64)]
    lo, hi = shelves.dept_lo[dept], shelves.dept_hi[dept]
    # A thin department today sends its fans elsewhere: demand follows popularity, not shelf count.
    dept_mass = cum0[shelves.dept_hi] - cum0[shelves.dept_lo]
    stocked = rng.random(m) * dept_mass.mean() < cum0[hi] - cum0[lo]
    signature = (u >= popular_p) & (u < signature_p) & stocked
    persona = (u >= popular_p) & ~signature
    cell = sample_rows(persona_cdf, len(shelves.cell_lo), shoppers.persona[cust], rng.random(m))
    lo = np.where(persona, shelves.cell_lo[cell], np.where(signature, lo, 0))
    hi = np.where(persona, shelves.cell_hi[cell], np.where(signature, hi, len(shelves.order)))
    v = rng.random(m)
    article = shelves.order[sample_in_ranges(cum0, lo, hi, v)].astype(np.int32)
    repeat = u < repeat_p
    article[repeat] = history.recall(cust[repeat], v[repeat])
    return article


def price_units(
    rng: np.random.Generator, catalog: Catalog, article: np.ndarray, day: int, channel: np.ndarray
) -> np.ndarray:
    """``(m,)`` int32 price paid, in units of ``1 / PRICE_UNITS``: full or marked down, with member
    offers and a store surcharge, rounded to the real file's SEK steps."""
    age = day - catalog.lifecycle.launch[article]
    marked_down = age > catalog.markdown_age[article]
    price = catalog.base_price[article] * np.where(marked_down, catalog.markdown[article], 1.0)
    price *= np.where(rng.random(len(article)) < 0.1, 0.9, 1.0) * np.where(channel == 1, 1.03, 1.0)
    step = np.clip(np.rint(price * PRICE_UNITS / 100), 1, MAX_PRICE_STEP)
    return (100 * step - 1).astype(np.int32)
