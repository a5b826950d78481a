"""Nodes of the live graph: the base's memory-mapped tables, then the nodes ingested since, appended.

A new customer or article gets the dense index after every node of its type so far (``N_base``,
``N_base + 1``, ...), so every index the base hands out stays valid. Its feature row is encoded as the
loader encodes the base's, as far as the snapshot says how:

- categorical columns: the value's code in the snapshot's vocabulary (``encodings.json``, written
  by ``python -m training.snapshot``); a value it does not list, a missing value, or a snapshot
  without vocabularies: ``0``, the "missing" code;
- numeric columns ``x`` with their ``x_missing`` flag: standardised with the mean and standard
  deviation ``encodings.json`` records for ``x``; without them (or with no value) ``0`` with the flag
  ``1``, exactly how a missing value is encoded.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from models.schema import day_number
from models.store.ids import Id, id_bytes, lookup_sorted

ENCODINGS_FILE = "encodings.json"


@dataclass(frozen=True)
class JoinedRows:
    """Rows ``0..N-1`` of a base table (memory-mapped, never copied), then the new nodes' rows."""

    base: Tensor
    extra: Tensor

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.base.shape[0] + self.extra.shape[0], *self.base.shape[1:])

    def __len__(self) -> int:
        return self.shape[0]

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        assert dim == 0
        num = self.base.shape[0]
        new = index >= num
        out = self.base.index_select(0, index.clamp(max=num - 1))
        if bool(new.any()):
            out[new] = self.extra.index_select(0, index[new] - num).to(out.dtype)
        return out


@dataclass(frozen=True)
class JoinedIds:
    """The ids of one node type by dense index: the base's sorted array, then the new ids in order."""

    base: np.ndarray
    extra: tuple[bytes, ...]

    def __len__(self) -> int:
        return len(self.base) + len(self.extra)

    def __getitem__(self, index: int) -> bytes:
        index = int(index)
        if index < 0:
            index += len(self)
        return bytes(self.base[index]) if index < len(self.base) else self.extra[index - len(self.base)]

    def tolist(self) -> list[bytes]:
        return [*(bytes(i) for i in self.base), *self.extra]


@dataclass
class NewNodes:
    """The nodes of one type added since the base (mutable; the live graph copies what a version reads)."""

    base_ids: np.ndarray
    ids: list[bytes] = field(default_factory=list)
    index: dict[bytes, int] = field(default_factory=dict)
    categorical: list[np.ndarray] = field(default_factory=list)
    numeric: list[np.ndarray] = field(default_factory=list)

    def lookup(self, ids: list[Id] | np.ndarray) -> np.ndarray:
        """``(K,)`` dense indices (base, then new) of ids (``str``, ``int`` or ``bytes``); ``-1``: unknown."""
        found = lookup_sorted(self.base_ids, ids)
        if self.index:
            for k in np.flatnonzero(found < 0):
                value = ids[k].item() if isinstance(ids[k], np.generic) else ids[k]
                found[k] = self.index.get(id_bytes(value), -1)
        return found

    def add(self, raw_id: bytes, categorical: np.ndarray, numeric: np.ndarray) -> int:
        index = self.index[raw_id] = len(self.base_ids) + len(self.ids)
        self.ids.append(raw_id)
        self.categorical.append(categorical)
        self.numeric.append(numeric)
        return index

    def tables(self, width: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """The new rows as ``(M, C)`` int64 codes and ``(M, F)`` float32 features."""
        if not self.ids:
            return torch.zeros(0, width[0], dtype=torch.long), torch.zeros(0, width[1])
        return torch.from_numpy(np.stack(self.categorical)), torch.from_numpy(np.stack(self.numeric))


@dataclass(frozen=True)
class NodeEncoder:
    """Encodes one node type's new rows like the base's (see the module docstring).

    Args:
        categorical_names: the base's categorical columns.
        numeric_names: the base's numeric features (``x``, ``x_missing``, ...).
        vocabularies: per categorical column, its values in code order (code ``1`` first).
        stats: per numeric source column ``x``, ``{"mean": m, "std": s}``.
    """

    categorical_names: tuple[str, ...]
    numeric_names: tuple[str, ...]
    vocabularies: dict[str, dict[str, int]]
    stats: dict[str, dict[str, float]]

    @classmethod
    def of(cls, directory: Path, node_type: str, categorical_names: tuple[str, ...],
           numeric_names: tuple[str, ...]) -> NodeEncoder:
        """The encoder of ``node_type`` from the snapshot in ``directory`` (its ``encodings.json``)."""
        try:
            recorded = json.loads((Path(directory) / ENCODINGS_FILE).read_text()).get(node_type, {})
        except (OSError, ValueError, AttributeError):
            recorded = {}
        vocabularies = {c: {str(v): k + 1 for k, v in enumerate(values)}
                        for c, values in recorded.get("categorical", {}).items()}
        return cls(categorical_names, numeric_names, vocabularies, dict(recorded.get("numeric", {})))

    def encode(self, row: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """``(C,)`` int64 codes and ``(F,)`` float32 features of one row (column -> raw value)."""
        codes = np.zeros(len(self.categorical_names), dtype=np.int64)
        for k, column in enumerate(self.categorical_names):
            vocabulary = self.vocabularies.get(column, {})
            codes[k] = next((vocabulary[t] for t in _spellings(row.get(column)) if t in vocabulary), 0)
        numeric = np.zeros(len(self.numeric_names), dtype=np.float32)
        for k, name in enumerate(self.numeric_names):
            if name.endswith("_missing") and name[: -len("_missing")] in self.numeric_names:
                continue
            flag = f"{name}_missing"
            value, stats = _number(row.get(name)), self.stats.get(name)
            if value is not None and stats is not None:
                std = float(stats.get("std", 1.0)) or 1.0
                numeric[k] = (value - float(stats.get("mean", 0.0))) / std
            elif flag in self.numeric_names:
                numeric[self.numeric_names.index(flag)] = 1.0
        return codes, numeric


def _spellings(value: Any) -> list[str]:
    """The texts a categorical value may have been read as (``1``, ``1.0``)."""
    if value is None or value == "":
        return []
    if isinstance(value, float) and value.is_integer():
        return [str(value), str(int(value))]
    if isinstance(value, int) and not isinstance(value, bool):
        return [str(value), f"{value}.0"]
    return [str(value)]


def _number(value: Any) -> float | None:
    """A finite number, or a date as its day number, or ``None``."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    try:
        number = float(str(value))
        return number if math.isfinite(number) else None
    except ValueError:
        pass
    try:
        return float(day_number(dt.date.fromisoformat(str(value)[:10])))
    except ValueError:
        return None
