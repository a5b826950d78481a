"""Model hyper-parameters: one dataclass, stored as JSON in the checkpoint bundle.

Its defaults are the shape ``python -m training.fit`` trains (:class:`training.fit.config.TaskRecipe`
reads them; docs/training.md lists them); a bundle records every field, so they never decide how a
stored model is read, except for fields older bundles lack (:data:`BEFORE_RECORDED`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

AGGREGATIONS = ("mean", "sum", "max", "std")
BEFORE_RECORDED = {"log_target": False, "pair_value": False, "popular_candidates": 0}
"""Fields added after bundles were first written, with the value those bundles were trained with."""


@dataclass
class ModelConfig:
    """Shape of the relational GNN (RDL recipe: encoders -> temporal encoding -> hetero SAGE -> head).

    Args:
        hidden: width of every node representation.
        num_layers: number of hetero SAGE layers; matches the sampler's number of hops.
        aggregation: neighbour aggregation of each ``SAGEConv``: one of ``"mean"``, ``"sum"``,
            ``"max"``, ``"std"``, or several joined by ``+`` (``"sum+mean+max+std"``: PNA-style, the
            aggregates concatenated, so degree and spread are visible to the next layer).
        time_channels: sinusoidal channels of the temporal encoding of ``seed time - node time``.
        time_period_days: longest period of the temporal encoding; periods run geometrically from
            one day up to it.
        dropout: dropout after each GNN layer (training only).
        head_hidden: width of the MLP of the churn and sales heads (``0``: a single linear layer).
        embedding_dim: output width of the purchase two-tower projections (the dot-product space).
        trim: compute each layer only for the rows later layers read (seeds in the last layer,
            seeds and hop-1 nodes before it); exact, and saves most of the dense work.
        log_target: the sales head learns and serves in ``log1p`` space (see
            :class:`models.nn.heads.SalesHead`); ``False`` for bundles written before it existed.
        pair_value: the purchase repeat score also reads what the pair's lines were worth (see
            :class:`models.nn.heads.PurchaseHead`); ``False`` for bundles written before it existed.
        popular_candidates: the purchase repeat score also scores this many of the articles sold
            most in the 7 days before the seed time, among those the customer never bought
            (:func:`models.graph.history.popular_now`); 0 for bundles written before it existed.
    """

    hidden: int = 64
    num_layers: int = 2
    aggregation: str = "sum"
    time_channels: int = 16
    time_period_days: float = 1024.0
    dropout: float = 0.0
    head_hidden: int = hidden  # the recipe's --hidden sets all three widths
    embedding_dim: int = hidden
    trim: bool = True
    log_target: bool = True
    pair_value: bool = True
    popular_candidates: int = 24

    def __post_init__(self) -> None:
        if self.hidden <= 0 or self.num_layers <= 0 or self.embedding_dim <= 0:
            raise ValueError("hidden, num_layers and embedding_dim must be positive")
        parts = self.aggregation.split("+")
        if not all(part in AGGREGATIONS for part in parts) or len(set(parts)) != len(parts):
            raise ValueError(f"unknown aggregation {self.aggregation!r}; use one of "
                             f"{', '.join(AGGREGATIONS)} or several joined by +")
        if self.time_channels <= 0 or self.time_channels % 2:
            raise ValueError("time_channels must be a positive even number (sin and cos pairs)")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError("dropout must be in [0, 1)")
        if self.popular_candidates < 0:
            raise ValueError("popular_candidates must be 0 or more")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """Build from a JSON dict, rejecting unknown keys so a typo cannot silently fall back; a key
        of :data:`BEFORE_RECORDED` that ``values`` lacks takes the value it had before."""
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown ModelConfig keys: {sorted(unknown)}")
        return cls(**{**BEFORE_RECORDED, **values})
