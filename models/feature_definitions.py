"""The definition of the model's computed inputs: names, windows and scales of the seed-time temporal
aggregates (:mod:`models.graph.temporal_features`) and of the purchase history's pair features
(:mod:`models.graph.history`). The graph layer computes them; the network reads their widths.
"""

from __future__ import annotations

import torch
from torch import Tensor

WINDOWS_DAYS: tuple[int, ...] = (7, 14, 28, 91, 364)
RECENCY_CAP_DAYS = 365
FEATURE_NAMES: tuple[str, ...] = (
    *(f"{kind}_{w}d" for w in WINDOWS_DAYS for kind in ("count", "spend", "days")),
    "count_all", "days_all", "days_since_last", "days_since_first", "has_history",
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
NUM_PAIR = 3 * len(PAIR_WINDOWS) + 9 + NUM_POPULARITY
"""Per (customer, past article) pair, see :func:`models.graph.history.customer_history`."""


def window_spend(features: Tensor) -> Tensor:
    """``(N, NUM_TEMPORAL)`` features -> ``(N, len(WINDOWS_DAYS))`` spend over each window in
    units of the mean price (undoing the features' ``log1p`` scaling)."""
    return torch.expm1(features[:, SPEND_COLUMNS[0]:SPEND_COLUMNS[-1] + 1:3] / LOG_SCALE)
