"""Synthetic articles: products with colour variants, their attributes and their sales lifecycle.

Articles are generated in ``article_id`` order (ascending product code, then variant), so an
article's position here is its dense index. Each article carries a latent lifecycle: it
launches on some day, its popularity rises over days, peaks, and decays over weeks, scaled
by a seasonal curve of its product group. That makes next week's sales predictable from the
timing of recent sales better than from last week's total alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.synth.text import describe_products, name_products
from training.synth.vocab import (
    APPEARANCES,
    COLOURS,
    DEPARTMENTS,
    GROUP_SEASON,
    INDEX_GROUP_SHARE,
    INDEX_GROUPS,
    INDEXES,
    PERCEIVED_MASTERS,
    PRODUCT_TYPES,
)

PRODUCT_CODE_RANGE = (108_775, 959_462)  # as in the real file
PRE_LAUNCH_DAYS = 120  # articles launched before the first day are already selling on it
PRICE_FACTOR_BY_GROUP = {
    "Ladieswear": 1.0,
    "Divided": 0.75,
    "Menswear": 1.1,
    "Baby/Children": 0.7,
    "Sport": 1.0,
}


@dataclass
class Lifecycle:
    """Popularity over time, one row per article.

    Args:
        launch: ``(A,)`` int64 launch day, relative to the first day (may be negative).
        rise: ``(A,)`` float64 days to ramp up after launch.
        decay: ``(A,)`` float64 e-folding days of the decline.
        peak: ``(A,)`` float64 relative popularity scale.
        season_row: ``(A,)`` int64 row of ``season`` the article follows.
        season: ``(S, D)`` float64 seasonal multiplier per season row and day.
    """

    launch: np.ndarray
    rise: np.ndarray
    decay: np.ndarray
    peak: np.ndarray
    season_row: np.ndarray
    season: np.ndarray

    def at(self, day: int) -> np.ndarray:
        """``(A,)`` float64 popularity on ``day`` (0 before launch, positive from launch on)."""
        age = day - self.launch
        live = age >= 0
        age = np.maximum(age, 0)
        shape = -np.expm1(-(age + 1) / self.rise) * (np.exp(-age / self.decay) + 0.002)
        return np.where(live, self.peak * shape * self.season[self.season_row, day], 0.0)

    def take(self, order: np.ndarray) -> Lifecycle:
        """The lifecycles of articles ``order``, in that order."""
        return Lifecycle(
            self.launch[order],
            self.rise[order],
            self.decay[order],
            self.peak[order],
            self.season_row[order],
            self.season,
        )


@dataclass
class Catalog:
    """All articles: attributes as vocabulary indices plus latent lifecycle and pricing.

    Args:
        product_code: ``(A,)`` int64 six-digit product code.
        variant: ``(A,)`` int64 variant number (the last three digits of the article id).
        department: ``(A,)`` int64 index into :data:`DEPARTMENTS`.
        product_type: ``(A,)`` int64 ``product_type_no``.
        colour: ``(A,)`` int64 index into :data:`COLOURS`.
        master: ``(A,)`` int64 index of the perceived colour master (taste cells use it).
        appearance: ``(A,)`` int64 ``graphical_appearance_no``.
        prod_name, detail_desc: ``(A,)`` str names and descriptions.
        base_price: ``(A,)`` float64 full price.
        markdown_age: ``(A,)`` int64 days after launch when the price is marked down.
        markdown: ``(A,)`` float64 price factor after markdown.
        lifecycle: the popularity model.
    """

    product_code: np.ndarray
    variant: np.ndarray
    department: np.ndarray
    product_type: np.ndarray
    colour: np.ndarray
    master: np.ndarray
    appearance: np.ndarray
    prod_name: np.ndarray
    detail_desc: np.ndarray
    base_price: np.ndarray
    markdown_age: np.ndarray
    markdown: np.ndarray
    lifecycle: Lifecycle

    def __len__(self) -> int:
        return int(self.product_code.shape[0])


def _department_weights(rng: np.random.Generator) -> np.ndarray:
    index_group = {i.code: i.group_name for i in INDEXES}
    group = np.array([INDEX_GROUPS.index(index_group[d.index_code]) for d in DEPARTMENTS])
    share = np.asarray(INDEX_GROUP_SHARE)[group] / np.bincount(group)[group]
    w = share * rng.lognormal(0.0, 0.4, size=len(DEPARTMENTS))
    return w / w.sum()


def _season_table(first_day: int, num_days: int) -> tuple[np.ndarray, dict[str, int]]:
    """``(S, D)`` seasonal multipliers (row 0 flat) and the row of each seasonal product group."""
    dates = np.datetime64("1970-01-01") + np.arange(first_day, first_day + num_days)
    doy = (dates - dates.astype("datetime64[Y]")).astype(np.int64)
    rows = [np.ones(num_days)]
    for amplitude, peak_doy in GROUP_SEASON.values():
        rows.append(1.0 + amplitude * np.cos(2 * np.pi * (doy - peak_doy) / 365.25))
    return np.stack(rows), {g: i + 1 for i, g in enumerate(GROUP_SEASON)}


def make_catalog(rng: np.random.Generator, num_articles: int, first_day: int, num_days: int) -> Catalog:
    """Sample ``num_articles`` articles; days are relative to ``first_day`` (days since 1970)."""
    variants = 1 + rng.poisson(1.2, size=num_articles)
    variants = variants[: int(np.searchsorted(np.cumsum(variants), num_articles)) + 1]
    variants[-1] -= variants.sum() - num_articles
    n_products = len(variants)
    lo, hi = PRODUCT_CODE_RANGE
    codes = np.sort(rng.choice(hi - lo, size=n_products, replace=False) + lo)

    dept = rng.choice(len(DEPARTMENTS), size=n_products, p=_department_weights(rng))
    ptype = _product_types(rng, dept)
    app_codes = np.array(list(APPEARANCES))
    app_share = np.array([share for _, share in APPEARANCES.values()])
    appearance = rng.choice(app_codes, size=n_products, p=app_share / app_share.sum())
    index_group = {i.code: i.group_name for i in INDEXES}
    price_factor = np.array([PRICE_FACTOR_BY_GROUP[index_group[d.index_code]] for d in DEPARTMENTS])
    type_price = np.array([PRODUCT_TYPES[t][2] for t in ptype])
    base_price = type_price * price_factor[dept] * rng.lognormal(0.0, 0.3, size=n_products)
    # Some types sell better than others whatever the season: an attribute a model can learn.
    type_appeal = dict(zip(PRODUCT_TYPES, rng.lognormal(0.0, 0.5, size=len(PRODUCT_TYPES)), strict=True))
    appeal = np.array([type_appeal[t] for t in ptype]) * rng.lognormal(0.0, 0.9, size=n_products)
    # A few perennial basics sell steadily at a low level; everything else is a short-lived trend.
    perennial = rng.random(n_products) < 0.04
    perennial[0] = True  # something is on sale from the first day, whatever the catalogue size
    solid = appearance == app_codes[[APPEARANCES[a][0] for a in app_codes].index("Solid")]
    appeal *= np.where(solid, 1.3, 1.0) * np.where(perennial, 0.3, 1.0)
    launch = rng.integers(-PRE_LAUNCH_DAYS, num_days, size=n_products)
    launch = np.where(perennial, -PRE_LAUNCH_DAYS - rng.integers(0, 200, size=n_products), launch)
    decay = np.where(perennial, 2000.0, rng.lognormal(np.log(15.0), 0.4, size=n_products))
    names = name_products(rng, ptype)
    descs = describe_products(rng, ptype)

    # Variants: same product in its own colour, launched within two weeks of the first one.
    p = np.repeat(np.arange(n_products), variants)
    first = np.r_[0, np.cumsum(variants)[:-1]]
    later = np.arange(num_articles) > np.repeat(first, variants)
    step = rng.geometric(0.5, size=num_articles)
    variant_no = np.cumsum(step) - np.repeat(np.cumsum(step)[first] - step[first], variants)
    colour_share = np.array([c.weight for c in COLOURS])
    colour = rng.choice(len(COLOURS), size=num_articles, p=colour_share / colour_share.sum())
    masters = list(PERCEIVED_MASTERS)
    master = np.array([masters.index(c.master_id) for c in COLOURS])[colour]
    best_sellers = [i for i, c in enumerate(COLOURS) if c.name in ("Black", "White", "Dark Blue")]
    colour_appeal = np.where(np.isin(colour, best_sellers), 1.5, 1.0)
    season, season_rows = _season_table(first_day, num_days)
    season_row = np.array([season_rows.get(PRODUCT_TYPES[t][1], 0) for t in ptype])
    lifecycle = Lifecycle(
        launch=launch[p] + np.where(later, rng.integers(0, 15, size=num_articles), 0),
        rise=rng.uniform(3.0, 15.0, size=num_articles),
        decay=decay[p] * rng.lognormal(0.0, 0.2, size=num_articles),
        peak=appeal[p] * colour_appeal * rng.lognormal(0.0, 0.5, size=num_articles),
        season_row=season_row[p],
        season=season,
    )
    return Catalog(
        product_code=codes[p],
        variant=np.minimum(variant_no, 999),
        department=dept[p],
        product_type=ptype[p],
        colour=colour,
        master=master,
        appearance=appearance[p],
        prod_name=names[p],
        detail_desc=descs[p],
        base_price=base_price[p],
        markdown_age=rng.integers(30, 120, size=n_products)[p],
        markdown=rng.uniform(0.5, 0.8, size=n_products)[p],
        lifecycle=lifecycle,
    )


def _product_types(rng: np.random.Generator, dept: np.ndarray) -> np.ndarray:
    """``(P,)`` a ``product_type_no`` for each product, uniform among its department's types."""
    count = np.array([len(d.product_types) for d in DEPARTMENTS])
    table = np.array([d.product_types + (0,) * (count.max() - len(d.product_types)) for d in DEPARTMENTS])
    return table[dept, (rng.random(len(dept)) * count[dept]).astype(np.int64)]
