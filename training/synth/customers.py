"""Synthetic customers: the visible attributes of ``customers.csv`` and their latent shopping habits.

The latent habits are what makes the tasks learnable: a persona (taste over departments
and colours, more likely for some age bands), a visit rate and a dormancy risk that both
depend on club status, newsletter settings and age, and per-customer shares of repeat,
signature-department and trend-following purchases.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.synth.csv_format import random_hex_ids
from training.synth.sampling import row_cdf, sample_rows
from training.synth.vocab import (
    AGE_BAND_EDGES,
    CLUB_SHARE,
    DEPARTMENTS,
    INDEX_GROUP_SHARE,
    INDEX_GROUPS,
    INDEXES,
    PERCEIVED_MASTERS,
)

# Rows: index group; columns: age band (<25, 25-39, 40-59, 60+, missing).
_PERSONA_AGE_AFFINITY = np.array(
    [
        [1.0, 1.3, 1.6, 1.8, 1.0],
        [3.0, 0.6, 0.25, 0.1, 1.0],
        [0.8, 1.0, 1.0, 0.9, 1.0],
        [0.1, 2.2, 1.0, 0.4, 1.0],
        [1.4, 1.0, 0.5, 0.2, 1.0],
    ]
)


@dataclass
class Behaviour:
    """Parameters of the shopping simulation.

    The defaults give the real file's volume per customer-day at full size (31.8M rows for
    1.37M customers and 105k articles over 734 days; smaller catalogues sell a little less).

    Args:
        visit_rate: median visits per day while a customer is engaged (scaled by attributes).
        rate_sigma: log-normal spread of visit rates between customers.
        extra_items: mean basket size minus one.
        repeat_share, popular_share, signature_share: mean shares of basket items that re-buy a
            recent purchase, follow today's popularity, or come from a signature department; the
            rest follow the persona's taste.
        dormancy_logit: base log-odds of going dormant after a visit.
        basket_churn_weight: weight of the basket's mean department churn effect in those log-odds.
        gone_for_good: share of dormant spells that never end.
        dormant_gap_days: mean length of a dormant spell (shop-time days).
        new_customer_share: share of customers whose first visit falls uniformly inside the history.
    """

    visit_rate: float = 0.2
    rate_sigma: float = 0.5
    extra_items: float = 1.2
    repeat_share: float = 0.1
    popular_share: float = 0.15
    signature_share: float = 0.4
    dormancy_logit: float = -0.8
    basket_churn_weight: float = 2.0
    gone_for_good: float = 0.1
    dormant_gap_days: float = 168.0
    new_customer_share: float = 0.35


@dataclass
class Customers:
    """Visible customer attributes, indexed by dense id (rank of ``ids``).

    Args:
        ids: ``(N,)`` ``S64`` sorted hex ids.
        fn, active: ``(N,)`` bool (``1.0`` or empty in the CSV).
        club: ``(N,)`` int64 index into :data:`CLUB_STATUSES`.
        news: ``(N,)`` int64 index into :data:`NEWS_FREQUENCIES`.
        age: ``(N,)`` int64 years, ``0`` when missing.
        postal_code: ``(N,)`` ``S64`` hex, shared by several customers.
    """

    ids: np.ndarray
    fn: np.ndarray
    active: np.ndarray
    club: np.ndarray
    news: np.ndarray
    age: np.ndarray
    postal_code: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def age_band(self) -> np.ndarray:
        """``(N,)`` int64: 0 (<25), 1 (25-39), 2 (40-59), 3 (60+), 4 (missing)."""
        return np.where(self.age > 0, np.searchsorted(AGE_BAND_EDGES, self.age, side="right"), 4)


@dataclass
class Tastes:
    """Personas: ``dept`` ``(K, n_departments)`` and ``master`` ``(K, n_masters)`` preference weights."""

    group: np.ndarray
    dept: np.ndarray
    master: np.ndarray


@dataclass
class Shoppers:
    """Latent per-customer habits.

    Args:
        persona: ``(N,)`` int64 persona (row of :class:`Tastes`).
        rate: ``(N,)`` float64 visits per shop-time day while engaged.
        dormancy: ``(N,)`` float64 log-odds of going dormant after a visit, before the basket's effect.
        fade: ``(N,)`` float64 factor applied to ``rate`` after every visit (1 for most customers).
        repeat_p, popular_p, signature_p: ``(N,)`` float64 item shares (see :class:`Behaviour`).
        signature: ``(N, 2)`` int64 favourite departments (indices into :data:`DEPARTMENTS`).
        online_p: ``(N,)`` float64 probability that a visit is online (sales channel 2).
        extra_items: ``(N,)`` float64 mean basket size minus one.
        first_day: ``(N,)`` int64 join day (``-1``: a customer from before the history, ``D``: never buys).
    """

    persona: np.ndarray
    rate: np.ndarray
    dormancy: np.ndarray
    fade: np.ndarray
    repeat_p: np.ndarray
    popular_p: np.ndarray
    signature_p: np.ndarray
    signature: np.ndarray
    online_p: np.ndarray
    extra_items: np.ndarray
    first_day: np.ndarray


def make_customers(rng: np.random.Generator, n: int) -> Customers:
    """Sample ``n`` customers with the real file's marginal value frequencies."""
    fn = rng.random(n) < 0.35
    active = fn & (rng.random(n) < 0.97)
    news = np.where(fn, np.where(rng.random(n) < 0.97, 2, 3), 1)
    news = np.where(rng.random(n) < 0.012, 0, news)
    club = rng.choice(4, size=n, p=np.asarray(CLUB_SHARE))
    young = rng.random(n) < 0.55
    age = np.where(young, rng.normal(24, 4, n), rng.normal(50, 11, n)).round().clip(16, 99).astype(np.int64)
    age = np.where(rng.random(n) < 0.011, 0, age)
    pool = random_hex_ids(rng, max(1, n // 3))
    weight = rng.lognormal(0.0, 1.0, size=len(pool))
    weight[0] = weight.sum() * 0.09  # one postal code shared by many customers, as in the real file
    postal = pool[rng.choice(len(pool), size=n, p=weight / weight.sum())]
    return Customers(random_hex_ids(rng, n), fn, active, club, news, age, postal)


def make_tastes(rng: np.random.Generator, num_personas: int) -> Tastes:
    """Personas, each focused on one index group's departments and on a few colours."""
    index_group = {i.code: INDEX_GROUPS.index(i.group_name) for i in INDEXES}
    dept_group = np.array([index_group[d.index_code] for d in DEPARTMENTS])
    group = np.r_[
        np.arange(min(num_personas, len(INDEX_GROUPS))),
        rng.choice(
            len(INDEX_GROUPS), size=max(0, num_personas - len(INDEX_GROUPS)), p=np.asarray(INDEX_GROUP_SHARE)
        ),
    ]
    dept = np.empty((num_personas, len(DEPARTMENTS)))
    for k, g in enumerate(group):
        own = dept_group == g
        dept[k] = 0.1 * rng.dirichlet(np.ones(len(DEPARTMENTS)))
        dept[k, own] += 0.9 * rng.dirichlet(np.full(int(own.sum()), 0.6))
    master = rng.dirichlet(np.full(len(PERCEIVED_MASTERS), 0.5), size=num_personas) + 0.01
    return Tastes(group, dept, master)


def make_shoppers(
    rng: np.random.Generator, customers: Customers, tastes: Tastes, behaviour: Behaviour, num_days: int
) -> Shoppers:
    """Latent habits of each customer, drawn given their visible attributes."""
    n = len(customers)
    band = customers.age_band()
    persona_w = _PERSONA_AGE_AFFINITY[tastes.group][:, band].T  # (N, K)
    persona = sample_rows(row_cdf(persona_w), len(tastes.group), np.arange(n), rng.random(n))
    group = tastes.group[persona]
    club, news, active = customers.club, customers.news, customers.active.astype(np.float64)

    # Effects are indexed by the vocabularies' order: club ("", ACTIVE, PRE-CREATE, LEFT CLUB),
    # news ("", NONE, Regularly, Monthly), age band, and the persona's index group.
    log_rate = (
        np.array([-0.3, 0.0, -0.8, -1.0])[club]
        + np.array([0.0, 0.0, 0.4, 0.2])[news]
        + 0.3 * active
        + np.array([0.0, 0.4, 0.2, -0.5, 0.0])[band]
        + np.array([0.0, -0.1, -0.4, 0.4, -0.1])[group]
    )
    sigma = behaviour.rate_sigma
    rate = behaviour.visit_rate * np.exp(log_rate + rng.normal(-(sigma**2) / 2, sigma, n))
    dormancy = (
        behaviour.dormancy_logit
        + np.array([0.4, 0.0, 1.0, 1.8])[club]
        + np.array([0.5, 0.5, 0.0, 0.0])[news]
        - 0.4 * active
        + np.array([0.8, 0.0, -0.4, -0.7, 0.3])[band]
        + rng.normal(0.0, 0.5, n)
    )
    fading = rng.random(n) < 0.15 + 0.3 * (club >= 2) + 0.1 * (band == 0)
    fade = np.where(fading, rng.uniform(0.85, 0.95, n), 1.0)
    signature = sample_rows(row_cdf(tastes.dept), len(DEPARTMENTS), np.repeat(persona, 2), rng.random(2 * n))
    new = rng.random(n) < behaviour.new_customer_share
    first_day = np.where(new, rng.integers(0, num_days, n), -1)
    first_day = np.where(rng.random(n) < 0.005, num_days, first_day)  # a few never buy anything
    return Shoppers(
        persona=persona,
        rate=rate,
        dormancy=dormancy,
        fade=fade,
        repeat_p=_beta_with_mean(rng, behaviour.repeat_share, n),
        popular_p=_beta_with_mean(rng, behaviour.popular_share, n),
        signature_p=_beta_with_mean(rng, behaviour.signature_share, n),
        signature=signature.reshape(n, 2),
        online_p=rng.beta(2.5, 1.1, n),
        extra_items=behaviour.extra_items * rng.lognormal(-0.08, 0.4, n),
        first_day=first_day,
    )


def _beta_with_mean(rng: np.random.Generator, mean: float, n: int, concentration: float = 6.0) -> np.ndarray:
    if mean <= 0.0 or mean >= 1.0:
        return np.full(n, min(max(mean, 0.0), 1.0))
    return rng.beta(concentration * mean, concentration * (1.0 - mean), n)
