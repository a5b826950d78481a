"""Node encoders: table features and relative time -> one ``hidden``-wide vector per node."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.nn.inputs import TableSpec

EMBEDDING_INIT_STD = 0.1
"""Initial scale of the summed categorical embeddings (each of C columns draws N(0, (0.1 / sqrt(C))^2)).
At unit scale every rare value (a country of a few customers) started as a random offset as large
as the rest of the node's encoding, which a task's few hundred steps did not undo: real churn with
the customers' country 0.8153, 0.8222 at 0.1 (docs/decisions.md, "A customer's country"). Zero
learned the country but lost demo churn, whose categorical columns carry signal."""


class SinusoidalTime(nn.Module):
    """Sin/cos features of a relative time in days; periods run geometrically from 1 day to ``max_period``.

    Args:
        channels: number of features (even).
        max_period: longest period in days.
    """

    def __init__(self, channels: int, max_period: float) -> None:
        super().__init__()
        periods = torch.logspace(0.0, math.log10(max_period), channels // 2)
        self.register_buffer("frequency", 2.0 * math.pi / periods, persistent=False)

    def forward(self, rel_time: Tensor) -> Tensor:
        """``(N,)`` days -> ``(N, channels)``."""
        angle = rel_time.unsqueeze(-1) * self.frequency
        return torch.cat([angle.sin(), angle.cos()], dim=-1)


class NodeEncoder(nn.Module):
    """Encodes one node type: summed categorical embeddings plus one linear map of the numeric
    features and the sinusoidal encoding of ``seed time - node time`` (the RDL input layer).

    All categorical columns share one embedding table; column ``c`` owns rows
    ``offset[c] .. offset[c] + cardinality[c]``, so code ``0`` (missing, and padding) has its own row.
    Numerics and time share one ``Linear`` so the whole dense part is a single matrix product.

    Args:
        spec: the node type's columns.
        hidden: output width.
        time_channels: sinusoidal channels.
        time_period_days: longest period in days.
    """

    def __init__(self, spec: TableSpec, hidden: int, time_channels: int, time_period_days: float) -> None:
        super().__init__()
        sizes = [card + 1 for card in spec.cardinalities]
        offsets = torch.tensor([0, *sizes[:-1]], dtype=torch.long).cumsum(0)
        self.register_buffer("offsets", offsets, persistent=False)
        # One bag of C codes per node: embedding_bag sums without materialising (N, C, hidden).
        self.embedding = nn.EmbeddingBag(max(sum(sizes), 1), hidden, mode="sum")
        nn.init.normal_(self.embedding.weight, std=EMBEDDING_INIT_STD / math.sqrt(max(len(sizes), 1)))
        self.time = SinusoidalTime(time_channels, time_period_days)
        self.dense = nn.Linear(spec.num_numeric + time_channels, hidden)

    def forward(self, cat: Tensor, num: Tensor, rel_time: Tensor) -> Tensor:
        """Args:
            cat: ``(N, C)`` int64 codes in ``0..cardinality``.
            num: ``(N, F)`` float32.
            rel_time: ``(N,)`` float32 days (``0`` for seeds).

        Returns:
            ``(N, hidden)``.
        """
        dense = self.dense(torch.cat([num, self.time(rel_time)], dim=-1))
        if cat.shape[1] == 0:
            return dense
        codes = cat + self.offsets
        if torch.compiler.is_compiling():
            # Inductor fuses these gathers and adds (and their scatter-add backward) into one loop
            # vectorised over ``hidden``; its embedding_bag is an eager fallback whose sort-based
            # backward dominated the train step, and ``.sum(dim=1)`` got vectorised over the
            # short column axis instead.
            for column in codes.unbind(dim=1):
                dense = dense + F.embedding(column, self.embedding.weight)
            return dense
        return dense + self.embedding(codes)


class HeteroNodeEncoder(nn.Module):
    """One :class:`NodeEncoder` per node type.

    Args:
        specs: per node type, its feature columns.
        hidden: output width.
        time_channels: sinusoidal channels of the temporal encoding.
        time_period_days: longest temporal period in days.
    """

    def __init__(self, specs: dict[str, TableSpec], hidden: int, time_channels: int,
                 time_period_days: float) -> None:
        super().__init__()
        self.nodes = nn.ModuleDict(
            {t: NodeEncoder(s, hidden, time_channels, time_period_days) for t, s in specs.items()})

    def forward(self, cat_dict: dict[str, Tensor], num_dict: dict[str, Tensor],
                rel_time_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """Returns per node type ``(N_t, hidden)``."""
        return {t: encoder(cat_dict[t], num_dict[t], rel_time_dict[t]) for t, encoder in self.nodes.items()}
