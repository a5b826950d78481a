"""The deployable model: encoders + GNN + one task head, called on :class:`ModelInputs`."""

from __future__ import annotations

from torch import Tensor, nn

from models.nn.config import ModelConfig
from models.nn.gnn import RelationalGNN
from models.nn.inputs import ModelInputs, PurchaseExtras, TableSpec
from models.registry import task_spec
from models.schema import EDGE_TYPES, EdgeType


class TaskModel(nn.Module):
    """Relational GNN with the head of ``task``; ``forward`` is one graph, free of graph breaks.

    Args:
        task: a name of :data:`models.registry.TASKS`.
        specs: per node type, its feature columns (see :func:`models.graph.features.table_specs`).
        config: model shape.
        edge_types: edge types of the graph.
    """

    def __init__(self, task: str, specs: dict[str, TableSpec], config: ModelConfig | None = None,
                 edge_types: tuple[EdgeType, ...] = EDGE_TYPES) -> None:
        super().__init__()
        head_cls = task_spec(task).head_class()  # ValueError naming the tasks for an unknown one
        self.task = task
        self.config = config or ModelConfig()
        self.gnn = RelationalGNN(specs, list(edge_types), self.config)
        # A head that reads more of the config or of the graph than its widths builds itself.
        build = getattr(head_cls, "from_config", None)
        self.head = (build(self.config, specs) if build is not None
                     else head_cls(self.config.hidden, self.config.head_hidden))

    def forward(self, inputs: ModelInputs) -> Tensor:
        """Head output for the first ``inputs.seed_rows`` seed rows.

        Args:
            inputs: one (possibly padded) batch.

        Returns:
            ``(seed_rows,)`` churn logits or sales, or ``(seed_rows, D + 1)`` purchase queries/keys.
        """
        emb = self.gnn(inputs.cat, inputs.num, inputs.rel_time, inputs.edge_index,
                       inputs.seed_type, inputs.seed_rows)
        if getattr(self.head, "reads_seed_features", False):  # sales: the seeds' own recent sales
            return self.head(emb, inputs.seed_type, inputs.num[inputs.seed_type][: inputs.seed_rows])
        return self.head(emb, inputs.seed_type)

    def loss(self, output: Tensor, target: Tensor, weight: Tensor, log_q: Tensor | None = None,
             extras: PurchaseExtras | None = None) -> Tensor:
        """The head's weighted training loss (see the head classes); ``log_q`` and ``extras`` are
        purchase's sampling correction and history (see :meth:`models.nn.heads.PurchaseHead.loss`)."""
        if log_q is None and extras is None:
            return self.head.loss(output, target, weight)
        return self.head.loss(output, target, weight, log_q, extras)

    def predict(self, output: Tensor) -> Tensor:
        """Served value from ``forward``'s output (probability, sales, or the raw query/key)."""
        predict = getattr(self.head, "predict", None)
        return predict(output) if predict is not None else output
