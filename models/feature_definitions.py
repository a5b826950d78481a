"""The definition of the model's computed inputs: names, windows and scales of the seed-time temporal
aggregates (:mod:`models.graph.temporal_features`) and of the purchase history's pair features
(:mod:`models.graph.history`). The graph layer computes them; the network reads their widths.

:func:`feature_definition` is the versioned summary of these values and :func:`snapshot_schema`
the columns a snapshot contributes; a bundle records both, and loading compares them with this
code and the snapshot it is served over (:mod:`models.runtime.bundle_inputs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import torch
from torch import Tensor

FEATURE_VERSION = 3
"""Version of the computed inputs. Bump it when a formula changes in a way the values that
:func:`feature_definition` lists do not show; a changed value there is caught by itself."""

WINDOWS_DAYS: tuple[int, ...] = (7, 14, 28, 91, 364)
RECENCY_CAP_DAYS = 365
ACTIVE_WEEKS: tuple[int, ...] = (4, 8)
"""A customer's regularity: the share of its last ``n`` whole weeks (7-day blocks ending at the seed
time) with a purchase. Articles get zeros: their weekly sales are already in the count windows."""
FEATURE_NAMES: tuple[str, ...] = (
    *(f"{kind}_{w}d" for w in WINDOWS_DAYS for kind in ("count", "spend", "days")),
    "count_all", "days_all", "days_since_last", "days_since_first", "has_history",
    *(f"weeks_active_{n}w" for n in ACTIVE_WEEKS),
)
NUM_TEMPORAL = len(FEATURE_NAMES)
# The log1p values of counts reach ~10 on busy nodes; this keeps the inputs of the encoder near unit scale.
LOG_SCALE = 1.0 / 4.0
SPEND_COLUMNS = tuple(FEATURE_NAMES.index(f"spend_{w}d") for w in WINDOWS_DAYS)  # every third, from 1

HISTORY_SLOTS = 128
"""Most recent distinct articles kept per customer (the ``N`` of every history tensor)."""
HISTORY_EDGES = 1024
"""Most recent purchases of a customer read to build its history (bounds the work per customer)."""
PAIR_WINDOWS = (7, 28, 91)
"""Day windows of the recent-count features."""
NUM_POPULARITY = len(PAIR_WINDOWS) + 2
"""Per article: log counts over :data:`PAIR_WINDOWS` and over the day before, log days since its last sale."""
NUM_PAIR = 3 * len(PAIR_WINDOWS) + 11 + NUM_POPULARITY
"""Per (customer, past article) pair, see :func:`models.graph.history.customer_history`."""
NUM_PAIR_VALUE = 3
"""Per pair, what its lines were worth (:attr:`models.nn.inputs.PurchaseHistory.value`)."""


def window_spend(features: Tensor) -> Tensor:
    """``(N, NUM_TEMPORAL)`` features -> ``(N, len(WINDOWS_DAYS))`` spend over each window in
    units of the mean price (undoing the features' ``log1p`` scaling)."""
    return torch.expm1(features[:, SPEND_COLUMNS[0]:SPEND_COLUMNS[-1] + 1:3] / LOG_SCALE)


def feature_definition() -> dict[str, Any]:
    """The definition of the computed inputs as this code computes them, in JSON types.

    Returns:
        ``{"version", "temporal": {names, windows_days, active_weeks, recency_cap_days, log_scale},
        "history": {slots, edges, pair_windows, num_popularity, num_pair, num_pair_value}}``.
    """
    return {
        "version": FEATURE_VERSION,
        "temporal": {"names": list(FEATURE_NAMES), "windows_days": list(WINDOWS_DAYS),
                     "active_weeks": list(ACTIVE_WEEKS), "recency_cap_days": RECENCY_CAP_DAYS,
                     "log_scale": LOG_SCALE},
        "history": {"slots": HISTORY_SLOTS, "edges": HISTORY_EDGES, "pair_windows": list(PAIR_WINDOWS),
                    "num_popularity": NUM_POPULARITY, "num_pair": NUM_PAIR,
                    "num_pair_value": NUM_PAIR_VALUE},
    }


def _version_1() -> dict[str, Any]:
    # Written out, not derived from the constants above: bundles that predate recorded definitions
    # are read as this, so it must keep saying what version 1 was after the constants change.
    windows = [7, 14, 28, 91, 364]
    names = [f"{kind}_{w}d" for w in windows for kind in ("count", "spend", "days")]
    return {
        "version": 1,
        "temporal": {"names": [*names, "count_all", "days_all", "days_since_last", "days_since_first",
                               "has_history"],
                     "windows_days": windows, "recency_cap_days": 365, "log_scale": 0.25},
        "history": {"slots": 128, "edges": 1024, "pair_windows": [7, 28, 91], "num_popularity": 5,
                    "num_pair": 23},
    }


FEATURE_DEFINITION_V1: dict[str, Any] = _version_1()
"""Version 1, the inputs of every bundle written before bundles recorded their definition."""


class SchemaSource(Protocol):
    """Anything naming its feature columns, e.g. :class:`models.store.snapshot.GraphSnapshot`."""

    categorical_names: Mapping[str, tuple[str, ...]]
    numeric_names: Mapping[str, tuple[str, ...]]
    cardinalities: Mapping[str, tuple[int, ...]]


def snapshot_schema(source: SchemaSource) -> dict[str, dict[str, list]]:
    """Per node type, the feature columns a snapshot holds, in JSON types.

    Names and value counts only, never contents: a bundle stays valid over any snapshot with the
    same columns (one rebuilt or compacted from the same schema).

    Returns:
        ``{node_type: {"categorical": [names], "cardinalities": [ints], "numeric": [names]}}``.
    """
    return {t: {"categorical": list(source.categorical_names[t]),
                "cardinalities": [int(c) for c in source.cardinalities[t]],
                "numeric": list(source.numeric_names[t])}
            for t in sorted(source.categorical_names)}
