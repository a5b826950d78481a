"""Train, evaluate and bundle the relational GNN of each task.

``python -m training.fit --data DIR [--spec FILE] --task {churn,sales,purchase,all} --out ARTIFACTS
[--epochs N] [--compile {none,dynamic,buckets}] [--seed S] ...`` (``--help`` lists the rest)

For each task: build the task tables from the graph snapshot, train (one progress bar per
epoch), keep the epoch with the best validation score (measured through the serving inference
path; for a task whose recipe averages its weights, :mod:`training.fit.averaging`, of that
average), score it on the test week next to every baseline, and write the bundle
``ARTIFACTS/<task>/`` (weights, config, metrics.json) beside the snapshot ``ARTIFACTS/snapshot/``
(or, with ``--next-version``, the next version ``ARTIFACTS/<task>/<N>/`` of the model repository).
With a server's state directory as ``--data`` it trains on the graph that server serves and writes
next versions, which the server picks up by itself (the retrain loop, docs/model-repository.md).
Ends with one table of model vs baselines on the test week.

Under ``torchrun --nproc-per-node N -m training.fit ...`` the N processes train one model with
DistributedDataParallel and rank 0 alone evaluates, logs and writes (:mod:`training.fit.distributed`).
"""

from __future__ import annotations

import dataclasses
import resource
import sys
import time
from functools import partial
from typing import Any

import numpy as np
import torch

from models.feature_definitions import snapshot_schema
from models.graph.features import table_specs
from models.graph.sampler import SamplerConfig, TemporalSampler
from models.graph.temporal_features import mean_price
from models.nn.model import TaskModel
from models.registry import BINARY
from models.runtime.bundle import BundleConfig, save_bundle
from models.runtime.inference import TaskInference, fitted_ladder
from models.schema import day_to_date
from models.store.snapshot import GraphSnapshot
from models.store.tables import Transactions
from training.fit import distributed
from training.fit.batches import TrainBatches
from training.fit.budget import TimeBudget, estimate_task, minutes
from training.fit.calibrate import calibrated_metrics
from training.fit.config import FitConfig, FitError, parse_args
from training.fit.data import task_splits, training_snapshot
from training.fit.dataset import dataset_spec, trainable_tasks
from training.fit.evaluate import (
    Metrics,
    baseline_predictions,
    evaluate_baselines,
    evaluate_model,
    predict_table,
)
from training.fit.loop import LRSchedule, Trainer
from training.fit.probability import calibrate_binary
from training.fit.report import (
    baseline_warning,
    metrics_document,
    reliability_tables,
    results_table,
    split_result,
)
from training.fit.versions import NextVersion
from training.tasks.day_windows import sort_by_day
from training.tasks.definitions import TASKS
from training.tasks.gbdt_features import EntityColumns
from training.tasks.metrics import compute_metrics, target_std
from training.tasks.paired import paired_differences
from training.tasks.table import TaskTable

PROG = "python -m training.fit"


def log(config: FitConfig, message: str) -> None:
    if config.progress:
        print(message, file=sys.stderr, flush=True)


