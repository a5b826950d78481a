"""Synthetic H&M data in the Kaggle layout, with signal planted for the three rel-hm tasks.

``python -m training.synth --out DIR [--customers N] [--articles M] [--days D] [--seed S]``
writes ``customers.csv``, ``articles.csv`` and ``transactions_train.csv`` with the real
files' headers and value formats. The same arguments give byte-identical files.

What is learnable (and what simple baselines miss):

- churn: visit rates and the risk of going dormant depend on club status, newsletter
  settings, age band and the departments of the latest basket, beyond recency and frequency;
- sales: articles launch, ramp up and fade over weeks, with product-group seasons, so the
  timing of recent sales predicts next week better than last week's total;
- purchase: customers keep to a persona's department x colour taste and their own signature
  departments, re-buy past items, and follow what is popular right now.

The default size is a demo that trains in minutes on two CPU cores; ``--customers 1370000
--articles 105000`` gives the real file's size (about 31.8M transactions over 734 days).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.cli import OneLineErrors
from models.schema import ARTICLES_CSV, CUSTOMERS_CSV, TRANSACTIONS_CSV, day_number, day_to_date
from training.synth.catalog import make_catalog
from training.synth.customers import Behaviour, make_customers, make_shoppers, make_tastes
from training.synth.files import article_ids, write_articles, write_customers, write_transactions
from training.synth.shopping import simulate

MAX_DAYS = 36_500
MAX_ARTICLES = 1_000_000  # about 450k products: the real six-digit product-code range holds 850k
MAX_CUSTOMERS = 10_000_000  # 7x the real 1.37M; far more only ends in a MemoryError mid-run


@dataclass(frozen=True)
class SynthConfig:
    """What to generate.

    Args:
        customers: number of customers (rows of ``customers.csv``).
        articles: number of articles (rows of ``articles.csv``).
        days: length of the transaction history in days, ending at ``end_date``.
        seed: random seed; the same config always gives the same bytes.
        end_date: last day of the history (the real file ends on 2020-09-22).
        personas: number of latent taste personas.
        behaviour: shopping-simulation parameters.
        progress: show tqdm progress bars on stderr.
    """

    customers: int = 20_000
    articles: int = 2_000
    days: int = 734
    seed: int = 0
    end_date: dt.date = dt.date(2020, 9, 22)
    personas: int = 12
    behaviour: Behaviour = field(default_factory=Behaviour)
    progress: bool = False

    def __post_init__(self) -> None:
        for name in ("customers", "articles", "days", "personas"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.days > MAX_DAYS:
            raise ValueError(f"days must be at most {MAX_DAYS}, got {self.days}")
        if self.articles > MAX_ARTICLES:
            raise ValueError(f"articles must be at most {MAX_ARTICLES}, got {self.articles}")
        if self.customers > MAX_CUSTOMERS:
            raise ValueError(f"customers must be at most {MAX_CUSTOMERS}, got {self.customers}")
        if self.end_date.toordinal() - self.days < 0:
            raise ValueError(f"{self.days} days ending {self.end_date} would start before year 1")
        if self.seed < 0:
            raise ValueError(f"seed must be non-negative, got {self.seed}")

    @property
    def first_day(self) -> int:
        """First day of the history, in days since 1970-01-01."""
        return day_number(self.end_date) - self.days + 1


@dataclass(frozen=True)
class SynthSummary:
    """What :func:`generate` wrote: row counts, the first and last transaction dates, the files."""

    customers: int
    articles: int
    transactions: int
    first_date: dt.date | None
    last_date: dt.date | None
    files: dict[str, Path]


def generate(config: SynthConfig, out_dir: str | Path) -> SynthSummary:
    """Generate the three CSV files into ``out_dir`` (created if missing).

    Args:
        config: what to generate.
        out_dir: output directory; existing files of the same names are overwritten.

    Returns:
        Row counts, the first and last transaction dates (``None`` without transactions) and
        the paths written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    catalog_rng, customer_rng, habit_rng, shop_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(config.seed).spawn(4)
    )
    catalog = make_catalog(catalog_rng, config.articles, config.first_day, config.days)
    customers = make_customers(customer_rng, config.customers)
    tastes = make_tastes(habit_rng, config.personas)
    shoppers = make_shoppers(habit_rng, customers, tastes, config.behaviour, config.days)
    purchases = simulate(
        catalog, shoppers, tastes, config.behaviour, shop_rng, config.first_day, config.days, config.progress
    )
    files = {name: out / name for name in (CUSTOMERS_CSV, ARTICLES_CSV, TRANSACTIONS_CSV)}
    write_customers(files[CUSTOMERS_CSV], customers)
    write_articles(files[ARTICLES_CSV], catalog)
    write_transactions(
        files[TRANSACTIONS_CSV],
        purchases,
        customers.ids,
        article_ids(catalog),
        config.first_day,
        config.days,
        config.progress,
    )
    dates = [day_to_date(config.first_day + int(purchases.day[i])) for i in (0, -1)] if len(purchases) else []
    return SynthSummary(
        customers=len(customers),
        articles=len(catalog),
        transactions=len(purchases),
        first_date=dates[0] if dates else None,
        last_date=dates[-1] if dates else None,
        files=files,
    )


def _parse_args(argv: list[str] | None) -> tuple[SynthConfig, Path]:
    defaults = SynthConfig()
    parser = OneLineErrors(prog="python -m training.synth", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory (created if missing)")
    parser.add_argument("--customers", type=int, default=defaults.customers)
    parser.add_argument("--articles", type=int, default=defaults.articles)
    parser.add_argument("--days", type=int, default=defaults.days)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--end-date", type=dt.date.fromisoformat, default=defaults.end_date, help="YYYY-MM-DD"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    try:
        config = SynthConfig(
            customers=args.customers,
            articles=args.articles,
            days=args.days,
            seed=args.seed,
            end_date=args.end_date,
            progress=not args.quiet,
        )
    except ValueError as e:
        parser.error(str(e))
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} exists and is not a directory")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        parser.error(f"cannot create --out {args.out}: {e.strerror}")
    if not os.access(args.out, os.W_OK):
        parser.error(f"--out {args.out} is not writable")
    return config, args.out


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the process exit code."""
    config, out = _parse_args(argv)
    try:
        summary = generate(config, out)
    except OSError as e:
        print(f"python -m training.synth: error: {e}", file=sys.stderr)
        return 1
    print(
        f"wrote {summary.customers} customers, {summary.articles} articles, {summary.transactions} "
        f"transactions ({summary.first_date} .. {summary.last_date}) to {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
