"""Configuration of ``python -m training.fit``: the default recipe and the command line over it."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from models.cli import OneLineErrors, add_threads_option
from models.graph.sampler import SamplerConfig
from models.nn.config import ModelConfig
from models.registry import derived
from models.runtime.compile import STRATEGIES
from models.store.log.replay import is_state_dir
from training.tasks.definitions import TASKS

ALL_TASKS = "all"
SAMPLER_STRATEGIES = ("last", "uniform")


class FitError(Exception):
    """A problem with the user's input (arguments, paths, data); reported as one line, exit code 2."""


@dataclass(frozen=True)
class TaskRecipe:
    """How one task is trained; one default for every task and dataset, adapted to the data's size.

    The model's and the sampler's fields default to :class:`models.nn.config.ModelConfig`'s and
    :class:`models.graph.sampler.SamplerConfig`'s (each default is written once); a task's registry
    entry overrides some (``recipe``), the command line any.

    Every training cutoff is used; an epoch is at most ``max_steps_per_epoch`` batches (drawn
    afresh from the rows of every cutoff when there are more), and training stops once the
    validation metric has not improved for ``patience`` epochs (the best epoch is kept).

    Args:
        fanouts: neighbours sampled per hop; also the number of GNN layers.
        aggregation: ``SAGEConv`` neighbour aggregation.
        epochs: most passes (of at most ``max_steps_per_epoch`` batches each).
        max_train_cutoffs: most recent weekly training cutoffs used (``0``: all).
        lr: peak learning rate (linear warm-up, then cosine decay over ``epochs``).
        hidden: width of the GNN, the heads and the purchase dot-product space.
        max_steps_per_epoch: most batches per epoch on tables of up to ``growth_rows`` rows.
        growth_rows: beyond this many training rows the step budget grows with the square root
            of the rows (see :meth:`steps_per_epoch`): at H&M size 120 steps of 256 rows saw 3 %
            of sales' 10.6M rows and both sales and purchase were still improving at the last epoch.
        max_growth: the most that growth multiplies ``max_steps_per_epoch`` by (bounds the
            time at any size; a user's ``--max-steps-per-epoch`` is taken as given, no growth).
        min_steps_per_epoch: on small data the batch shrinks (down to 32 rows) so an epoch still
            has this many steps; a few hundred training rows would otherwise get a handful of
            updates in all.
        patience: epochs without a better validation score before training stops.
        per_day: most edges per (node, day) the sampler considers (``0``: no limit); see
            :class:`models.graph.sampler.SamplerConfig`.
        log_target: the sales head learns ``log1p`` of its target (see
            :class:`models.nn.heads.SalesHead`; docs/decisions.md, "Sales in log space").
        negatives: purchase: articles drawn uniformly from the catalogue as extra negatives of
            every batch, as a share of its rows (see :class:`training.fit.batches.TrainBatches`).
        average_half_life: half-life in epochs of the moving average of the weights that each
            epoch is validated and kept with (:mod:`training.fit.averaging`; ``0``: the last
            step's weights).
        pair_value: purchase: the repeat score also reads what the pair's lines were worth (see
            :class:`models.nn.heads.PurchaseHead`; docs/decisions.md, "What the pair's lines were worth").
        popular_candidates: purchase: the repeat score also ranks this many of last week's best
            sellers the customer never bought (docs/decisions.md, "Last week's best sellers beside
            the history").
    """

    fanouts: tuple[int, ...] = SamplerConfig.fanouts
    aggregation: str = ModelConfig.aggregation
    epochs: int = 10
    max_train_cutoffs: int = 0
    lr: float = 0.003
    hidden: int = ModelConfig.hidden
    max_steps_per_epoch: int = 120
    growth_rows: int = 256_000
    max_growth: float = 5.0
    min_steps_per_epoch: int = 30
    patience: int = 3
    per_day: int = SamplerConfig.per_day
    log_target: bool = ModelConfig.log_target
    negatives: float = 0.25
    average_half_life: float = 0.0
    pair_value: bool = ModelConfig.pair_value
    popular_candidates: int = ModelConfig.popular_candidates

    def batch_size(self, rows: int, largest: int) -> int:
        """Rows per step for a table of ``rows`` rows: ``largest``, or smaller on small data (see
        ``min_steps_per_epoch``), never below 32."""
        return max(min(largest, 32), min(largest, rows // self.min_steps_per_epoch))

    def steps_per_epoch(self, rows: int) -> int:
        """Most batches per epoch for ``rows`` training rows: ``max_steps_per_epoch``, times
        ``sqrt(rows / growth_rows)`` for larger tables, at most ``max_growth`` times."""
        growth = min(self.max_growth, max(1.0, math.sqrt(rows / self.growth_rows)))
        return round(self.max_steps_per_epoch * growth)

    def model_config(self) -> ModelConfig:
        return ModelConfig(hidden=self.hidden, head_hidden=self.hidden, embedding_dim=self.hidden,
                           num_layers=len(self.fanouts), aggregation=self.aggregation,
                           log_target=self.log_target, pair_value=self.pair_value,
                           popular_candidates=self.popular_candidates)


RECIPES: Mapping[str, TaskRecipe] = derived(lambda spec: TaskRecipe(**spec.recipe))
"""Per task, the defaults with its registry entry's ``recipe`` overrides (follows registrations)."""


@dataclass
class FitConfig:
    """What to train and how; ``None`` fields take the task's :data:`RECIPES` value.

    Args:
        data: the data directory (the three H&M CSV files, or the files its ``relserve.toml`` names).
        out: artifacts directory; ``<out>/<task>/`` bundles and ``<out>/snapshot/``.
        tasks: tasks to train, in order.
        spec: the dataset spec file (``None``: ``<data>/relserve.toml`` if present, else the H&M
            layout; see docs/dataset-spec.md).
        all_tasks: ``tasks`` are ``--task all``: a task the data cannot train (sales on count-only
            data) is skipped with a warning instead of refused.
        epochs, max_train_cutoffs, lr, fanouts, hidden, max_steps_per_epoch, patience, per_day,
            aggregation, negatives, average_half_life: override every task's recipe
            (``max_train_cutoffs=0``: every training cutoff).
        compile: ``none``, ``dynamic`` or ``buckets`` for the training step.
        seed: seeds the model initialisation, shuffling, neighbour sampling and the LightGBM baselines.
        batch_size: seeds per training step.
        train_strategy: sampler strategy in training; ``last`` is what serving samples.
        weight_decay: Adam weight decay.
        warmup_fraction: share of the steps spent warming the learning rate up.
        final_lr_ratio: learning rate at the last step relative to the peak.
        serve_batch_size: largest serving batch; the bundle's bucket ladder is fitted for it.
        threads: torch intra-op threads (``None``: torch's default, every core of the machine).
        time_budget: wall-clock minutes for the whole run (``None``: unbounded); each task gets an
            equal share of what is left when it starts and stops before an epoch that would not fit,
            keeping its best epoch so far (see :mod:`training.fit.budget`).
        eval_batch_size: rows per forward when scoring the val and test tables.
        test_weeks_back: move the validation and test weeks this many weeks before the last full
            week (the backtest's rolling origin, :mod:`training.bench.backtest`); the labels after
            the test week are never read.
        max_val_rows: most validation rows (a fixed random subset when there are more; ``0``: all).
            Validation runs after every epoch to pick the best one, and a few tens of thousands of
            rows pin a metric down to its third decimal; the test week is always scored in full.
        warm_serving_cache: compile the serving buckets now and store the compile cache in the
            bundle, so the first server start is warm (costs compile time here).
        rebuild_snapshot: overwrite an existing snapshot in ``<out>/snapshot/``.
        progress: progress bars and log lines on stderr.
        next_version: write each bundle as the next version ``<out>/<task>/<N>/`` of the model
            repository instead of ``<out>/<task>/`` (always so when ``data`` is a server's state
            directory: the retrain loop, docs/model-repository.md).
        ingest_log: the state directory's log, as the server was given it (``wal`` or a
            ``redis://`` URL); only read when ``data`` is a state directory.
    """

    data: Path
    out: Path
    tasks: tuple[str, ...]
    spec: Path | None = None
    all_tasks: bool = False
    epochs: int | None = None
    max_train_cutoffs: int | None = None
    lr: float | None = None
    fanouts: tuple[int, ...] | None = None
    hidden: int | None = None
    max_steps_per_epoch: int | None = None
    patience: int | None = None
    per_day: int | None = None
    aggregation: str | None = None
    negatives: float | None = None
    average_half_life: float | None = None
    pair_value: bool | None = None
    popular_candidates: int | None = None
    compile: str = "none"
    seed: int = 0
    batch_size: int = 256
    train_strategy: str = "last"
    weight_decay: float = 0.0
    warmup_fraction: float = 0.05
    final_lr_ratio: float = 0.05
    serve_batch_size: int = 32
    threads: int | None = None
    time_budget: float | None = None
    eval_batch_size: int = 512
    max_val_rows: int = 20_000
    test_weeks_back: int = 0
    warm_serving_cache: bool = False
    rebuild_snapshot: bool = False
    progress: bool = True
    next_version: bool = False
    ingest_log: str = "wal"

    def __post_init__(self) -> None:
        positive = {"epochs": self.epochs, "hidden": self.hidden, "batch_size": self.batch_size,
                    "serve_batch_size": self.serve_batch_size, "eval_batch_size": self.eval_batch_size,
                    "max_steps_per_epoch": self.max_steps_per_epoch, "patience": self.patience}
        for name, value in positive.items():
            if value is not None and value < 1:
                raise FitError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if self.time_budget is not None and not (math.isfinite(self.time_budget) and self.time_budget > 0):
            raise FitError(f"--time-budget must be a positive number of minutes, got {self.time_budget}")
        if self.test_weeks_back < 0:
            raise FitError(f"--test-weeks-back must be 0 (the last week) or more, got {self.test_weeks_back}")
        if self.max_val_rows < 0:
            raise FitError(f"--max-val-rows must be 0 (all) or more, got {self.max_val_rows}")
        if self.per_day is not None and self.per_day < 0:
            raise FitError(f"--per-day must be 0 (no limit) or more, got {self.per_day}")
        if self.negatives is not None and not (math.isfinite(self.negatives) and self.negatives >= 0):
            raise FitError(f"--negatives must be a non-negative share of the batch, got {self.negatives}")
        if self.popular_candidates is not None and self.popular_candidates < 0:
            raise FitError("--popular-candidates must be 0 (the history only) or more, "
                           f"got {self.popular_candidates}")
        if self.max_train_cutoffs is not None and self.max_train_cutoffs < 0:
            raise FitError(f"--max-train-cutoffs must be 0 (all) or more, got {self.max_train_cutoffs}")
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise FitError(f"--lr must be a positive number, got {self.lr}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise FitError(f"--weight-decay must be a non-negative number, got {self.weight_decay}")
        if self.threads is not None and self.threads < 1:
            raise FitError(f"--threads must be a positive number or auto, got {self.threads}")
        if self.average_half_life is not None and not (math.isfinite(self.average_half_life)
                                                       and self.average_half_life >= 0):
            raise FitError(f"--average-half-life must be 0 (off) or a positive number of epochs, "
                           f"got {self.average_half_life}")
        if not 0 <= self.seed < 2**32:  # numpy's generators take seeds in this range only
            raise FitError(f"--seed must be in 0..{2**32 - 1}, got {self.seed}")
        if self.fanouts is not None and (not self.fanouts or min(self.fanouts) < 1):
            raise FitError(f"--fanouts must be positive, got {list(self.fanouts)}")
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown or not self.tasks:
            raise FitError(f"unknown task {unknown[0] if unknown else ''!r}; use one of "
                           f"{', '.join([*TASKS, ALL_TASKS])}")
        if self.compile not in STRATEGIES:
            raise FitError(f"unknown --compile {self.compile!r}; use one of {', '.join(STRATEGIES)}")
        if self.train_strategy not in SAMPLER_STRATEGIES:
            raise FitError(f"unknown --train-strategy {self.train_strategy!r}; use last or uniform")

    @property
    def from_state_dir(self) -> bool:
        """Whether ``data`` is a server's state directory (the retrain loop)."""
        return is_state_dir(self.data)

    @property
    def writes_versions(self) -> bool:
        """Whether bundles go to ``<out>/<task>/<N>/`` (see ``next_version``)."""
        return self.next_version or self.from_state_dir

    def recipe(self, task: str) -> TaskRecipe:
        """The task's recipe with this config's overrides applied."""
        names = ("epochs", "max_train_cutoffs", "lr", "fanouts", "hidden", "max_steps_per_epoch", "patience",
                 "per_day", "aggregation", "negatives", "average_half_life", "pair_value",
                 "popular_candidates")
        overrides = {name: getattr(self, name) for name in names if getattr(self, name) is not None}
        if "max_steps_per_epoch" in overrides:  # the user's number, as given
            overrides["max_growth"] = 1.0
        return dataclasses.replace(RECIPES[task], **overrides)


def _build_parser() -> argparse.ArgumentParser:
    d = FitConfig(Path(), Path(), tuple(TASKS))
    p = OneLineErrors(prog="python -m training.fit",
                       description="Train the relational GNN of each task, evaluate it against the baselines "
                                   "and write one checkpoint bundle per task.")
    p.add_argument("--data", type=Path, required=True,
                   help="data directory: the three H&M CSV files, or any files its relserve.toml describes; "
                        "or a server's --state-dir: train on the graph it serves (its snapshot plus every "
                        "ingested row) and write the next version of each task into --out, the artifacts "
                        "that server serves")
    p.add_argument("--spec", type=Path, metavar="FILE",
                   help="dataset spec (TOML; default: DATA/relserve.toml if present, else the H&M layout)")
    p.add_argument("--task", required=True, choices=[*TASKS, ALL_TASKS], help="task to train, or all")
    p.add_argument("--out", type=Path, required=True, help="artifacts directory (bundles and snapshot)")
    p.add_argument("--next-version", action="store_true",
                   help="write each bundle as the next version <out>/<task>/<N>/ of the model repository "
                        "(the default with a state directory as --data)")
    p.add_argument("--ingest-log", default=d.ingest_log, metavar="URL",
                   help="with a state directory as --data: its log, wal or redis://host:port[/db][?stream=NAME]"
                        " as the server was given it")
    p.add_argument("--epochs", type=int, help=f"most epochs (default: {TaskRecipe.epochs})")
    p.add_argument("--max-steps-per-epoch", type=int,
                   help="most batches per epoch, drawn from every cutoff (default: "
                        f"{TaskRecipe.max_steps_per_epoch} up to {TaskRecipe.growth_rows:,} training rows, "
                        f"growing with the square root of the rows beyond, at most "
                        f"{TaskRecipe.max_growth:g}x)")
    p.add_argument("--patience", type=int,
                   help="epochs without a better validation score before stopping "
                        f"(default: {TaskRecipe.patience})")
    p.add_argument("--compile", default=d.compile, choices=STRATEGIES, help="training-step compile strategy")
    p.add_argument("--seed", type=int, default=d.seed,
                   help="seeds the initialisation, the shuffling, the neighbour sampling and LightGBM")
    p.add_argument("--max-train-cutoffs", type=int,
                   help="most recent weekly training cutoffs to use, 0: all (default: 0)")
    p.add_argument("--batch-size", type=int, default=d.batch_size,
                   help="seeds per training step (fewer on small data, see docs/training.md)")
    p.add_argument("--lr", type=float, help="peak learning rate (default: "
                   + ", ".join(f"{task} {recipe.lr:g}" for task, recipe in RECIPES.items()) + ")")
    p.add_argument("--fanouts", type=int, nargs="+",
                   help=f"neighbours per hop (default: {list(TaskRecipe.fanouts)})")
    p.add_argument("--per-day", type=int,
                   help=f"most neighbours per node and day the sampler considers, 0: no limit "
                        f"(default: {TaskRecipe.per_day})")
    p.add_argument("--aggregation",
                   help="neighbour aggregation per hop: mean, sum, max, std, or several joined by + "
                        f"(default: {TaskRecipe.aggregation})")
    p.add_argument("--negatives", type=float, metavar="SHARE",
                   help="purchase: articles drawn uniformly from the catalogue as extra negatives of every "
                        f"batch, as a share of its rows (default: {TaskRecipe.negatives:g})")
    p.add_argument("--hidden", type=int, help=f"width of the GNN and heads (default: {TaskRecipe.hidden})")
    p.add_argument("--train-strategy", default=d.train_strategy, choices=SAMPLER_STRATEGIES,
                   help="neighbour sampling in training (serving samples the last neighbours)")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay, help="Adam weight decay")
    p.add_argument("--average-half-life", type=float, metavar="EPOCHS",
                   help="validate and keep a moving average of the weights with this half-life in epochs, "
                        "0: the last step's weights (default: "
                        + ", ".join(f"{task} {r.average_half_life:g}" for task, r in RECIPES.items()) + ")")
    p.add_argument("--pair-value", action=argparse.BooleanOptionalAction,
                   help="purchase: the repeat score also reads what the customer's lines of each past "
                        f"article were worth (default: {str(TaskRecipe.pair_value).lower()})")
    p.add_argument("--popular-candidates", type=int, metavar="N",
                   help="purchase: the repeat score also ranks the N articles sold most in the last 7 days "
                        f"that the customer never bought, 0: its history only "
                        f"(default: {TaskRecipe.popular_candidates})")
    p.add_argument("--serve-batch-size", type=int, default=d.serve_batch_size,
                   help="largest serving batch the bundle's bucket ladder holds")
    add_threads_option(p, "torch's default, every core of the machine")
    p.add_argument("--time-budget", type=float, metavar="MINUTES",
                   help="wall-clock minutes for the whole run, shared by its tasks: a task stops before an "
                        "epoch that would not fit and keeps its best epoch (default: no limit)")
    p.add_argument("--eval-batch-size", type=int, default=d.eval_batch_size,
                   help="rows per forward when scoring validation and test")
    p.add_argument("--max-val-rows", type=int, default=d.max_val_rows,
                   help="most validation rows scored after each epoch, a fixed random subset when there are "
                        "more (0: all; the test week is always scored in full)")
    p.add_argument("--test-weeks-back", type=int, default=d.test_weeks_back, metavar="N",
                   help="test on the week N weeks before the last full one, validate on the week before it "
                        "and train on the weeks before that (a backtest's origin; default: 0)")
    p.add_argument("--warm-serving-cache", action="store_true",
                   help="compile the serving buckets now and store the compile cache in each bundle")
    p.add_argument("--rebuild-snapshot", action="store_true",
                   help="rebuild <out>/snapshot from the CSVs even if one exists")
    p.add_argument("--quiet", action="store_true", help="no progress bars or log lines")
    return p


def parse_args(argv: list[str] | None = None) -> FitConfig:
    """Parse the command line into a :class:`FitConfig`; bad values exit with one line and code 2."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        config = FitConfig(
            data=args.data, out=args.out, tasks=tuple(TASKS) if args.task == ALL_TASKS else (args.task,),
            spec=args.spec, all_tasks=args.task == ALL_TASKS,
            epochs=args.epochs, max_train_cutoffs=args.max_train_cutoffs, lr=args.lr,
            fanouts=tuple(args.fanouts) if args.fanouts else None, hidden=args.hidden,
            max_steps_per_epoch=args.max_steps_per_epoch, patience=args.patience, per_day=args.per_day,
            aggregation=args.aggregation, negatives=args.negatives, compile=args.compile,
            seed=args.seed, batch_size=args.batch_size, train_strategy=args.train_strategy,
            weight_decay=args.weight_decay, average_half_life=args.average_half_life,
            pair_value=args.pair_value, popular_candidates=args.popular_candidates,
            serve_batch_size=args.serve_batch_size, threads=args.threads,
            time_budget=args.time_budget, eval_batch_size=args.eval_batch_size,
            max_val_rows=args.max_val_rows, test_weeks_back=args.test_weeks_back,
            warm_serving_cache=args.warm_serving_cache, rebuild_snapshot=args.rebuild_snapshot,
            progress=not args.quiet, next_version=args.next_version, ingest_log=args.ingest_log)
        check_paths(config)
    except FitError as exc:
        parser.error(str(exc))
    return config


def check_paths(config: FitConfig) -> None:
    """Fail early, before any work, on a missing ``--data`` or ``--spec`` or an unwritable ``--out``."""
    if not config.data.is_dir():
        raise FitError(f"--data {config.data}: no such directory")
    if config.from_state_dir and config.rebuild_snapshot:
        raise FitError(f"--rebuild-snapshot: --data {config.data} is a server's state directory, whose "
                       "graph is read as it is served")
    if config.spec is not None and not config.spec.is_file():
        raise FitError(f"--spec {config.spec}: no such file")
    if config.out.exists() and not config.out.is_dir():
        raise FitError(f"--out {config.out}: exists and is not a directory")
    try:
        config.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FitError(f"--out {config.out}: cannot create it ({exc.strerror})") from None
    if not os.access(config.out, os.W_OK | os.X_OK):
        raise FitError(f"--out {config.out}: not writable")
