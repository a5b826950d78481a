"""The day-by-day shopping simulation that produces the transactions.

The loop runs over calendar days; all work inside a day is vectorised over that day's
visitors and their basket items (see :mod:`training.synth.visits` for when customers come,
:mod:`training.synth.basket` for what they buy). Rows come out in the real file's order:
by day, then by customer (dense index = rank of the id).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.progress import progress_bar
from training.synth.basket import PurchaseHistory, Shelves, pick_articles, price_units
from training.synth.catalog import Catalog
from training.synth.customers import Behaviour, Shoppers, Tastes
from training.synth.visits import VisitClock
from training.synth.vocab import DEPARTMENTS


@dataclass
class Purchases:
    """Transactions in file order, all ``(T,)``.

    Args:
        day: int32 day relative to the first day.
        customer: int32 dense customer index.
        article: int32 dense article index.
        price_units: int32 price in units of ``1 / PRICE_UNITS``.
        channel: uint8 sales channel (1 store, 2 online).
    """

    day: np.ndarray
    customer: np.ndarray
    article: np.ndarray
    price_units: np.ndarray
    channel: np.ndarray

    def __len__(self) -> int:
        return int(self.day.shape[0])


def simulate(
    catalog: Catalog,
    shoppers: Shoppers,
    tastes: Tastes,
    behaviour: Behaviour,
    rng: np.random.Generator,
    first_day: int,
    num_days: int,
    progress: bool = False,
) -> Purchases:
    """Run the shops for ``num_days`` days from ``first_day`` (days since 1970) and return every purchase."""
    shelves = Shelves.build(catalog, tastes)
    clock = VisitClock.start(rng, shoppers, behaviour, first_day, num_days)
    history = PurchaseHistory.empty(len(shoppers.rate))
    churn_effect = np.array([d.churn_effect for d in DEPARTMENTS])[catalog.department]
    days: list[tuple[np.ndarray, ...]] = []
    for day in progress_bar(range(num_days), desc="simulating", unit="day", enabled=progress):
        visitors = clock.due(day)
        if len(visitors) == 0:
            continue
        size = 1 + rng.poisson(shoppers.extra_items[visitors])
        cust = np.repeat(visitors, size)
        article = pick_articles(rng, shoppers, shelves, day, cust, history)
        online = rng.random(len(visitors)) < shoppers.online_p[visitors]
        channel = np.repeat(np.where(online, 2, 1), size).astype(np.uint8)
        price = price_units(rng, catalog, article, day, channel)
        days.append((np.full(len(cust), day, np.int32), cust.astype(np.int32), article, price, channel))
        history.remember(visitors, size, cust, article)
        basket = np.repeat(np.arange(len(visitors)), size)
        basket_effect = np.bincount(basket, churn_effect[article], minlength=len(visitors)) / size
        clock.after_visit(rng, visitors, basket_effect, shoppers, behaviour, day)
    if not days:
        days = [(np.empty(0, np.int32),) * 4 + (np.empty(0, np.uint8),)]
    return Purchases(*(np.concatenate(column) for column in zip(*days, strict=True)))
