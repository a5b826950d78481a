"""One batch of predictions as output rows: the columns of ``python -m serve.score``'s files.

The columns are the HTTP answer's fields (:mod:`models.registry`: the id, the prediction and the
entry's answer fields), so a row of the file and the server's answer for the same id carry the same
names and values:

churn     ``customer_id, churn_probability, active_last_7d``
sales     ``article_id, sales_7d``
purchase  ``customer_id, prediction``: the Kaggle H&M submission format, ``prediction`` being the
          ``k`` best article ids separated by spaces.

Ids are written as the data has them (the snapshot's text, decoded as UTF-8): ``13085``,
``85123A``, ``0108775015`` with its leading zero.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from torch import Tensor

from models.registry import TASKS
from models.runtime.inference import InferenceResult
from models.schema import ARTICLE
from models.store.ids import ids_text
from models.store.snapshot import GraphSnapshot

SUBMISSION_FIELD = "prediction"  # Kaggle's column name for the space-separated article ids
ARROW_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float32()}  # of AnswerField.dtype


def file_fields(task: str) -> tuple:
    """The answer fields written beside the prediction: all of them, except for a ranked list, whose
    file is exactly Kaggle's submission layout (id, prediction), which takes no other column."""
    spec = TASKS[task]
    return () if spec.ranks else tuple(spec.answer_fields)


def schema(task: str) -> pa.Schema:
    """The columns written for ``task``."""
    spec = TASKS[task]
    value = (SUBMISSION_FIELD, pa.string()) if spec.ranks else (spec.value_field, pa.float32())
    extra = [(f.name, ARROW_TYPES[f.dtype]) for f in file_fields(task)]
    return pa.schema([(spec.id_field, pa.string()), value, *extra])


_CSV_SPECIAL = np.zeros(256, dtype=bool)
_CSV_SPECIAL[list(b',"\r\n')] = True


def _needs_quotes(ids: np.ndarray, chunk: int = 1 << 16) -> bool:
    """Whether any of ``(N,)`` ``S<w>`` ids holds a byte a CSV field must be quoted for (by chunks:
    a whole table's bytes would be a large temporary)."""
    return any(bool(_CSV_SPECIAL[ids[i : i + chunk].view(np.uint8)].any()) for i in range(0, len(ids), chunk))


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
        self.article_ids = snapshot.ids[ARTICLE]
        # Decoded once: a purchase batch names 12 articles per row from these.
        self.article_names = ids_text(snapshot.ids[ARTICLE]) if self.spec.ranks else []

    @property
    def needs_quotes(self) -> bool:
        """Whether an id this task writes holds a comma, a quote or a line break (a CSV must quote it)."""
        return _needs_quotes(self.ids) or (self.spec.ranks and _needs_quotes(self.article_ids))

    def __call__(self, entity: Tensor, result: InferenceResult) -> pa.Table:
        """Rows for ``entity`` ``(B,)`` dense indices and their :meth:`TaskInference.run` result."""
        ids = pa.array(ids_text(self.ids[entity.numpy()]), pa.string())
        if self.spec.ranks:
            names = self.article_names
            predictions = [" ".join([names[a] for a in row]) for row in result.articles.tolist()]
            columns = [ids, pa.array(predictions, pa.string())]
        else:
            columns = [ids, pa.array(result.values.numpy().astype(np.float32), pa.float32())]
        columns += [pa.array(result.extras[f.name].numpy(), ARROW_TYPES[f.dtype])
                    for f in file_fields(self.task)]
        return pa.Table.from_arrays(columns, schema=self.schema)
