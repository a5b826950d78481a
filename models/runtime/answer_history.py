"""How much history the model saw for an entity: the ``history`` field of every task's answer.

A customer without purchases (in ``customers.csv`` but never in the transactions, or created
through ingestion) is in the graph like any other and gets a prediction from the model, read from
their own attributes alone: their temporal features say "no history" and their sampled subgraph
holds no articles. ``history: 0`` says so in the answer, so a client can tell a cold-start answer
from one backed by purchases (docs/model-repository.md, "Cold start").
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.store.keyed import prefix_sums

_BEFORE_ANY_DAY = -(2**40)


def history_count(snapshot, node_type: str, ids: Tensor, seed_time: Tensor) -> Tensor:
    """``(N,)`` int64: each node's purchases (a customer's) or sales (an article's) before its seed
    time, the edges the model may read (``day < seed_time``); an answer field of the registry's tasks."""
    prefix, _ = prefix_sums(snapshot, node_type)
    ids, seed_time = ids.long(), seed_time.long()
    return prefix.before(ids, seed_time) - prefix.before(ids, torch.full_like(seed_time, _BEFORE_ANY_DAY))