def fit_task(config: FitConfig, task: str, snapshot: GraphSnapshot, tx: Transactions,
             budget: TimeBudget) -> dict[str, Any]:
    """Train, select, test and save one task within its share of ``budget``; returns its ``metrics.json``."""
    started = time.perf_counter()
    share = budget.start_task()
    spec, recipe = TASKS[task], config.recipe(task)
    clock = time.perf_counter()
    tables = task_splits(task, tx, snapshot, recipe.max_train_cutoffs, config.max_val_rows, config.seed,
                         config.test_weeks_back)
    log(config, f"{task}: {len(tables['train']):,} training rows, {len(tables['val']):,} val, "
                f"{len(tables['test']):,} test ({time.perf_counter() - clock:.1f} s); {recipe}")

    # the model, its training batches, and the bundle config with the serving bucket ladder
    torch.manual_seed(config.seed)
    model = TaskModel(task, table_specs(snapshot), recipe.model_config())
    if hasattr(model.head, "scale"):  # sales: the head learns in units of a selling article's typical week
        sold = tables["train"].label[tables["train"].label > 0]
        model.head.scale.fill_(float(sold.mean()) if len(sold) else 1.0)
        model.head.spend_unit.fill_(mean_price(snapshot) / float(model.head.scale))
    train_sampler = TemporalSampler(snapshot, SamplerConfig(recipe.fanouts, config.train_strategy,
                                                            recipe.per_day))
    batch_size = recipe.batch_size(len(tables["train"]), config.batch_size)
    batches = TrainBatches(snapshot, tables["train"], train_sampler, spec.entity_type, batch_size,
                           config.seed, recipe.steps_per_epoch(len(tables["train"])),
                           negatives=round(recipe.negatives * batch_size),
                           candidates=model.config.popular_candidates if spec.ranks else 0)
    serve_sampler = TemporalSampler(snapshot, SamplerConfig(recipe.fanouts, "last", recipe.per_day))
    serve_ladder = fitted_ladder(snapshot, serve_sampler, spec.entity_type, config.serve_batch_size,
                                 config.seed)
    bundle = BundleConfig(task=task, model=model.config, sampler=train_sampler.config,
                          specs=table_specs(snapshot), ladders={spec.entity_type: serve_ladder},
                          max_batch_size=config.serve_batch_size, fingerprint=snapshot.fingerprint,
                          snapshot_schema=snapshot_schema(snapshot))
    inference = TaskInference(bundle, model, snapshot, compile="none", device=distributed.device())
    columns = EntityColumns.from_snapshot(snapshot)
    clock = time.perf_counter()
    predicted = {split: baseline_predictions(task, tx, tables[split], columns, config.seed)
                 for split in ("val", "test") if distributed.is_main()}
    baselines = {split: evaluate_baselines(task, tx, tables[split], predictions=predicted[split])
                 for split in predicted}
    log(config, f"{task}: baselines on val and test ({time.perf_counter() - clock:.1f} s)")

    # say what will run and how long it should take; then train, keeping the best validation epoch
    plan = estimate_task(model, batches, inference, tables["val"], tables["test"], recipe.epochs,
                         config.eval_batch_size)
    log(config, plan.line(task) + (f"; time budget {minutes(share)}" if share is not None else ""))
    schedule = LRSchedule(recipe.lr, recipe.epochs * len(batches), config.warmup_fraction,
                          config.final_lr_ratio)
    trainer = Trainer(model, batches, schedule, recipe.epochs, config.weight_decay, config.compile,
                      config.progress, recipe.average_half_life)
    best_epoch, best_val, best_state = -1, {}, {}
    epochs_run, stopped_by_budget, epoch_seconds = 0, False, plan.epoch_seconds
    for epoch in range(recipe.epochs):
        # rank 0's clock decides for every rank (torchrun): all stop after the same epoch
        if epoch and not distributed.from_main(partial(budget.allows, epoch_seconds, plan.test_seconds)):
            log(config, f"{task}: stopping, another epoch (~{minutes(epoch_seconds)}) would not fit "
                        "in the time budget")
            stopped_by_budget = True
            break
        model.train()
        clock = time.perf_counter()
        loss = trainer.run_epoch(epoch)
        model.eval()  # evaluation (and the purchase article keys) never run in training mode
        trained = time.perf_counter() - clock
        with trainer.averaged():  # the weights validated are the ones kept (training.fit.averaging)
            # same stop on every rank; purchase also picks its repeat shift here (training.fit.calibrate)
            val = distributed.from_main(partial(score, inference, tables["val"], "val", config,
                                                calibrate=True))
            better = best_epoch < 0 or improves(val[spec.primary_metric], best_val[spec.primary_metric],
                                                spec.higher_is_better)
            if better:
                best_epoch, best_val = epoch, val
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        epochs_run, epoch_seconds = epoch + 1, time.perf_counter() - clock
        shift = f", repeat shift {float(model.head.repeat_shift):g}" if spec.ranks else ""
        log(config, f"{task} epoch {epoch + 1}: train loss {loss:.4f}, "
                    f"val {spec.primary_metric} {val[spec.primary_metric]:.4f}{shift} "
                    f"(train {trained:.1f} s, val {epoch_seconds - trained:.1f} s)")
        if not better and epoch - best_epoch >= recipe.patience:
            log(config, f"{task}: stopping early, no better validation score for {recipe.patience} epochs")
            break
    model.load_state_dict(best_state)
    model.eval()
    if not distributed.is_main():
        return {}
    scale = target_std(tables["train"].label) if "mae" in spec.metrics else None

    calibration = None
    if spec.task_type == BINARY:  # the served probability is calibrated (training.fit.probability)
        calibration = calibrate_binary(inference, tables["val"], config.eval_batch_size, config.progress)
        best_val = score(inference, tables["val"], "val", config)
        log(config, f"{task}: calibrated on validation (scale {calibration['scale']:.3f}, bias "
                    f"{calibration['bias']:+.3f}; val ECE {calibration['val_ece_before']:.4f} -> "
                    f"{calibration['val_ece_after']:.4f})")

    # test the selected weights, write the bundle, optionally warm its serving compile cache
    test_predictions = predict_table(inference, tables["test"], config.eval_batch_size, config.progress,
                                     f"{task} test")
    test = score(inference, tables["test"], "test", config, test_predictions)
    document = metrics_document(task, split_result(best_val, baselines["val"]),
                                split_result(test, baselines["test"]), scale)
    document["paired_test"] = paired_differences(task, test_predictions, predicted["test"], tables["test"],
                                                 seed=config.seed)
    for name, paired in document["paired_test"].items():
        log(config, f"{task}: test {spec.primary_metric}, model - {name} {paired['difference']:+.4f} "
                    f"(paired bootstrap standard error {paired['se']:.4f} over {len(tables['test']):,} rows)")
    if calibration is not None:
        document["calibration"] = calibration
        document["reliability_test"] = reliability_tables(tables["test"], test_predictions, predicted["test"])
    warning = baseline_warning(document)
    if warning:
        print(f"{PROG}: warning: {warning}", file=sys.stderr, flush=True)
    bundle.training = {
        "epochs": recipe.epochs, "epochs_run": epochs_run, "best_epoch": best_epoch + 1,
        "max_steps_per_epoch": recipe.max_steps_per_epoch, "steps_per_epoch": len(batches),
        "steps_run": trainer.steps_done,
        "seed": config.seed, "lr": recipe.lr, "average_half_life": recipe.average_half_life,
        **({"repeat_shift": float(model.head.repeat_shift), "catalogue_negatives": batches.negatives}
           if spec.ranks else {}),
        "batch_size": batch_size, "max_train_cutoffs": recipe.max_train_cutoffs,
        "train_rows": len(tables["train"]), "val_rows": len(tables["val"]),
        "test_weeks_back": config.test_weeks_back,
        "test_week_start": day_to_date(int(tables["test"].seed_time[0])).isoformat(),
        "sampler_strategy": config.train_strategy,
        "compile": config.compile, "stopped_by_time_budget": stopped_by_budget,
        "time_budget_seconds": None if share is None else round(share, 1),
        "training_buckets": sum(len(ladder.buckets) for ladder in trainer.ladders),
        "graphs_compiled_per_epoch": trainer.graphs_per_epoch,
        "processes": distributed.world_size(),  # >1: trained under torchrun (DDP)
        **({"calibration": {k: calibration[k] for k in ("method", "scale", "bias")}} if calibration else {}),
        "seconds": round(time.perf_counter() - started, 1)}
    if config.from_state_dir:  # the retrain loop: which ingested rows this version has seen
        bundle.training["log_sequence"] = snapshot.sequence
    version = NextVersion.of(config.out, task) if config.writes_versions else None
    directory = config.out / task if version is None else version.staging
    save_bundle(directory, bundle, model, document)
    if config.warm_serving_cache:
        warm = TaskInference.from_bundle(directory, snapshot, compile="buckets",
                                         max_batch_size=config.serve_batch_size).warm_up()
        log(config, f"{task}: serving compile cache {'saved' if warm.cache_saved else 'not saved'} "
                    f"({warm.buckets} buckets, {warm.seconds:.1f} s)")
    if version is not None:
        directory = version.publish()  # complete and in place: a polling server may load it now
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    log(config, f"{task}: best epoch {best_epoch + 1}, wrote {directory} "
                f"({time.perf_counter() - started:.1f} s, peak memory of the run so far {peak:.1f} GiB)")
    return document


