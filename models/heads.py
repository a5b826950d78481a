"""Task heads on seed embeddings: churn (binary), sales (regression, served >= 0), purchase (two-tower).

Every head maps ``(S, hidden)`` seed embeddings to its output and owns its training loss, which
takes a ``(S,)`` float weight so padded seed rows (weight 0) never count.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.registry import TASKS
from models.schema import ARTICLE, CUSTOMER


def _weighted_mean(values: Tensor, weight: Tensor) -> Tensor:
    return (values * weight).sum() / weight.sum().clamp(min=1.0)


def _mlp(hidden: int, head_hidden: int, out: int) -> nn.Module:
    if head_hidden == 0:
        return nn.Linear(hidden, out)
    return nn.Sequential(nn.Linear(hidden, head_hidden), nn.ReLU(), nn.Linear(head_hidden, out))


class ChurnHead(nn.Module):
    """Logit that a customer buys nothing in the next 7 days.

    Args:
        hidden: embedding width.
        head_hidden: MLP width (``0``: linear).
    """

    seed_types = (CUSTOMER,)

    def __init__(self, hidden: int, head_hidden: int) -> None:
        super().__init__()
        self.mlp = _mlp(hidden, head_hidden, 1)

    def forward(self, emb: Tensor, seed_type: str) -> Tensor:
        """``(S, hidden)`` -> ``(S,)`` logits."""
        return self.mlp(emb).squeeze(-1)

    @staticmethod
    def predict(logits: Tensor) -> Tensor:
        """``(S,)`` churn probabilities."""
        return torch.sigmoid(logits)

    @staticmethod
    def loss(logits: Tensor, target: Tensor, weight: Tensor) -> Tensor:
        """Weighted binary cross-entropy; ``target`` ``(S,)`` in {0, 1}."""
        return _weighted_mean(F.binary_cross_entropy_with_logits(logits, target, reduction="none"), weight)


class SalesHead(nn.Module):
    """7-day sales of an article: a linear output in units of ``scale``, served clamped at zero.

    Trained with L1 (the MAE) against ``target / scale``. The output is deliberately not squashed
    by a softplus: most articles sell nothing in a given week, L1 drives their outputs to zero, and
    a softplus driven there stops passing gradient, so the head collapses to predicting zero for
    every article. A linear output keeps L1's constant-size gradient on both sides of zero.

    Args:
        hidden: embedding width.
        head_hidden: MLP width (``0``: linear).
    """

    seed_types = (ARTICLE,)

    def __init__(self, hidden: int, head_hidden: int) -> None:
        super().__init__()
        self.mlp = _mlp(hidden, head_hidden, 1)
        # Typical weekly sales of a selling article; set from the training targets, saved with the weights.
        self.register_buffer("scale", torch.ones(()))

    def forward(self, emb: Tensor, seed_type: str) -> Tensor:
        """``(S, hidden)`` -> ``(S,)`` sales in units of ``scale`` (unclamped)."""
        return self.mlp(emb).squeeze(-1)

    def predict(self, output: Tensor) -> Tensor:
        """``(S,)`` predicted sales, ``>= 0``."""
        return output.clamp(min=0.0) * self.scale

    def loss(self, output: Tensor, target: Tensor, weight: Tensor) -> Tensor:
        """Weighted L1 to the ``(S,)`` target, in units of ``scale``."""
        return _weighted_mean((output - target / self.scale).abs(), weight)


class PurchaseHead(nn.Module):
    """Two towers into one dot-product space; an article's key carries a popularity-style bias.

    Customer queries are ``[q, 1]`` and article keys ``[k, b]``, so ``query @ key.T = q.k + b``: one
    matrix product scores every article. The bias is computed from the article's GNN embedding (its
    recent buyers), not a per-id table, so keys for a new snapshot need no retraining.

    Args:
        hidden: embedding width.
        embedding_dim: width ``D`` of the dot-product space.
    """

    seed_types = (CUSTOMER, ARTICLE)

    def __init__(self, hidden: int, embedding_dim: int) -> None:
        super().__init__()
        self.customer = nn.Linear(hidden, embedding_dim)
        self.article = nn.Linear(hidden, embedding_dim + 1)

    def forward(self, emb: Tensor, seed_type: str) -> Tensor:
        """``(S, hidden)`` -> ``(S, D + 1)``: queries for customers, keys for articles."""
        if seed_type == ARTICLE:
            return self.article(emb)
        query = self.customer(emb)
        return torch.cat([query, query.new_ones(query.shape[0], 1)], dim=-1)

    @staticmethod
    def score(query: Tensor, keys: Tensor) -> Tensor:
        """``(B, D+1)`` x ``(A, D+1)`` -> ``(B, A)`` scores."""
        return query @ keys.T

    @staticmethod
    def topk(query: Tensor, keys: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """Best ``k`` articles per query: ``(B, k)`` scores and ``(B, k)`` article indices."""
        return torch.topk(query @ keys.T, min(k, keys.shape[0]), dim=-1)

    @staticmethod
    def loss(query: Tensor, positive_keys: Tensor, weight: Tensor, log_q: Tensor | None = None) -> Tensor:
        """In-batch sampled softmax: row ``i``'s positive is key ``i``, every other key a negative.

        Args:
            query: ``(S, D+1)`` customer queries.
            positive_keys: ``(S', D+1)`` key of an article each customer bought, row ``i`` for query
                ``i``; rows past ``min(S, S')`` are padding.
            weight: ``(S,)``; padded pairs have weight 0 and are masked out as negatives too.
            log_q: ``(S',)`` log of how often each positive occurs among the batches' positives (its
                probability of being drawn as a negative), or ``None``. Subtracted from its column,
                the logQ correction of sampled softmax: without it a popular article, often someone
                else's positive, is pushed down as a negative as often as it is pulled up, and the
                keys' bias never learns popularity.
        """
        rows = min(query.shape[0], positive_keys.shape[0])  # both towers may pad to different buckets
        query, positive_keys, weight = query[:rows], positive_keys[:rows], weight[:rows]
        target = torch.arange(rows, device=query.device)
        # Padded keys are no negatives; the diagonal stays so every row keeps a finite logit.
        padded_key = (weight.unsqueeze(0) == 0) & (target.unsqueeze(0) != target.unsqueeze(1))
        logits = query @ positive_keys.T
        if log_q is not None:
            logits = logits - log_q[:rows].unsqueeze(0)
        logits = logits.masked_fill(padded_key, float("-inf"))
        return _weighted_mean(F.cross_entropy(logits, target, reduction="none"), weight)


HEADS: dict[str, type[nn.Module]] = {task: globals()[spec.head] for task, spec in TASKS.items()}
"""Per task, the head class its :mod:`models.registry` entry names."""
