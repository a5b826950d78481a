"""One batch of predictions as output rows: the columns of ``python -m serve.score``'s files.

The columns are the HTTP answer's fields (:mod:`models.registry`), so a row of the file and the
server's answer for the same id carry the same names and values:

churn     ``customer_id, churn_probability, active_last_7d``
sales     ``article_id, sales_7d``
purchase  ``customer_id, prediction``: the Kaggle H&M submission format, ``prediction`` being the
          ``k`` best article ids (as in ``articles.csv``, leading zero kept) separated by spaces.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from torch import Tensor

from models.registry import TASKS
from models.runtime.inference import InferenceResult
from models.schema import ARTICLE
from models.store.snapshot import GraphSnapshot

SUBMISSION_FIELD = "prediction"  # Kaggle's column name for the space-separated article ids
ACTIVE_FIELD = "active_last_7d"  # the churn answer's flag (serve/apis.py ValueAPI)


def schema(task: str) -> pa.Schema:
    """The columns written for ``task``."""
    spec = TASKS[task]
    if spec.ranks:
        return pa.schema([(spec.id_field, pa.string()), (SUBMISSION_FIELD, pa.string())])
    fields = [(spec.id_field, pa.string()), (spec.value_field, pa.float32())]
    if task == "churn":
        fields.append((ACTIVE_FIELD, pa.bool_()))
    return pa.schema(fields)


class TableBuilder:
    """Turns ``(entity, result)`` batches of one task into :class:`pyarrow.Table` chunks.

    Args:
        task: the task the results are of.
        snapshot: whose ids name the entities and articles.
    """

    def __init__(self, task: str, snapshot: GraphSnapshot) -> None:
        self.task = task
        self.spec = TASKS[task]
        self.schema = schema(task)
        self.ids = snapshot.ids[self.spec.entity_type]
        # Decoded once: a purchase batch names 12 articles per row from these.
        self.article_names = snapshot.ids[ARTICLE].astype(str).tolist() if self.spec.ranks else []

    def __call__(self, entity: Tensor, result: InferenceResult) -> pa.Table:
        """Rows for ``entity`` ``(B,)`` dense indices and their :meth:`TaskInference.run` result."""
        ids = pa.array(self.ids[entity.numpy()].astype(str), pa.string())
        if self.spec.ranks:
            names = self.article_names
            predictions = [" ".join([names[a] for a in row]) for row in result.articles.tolist()]
            columns = [ids, pa.array(predictions, pa.string())]
        else:
            columns = [ids, pa.array(result.values.numpy().astype(np.float32), pa.float32())]
            if result.active is not None:
                columns.append(pa.array(result.active.numpy(), pa.bool_()))
        return pa.Table.from_arrays(columns, schema=self.schema)
