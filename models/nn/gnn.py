"""Heterogeneous GraphSAGE over sampled computation trees, and the encoder + GNN stack."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import HeteroConv, SAGEConv

from models.nn.config import ModelConfig
from models.nn.encoders import HeteroNodeEncoder
from models.nn.inputs import TableSpec
from models.schema import EdgeType


class HeteroGraphSAGE(nn.Module):
    """``num_layers`` x (``HeteroConv`` of one ``SAGEConv`` per edge type, LayerNorm, ReLU).

    With ``trim``, layer ``i`` computes only the rows later layers read, like PyG's
    ``trim_to_layer``: on a tree sampled from ``seed_rows`` seeds, nodes of the seed type other
    than the seeds sit at hop >= 2 (no edge type joins the seed type to itself), so the last two
    layers need only the first ``seed_rows`` rows of the seed type, and the last layer needs no
    other type at all. Edges into trimmed rows that fall outside them (padding) are routed to
    one spare row that is dropped, which keeps every real seed's aggregate exact.

    Args:
        node_types: node types.
        edge_types: ``(src, rel, dst)`` edge types.
        hidden: width.
        num_layers: number of layers.
        aggregation: ``SAGEConv`` neighbour aggregation, or several joined by ``+`` (concatenated).
        dropout: dropout after each layer.
        trim: skip rows no later layer reads.
    """

    def __init__(self, node_types: list[str], edge_types: list[EdgeType], hidden: int, num_layers: int,
                 aggregation: str = "mean", dropout: float = 0.0, trim: bool = True) -> None:
        super().__init__()
        self.edge_types = list(edge_types)
        aggr = aggregation.split("+") if "+" in aggregation else aggregation
        self.convs = nn.ModuleList(
            HeteroConv({e: SAGEConv(hidden, hidden, aggr=aggr) for e in edge_types}, aggr="sum")
            for _ in range(num_layers))
        self.norms = nn.ModuleList(
            nn.ModuleDict({t: nn.LayerNorm(hidden) for t in node_types}) for _ in range(num_layers))
        self.dropout = dropout
        self.trim = trim
        self.self_joined = {s for s, _, d in edge_types if s == d}

    def forward(self, x_dict: dict[str, Tensor], edge_index_dict: dict[EdgeType, Tensor],
                seed_type: str, seed_rows: int) -> Tensor:
        """Args:
            x_dict: per node type ``(N_t, hidden)`` input features.
            edge_index_dict: per edge type ``(2, E)`` local ``(src, dst)`` indices.
            seed_type: node type of the seeds (the first ``seed_rows`` rows of that type).
            seed_rows: number of leading seed-type rows to return, ``<= N_seed``.

        Returns:
            ``(seed_rows, hidden)`` seed embeddings.
        """
        if self.trim and seed_type in self.self_joined:
            raise ValueError("trim needs no edge type from the seed type to itself")
        num_layers = len(self.convs)
        for i, (conv, norms) in enumerate(zip(self.convs, self.norms, strict=True)):
            later = num_layers - 1 - i
            pairs, edges, sizes = {}, {}, {}
            for e in self.edge_types:
                src, _, dst = e
                if self.trim and later == 0 and dst != seed_type:
                    continue
                index = edge_index_dict[e]
                if self.trim and later < 2 and dst == seed_type:
                    # Row ``seed_rows`` is the spare row that collects edges into dropped rows.
                    index = torch.stack([index[0], index[1].clamp(max=seed_rows)])
                    pairs[e] = (x_dict[src], F.pad(x_dict[dst][:seed_rows], (0, 0, 0, 1)))
                    sizes[e] = (x_dict[src].shape[0], seed_rows + 1)
                else:
                    pairs[e] = (x_dict[src], x_dict[dst])
                    sizes[e] = (x_dict[src].shape[0], x_dict[dst].shape[0])
                edges[e] = index
            out = conv(pairs, edges, size_dict=sizes)
            x_dict = {t: norms[t](h).relu() for t, h in out.items()}
            if self.dropout and self.training:
                x_dict = {t: F.dropout(h, self.dropout) for t, h in x_dict.items()}
            if self.trim and later < 2:
                x_dict[seed_type] = x_dict[seed_type][:seed_rows]
        return x_dict[seed_type][:seed_rows]


class RelationalGNN(nn.Module):
    """Node encoders followed by :class:`HeteroGraphSAGE`: ``ModelInputs`` -> seed embeddings.

    Args:
        specs: per node type, its feature columns.
        edge_types: edge types of the graph.
        config: model shape.
    """

    def __init__(self, specs: dict[str, TableSpec], edge_types: list[EdgeType], config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = HeteroNodeEncoder(specs, config.hidden, config.time_channels, config.time_period_days)
        self.gnn = HeteroGraphSAGE(list(specs), edge_types, config.hidden, config.num_layers,
                                   config.aggregation, config.dropout, config.trim)

    def forward(self, cat_dict: dict[str, Tensor], num_dict: dict[str, Tensor],
                rel_time_dict: dict[str, Tensor], edge_index_dict: dict[EdgeType, Tensor],
                seed_type: str, seed_rows: int) -> Tensor:
        """Args:
            cat_dict: per node type ``(N_t, C_t)`` int64 codes.
            num_dict: per node type ``(N_t, F_t)`` float32.
            rel_time_dict: per node type ``(N_t,)`` float32 days to the seed time.
            edge_index_dict: per edge type ``(2, E)`` int64.
            seed_type: node type of the seeds.
            seed_rows: number of leading seed rows to embed.

        Returns:
            ``(seed_rows, hidden)``.
        """
        x_dict = self.encoder(cat_dict, num_dict, rel_time_dict)
        # Skip connection: the seed's own encoded features (its temporal aggregates above all) reach
        # the head unmixed with the neighbours' messages.
        return self.gnn(x_dict, edge_index_dict, seed_type, seed_rows) + x_dict[seed_type][:seed_rows]
