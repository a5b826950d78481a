"""When customers come back: visit clocks in shop time, and dormancy after a visit.

Each customer's visits form a renewal process in "shop time", calendar days stretched by a
weekly and yearly footfall curve, so that busy days get more visits without a per-day
rate table. After each visit a customer may go dormant (for months, or for good) with
log-odds that depend on who they are and on what that visit's basket held.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.synth.customers import Behaviour, Shoppers


def footfall(first_day: int, num_days: int) -> np.ndarray:
    """``(D,)`` relative shop traffic per day: weekend peaks, summer and winter sales, Black Friday."""
    days = np.arange(first_day, first_day + num_days)
    weekday = np.array([0.9, 0.9, 0.95, 1.0, 1.1, 1.2, 0.95])[(days + 3) % 7]  # 1970-01-01 was a Thursday
    dates = np.datetime64("1970-01-01") + days
    doy = (dates - dates.astype("datetime64[Y]")).astype(np.float64)
    summer_sale = 0.25 * np.exp(-(((doy - 178) / 10) ** 2))
    black_friday = 0.6 * np.exp(-(((doy - 331) / 3) ** 2))
    christmas = 0.2 * np.exp(-(((doy - 352) / 8) ** 2))
    return weekday * (1.0 + summer_sale + black_friday + christmas)


@dataclass
class VisitClock:
    """Per-customer visit state.

    Args:
        rate: ``(N,)`` current visits per shop-time day while engaged.
        clock: ``(N,)`` shop time of the latest (or first upcoming) visit.
        next_day: ``(N,)`` calendar day of the next visit, ``D`` for never.
        traffic: ``(D + 1,)`` shop time at the start of each calendar day.
    """

    rate: np.ndarray
    clock: np.ndarray
    next_day: np.ndarray
    traffic: np.ndarray

    @classmethod
    def start(
        cls, rng: np.random.Generator, shoppers: Shoppers, behaviour: Behaviour, first_day: int, num_days: int
    ) -> VisitClock:
        """Clocks as if the shops had always been open: a random moment falls inside a dormant
        spell with probability proportional to the time such spells take, so existing customers
        do not all rush in on the first days. Customers joining later first come on their join day.
        """
        n = len(shoppers.rate)
        traffic = np.r_[0.0, np.cumsum(footfall(first_day, num_days))]
        active_gap = 1.0 / shoppers.rate
        dormant_p = 1.0 / (1.0 + np.exp(-shoppers.dormancy))
        gap = behaviour.dormant_gap_days
        in_dormancy = dormant_p * (active_gap + gap) / (active_gap + dormant_p * gap)
        clock = rng.exponential(size=n) * active_gap
        clock += np.where(rng.random(n) < in_dormancy, rng.exponential(gap, n), 0.0)
        joined = shoppers.first_day >= 0
        clock[joined] = traffic[np.minimum(shoppers.first_day[joined], num_days)]
        clock_day = np.minimum(np.searchsorted(traffic, clock, side="right") - 1, num_days)
        next_day = np.where(joined, shoppers.first_day, clock_day).astype(np.int64)
        return cls(shoppers.rate.copy(), clock, next_day, traffic)

    def due(self, day: int) -> np.ndarray:
        """Sorted indices of the customers who visit on ``day``."""
        return np.flatnonzero(self.next_day == day)

    def after_visit(
        self,
        rng: np.random.Generator,
        visitors: np.ndarray,
        basket_effect: np.ndarray,
        shoppers: Shoppers,
        behaviour: Behaviour,
        day: int,
    ) -> None:
        """Schedule the next visit of today's ``visitors``, given each basket's mean department effect."""
        n = len(visitors)
        num_days = len(self.traffic) - 1
        logit = shoppers.dormancy[visitors] + behaviour.basket_churn_weight * basket_effect
        dormant = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
        gone = dormant & (rng.random(n) < behaviour.gone_for_good)
        self.rate[visitors] *= shoppers.fade[visitors]
        gap = rng.exponential(size=n) / self.rate[visitors]
        gap += np.where(dormant, rng.exponential(behaviour.dormant_gap_days, n), 0.0)
        clock = np.maximum(self.clock[visitors] + gap, self.traffic[day + 1])  # at most one visit a day
        self.clock[visitors] = clock
        clock_day = np.minimum(np.searchsorted(self.traffic, clock, side="right") - 1, num_days)
        self.next_day[visitors] = np.where(gone, num_days, clock_day)
