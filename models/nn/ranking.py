"""Purchase rankings kept in two parts, so the shift between the repeat and dot-product scores can
be chosen on validation after training without scoring every row again for every candidate."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class RankParts(NamedTuple):
    """One batch's ranking before the repeat scores are shifted and merged in.

    Args:
        top: ``(B, k)`` best dot-product scores among the articles outside each row's history.
        top_articles: ``(B, k)`` int64 their article indices.
        repeat: ``(B, N)`` repeat scores of the history slots without the shift (``-inf`` in empty slots).
        repeat_articles: ``(B, N)`` int64 the slots' articles.
    """

    top: Tensor
    top_articles: Tensor
    repeat: Tensor
    repeat_articles: Tensor

    @staticmethod
    def cat(parts: list[RankParts]) -> RankParts:
        """Batches' parts stacked along the rows."""
        return RankParts(*(torch.cat(column) for column in zip(*parts, strict=True)))


def merge_ranked(parts: RankParts, shift: float, k: int) -> Tensor:
    """``(B, k)`` article indices ranked as :meth:`models.nn.heads.PurchaseHead.rank` would with
    ``repeat_shift = shift`` (ties aside); ``-1`` where a row has fewer than ``k`` candidates."""
    scores = torch.cat([parts.top, parts.repeat + shift], dim=1)
    articles = torch.cat([parts.top_articles, parts.repeat_articles], dim=1)
    best, order = torch.topk(scores, min(k, scores.shape[1]), dim=1)
    return articles.gather(1, order).masked_fill(torch.isinf(best), -1)
