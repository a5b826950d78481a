"""The labelled seed table of one task: which entities are predicted, when, and the truth."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class TaskTable:
    """Seeds and labels for one task, RelBench style: one row per (entity, seed time).

    A table from :meth:`training.tasks.definitions.Task.make_table` holds one cutoff ``t``: every row has
    ``seed_time = t + 1`` and the label describes days ``(t, t + 7]``. Exactly one of ``label``
    (churn, sales) or ``target_ptr``/``target_items`` (purchase) is set.

    Args:
        entity: ``(n,)`` int64 dense index of the entity (customer or article), ascending per cutoff.
        seed_time: ``(n,)`` int64 seed time in days; the model may only see ``day < seed_time``.
        cutoff: the cutoff day ``t`` of every row, or ``None`` for rows of several cutoffs
            (see :func:`concat_tables`).
        label: ``(n,)`` float32 target (churn 0/1, sales sum of price), or ``None``.
        target_ptr: ``(n + 1,)`` int64 CSR row pointer of the purchase targets, or ``None``.
        target_items: ``(L,)`` int64 article indices, row ``i`` owns
            ``target_items[target_ptr[i]:target_ptr[i + 1]]`` (distinct, ascending), or ``None``.
    """

    entity: np.ndarray
    seed_time: np.ndarray
    cutoff: int | None
    label: np.ndarray | None = None
    target_ptr: np.ndarray | None = None
    target_items: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.entity.shape[0]
        if self.seed_time.shape != (n,):
            raise ValueError(f"seed_time has shape {self.seed_time.shape}, expected ({n},)")
        has_label = self.label is not None
        has_targets = self.target_ptr is not None and self.target_items is not None
        if has_label == has_targets:
            raise ValueError("a TaskTable needs exactly one of `label` or `target_ptr` + `target_items`")
        if has_label and self.label.shape != (n,):
            raise ValueError(f"label has shape {self.label.shape}, expected ({n},)")
        bad_ptr = has_targets and (
            self.target_ptr.shape != (n + 1,) or self.target_ptr[-1] != len(self.target_items)
        )
        if bad_ptr:
            raise ValueError("target_ptr must have n + 1 entries ending at len(target_items)")

    def __len__(self) -> int:
        return int(self.entity.shape[0])

    @property
    def is_link(self) -> bool:
        """Whether the truth is a set of articles per row (purchase) rather than a scalar."""
        return self.target_ptr is not None

    def num_targets(self) -> np.ndarray:
        """``(n,)`` int64 number of target articles per row (link tables only)."""
        if self.target_ptr is None:
            raise ValueError("num_targets() needs a link-prediction table")
        return np.diff(self.target_ptr)

    def sample(self, most: int, seed: int = 0) -> TaskTable:
        """The table, or a random subset of ``most`` of its rows fixed by ``seed`` (kept in table
        order) when it has more."""
        if len(self) <= most:
            return self
        return self.subset(np.sort(np.random.default_rng(seed).choice(len(self), most, replace=False)))

    def subset(self, rows: np.ndarray) -> TaskTable:
        """The table restricted to ``rows`` (``(m,)`` int64 positions), in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        if not self.is_link:
            return TaskTable(self.entity[rows], self.seed_time[rows], self.cutoff, label=self.label[rows])
        counts = self.num_targets()[rows]
        ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        # Position of every kept target: its row's old start plus its offset inside the row.
        offset = np.arange(ptr[-1], dtype=np.int64) - np.repeat(ptr[:-1], counts)
        items = self.target_items[np.repeat(self.target_ptr[rows], counts) + offset]
        return TaskTable(
            self.entity[rows], self.seed_time[rows], self.cutoff, target_ptr=ptr, target_items=items
        )


def concat_tables(tables: list[TaskTable]) -> TaskTable:
    """Rows of several tables (e.g. all training cutoffs) as one table, in the given order.

    ``cutoff`` is kept when all inputs share it, otherwise ``None``; ``seed_time`` stays per row.
    """
    if not tables:
        raise ValueError("concat_tables needs at least one table")
    if len({t.is_link for t in tables}) != 1:
        raise ValueError("cannot concatenate link-prediction tables with labelled ones")
    cutoffs = {t.cutoff for t in tables}
    cutoff = cutoffs.pop() if len(cutoffs) == 1 else None
    entity = np.concatenate([t.entity for t in tables])
    seed_time = np.concatenate([t.seed_time for t in tables])
    if not tables[0].is_link:
        return TaskTable(entity, seed_time, cutoff, label=np.concatenate([t.label for t in tables]))
    ptr = np.zeros(len(entity) + 1, dtype=np.int64)
    np.cumsum(np.concatenate([t.num_targets() for t in tables]), out=ptr[1:])
    items = np.concatenate([t.target_items for t in tables])
    return TaskTable(entity, seed_time, cutoff, target_ptr=ptr, target_items=items)