def improves(value: float, best: float, higher_is_better: bool) -> bool:
    return value > best if higher_is_better else value < best


def score(inference: TaskInference, table: TaskTable, split: str, config: FitConfig,
          predictions: np.ndarray | None = None, calibrate: bool = False) -> Metrics:
    """The model's metrics on ``table`` (of ``predictions`` when given); with ``calibrate``, purchase
    first picks its repeat shift there."""
    args = (inference, table, config.eval_batch_size, config.progress, f"{inference.task} {split}")
    try:
        if predictions is not None:
            return compute_metrics(TASKS[inference.task], predictions, table)
        if calibrate and TASKS[inference.task].ranks:
            return calibrated_metrics(*args)[0]
        return evaluate_model(*args)
    except ValueError as exc:  # e.g. a week in which every customer churned: AUROC is undefined
        raise FitError(f"{inference.task}: cannot score the {split} split ({exc})") from None


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    distributed.init_from_env()
    main_rank = distributed.is_main()
    if not main_rank:  # one writer: only rank 0 logs, evaluates and writes (and rebuilds a snapshot)
        config = dataclasses.replace(config, progress=False, rebuild_snapshot=False)
    if config.threads:
        torch.set_num_threads(config.threads)
    try:
        spec = dataset_spec(config.data, config.spec)
        tasks, skipped = trainable_tasks(config.tasks, spec, config.all_tasks)
        for line in skipped if main_rank else ():
            print(f"{PROG}: warning: {line}", file=sys.stderr, flush=True)
        with training_snapshot(config, spec) as snapshot:
            tx = sort_by_day(snapshot.transactions())  # once: the tasks and baselines read day windows
            seconds = None if config.time_budget is None else config.time_budget * 60
            budget = TimeBudget(seconds, len(tasks))
            documents = [fit_task(config, task, snapshot, tx, budget) for task in tasks]
    except FitError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        distributed.shutdown()
    if not main_rank:
        return 0
    print(results_table(documents, "val"))
    print(results_table(documents, "test"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
