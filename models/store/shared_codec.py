"""One live-graph version as a file other processes map without copying: write once, read many.

The graph owner (:mod:`serve.graph`) applies the log once per machine and writes each new version
of its :class:`models.store.live.LiveGraph` with :func:`write_version`; every inference worker opens
it with :func:`read_version` and gets a :class:`models.store.live_view.LiveView` equal to the owner's,
without replaying a batch or rebuilding a delta.

What a version file holds is what the owner computed past the base snapshot: each direction's
:class:`models.store.delta.DeltaCSR`, the new nodes' ids and feature rows, and a few numbers. The
base itself is never written: every reader has the same snapshot memory-mapped, so an object of the
base is written as a reference to it (:func:`base_references`) and resolved against the reader's own
base. The arrays are pickle protocol-5 out-of-band buffers laid out at 64-byte boundaries; a reader
maps the file copy-on-write (``MAP_PRIVATE``): every reader shares the writer's page-cache pages and
nothing is copied unless written (the graph layer never writes). Per reader, only the small index
tables a :class:`models.store.live_csr.LiveCSR` derives from its delta are built.

Layout: ``magic (8) | buffer count n (8) | n x (offset, length) (16 each) | pickle offset, length
(16) | buffers | pickle``. Unpickling is limited to the project's, numpy's and torch's classes.
"""

from __future__ import annotations

import io
import mmap
import pickle
import struct
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from models.schema import NODE_TYPES
from models.store.keyed import prefix_sums
from models.store.live_csr import LiveCSR
from models.store.live_nodes import NewNodes
from models.store.live_view import LiveView
from models.store.snapshot import GraphSnapshot
from models.store.snapshot_prefix import OTHER

MAGIC = b"RSGRAPH1"
ALIGN = 64
_ALLOWED = ("models.", "numpy", "torch", "builtins", "collections", "copyreg", "_codecs", "pathlib")


class VersionFileError(ValueError):
    """A file that is not a complete version file."""


def base_references(base: GraphSnapshot) -> dict[str, Any]:
    """The base's objects a version may point at, by a name every reader resolves against its own base:
    the snapshot, its tables and its CSRs and prefix sums, and each of their arrays."""
    refs: dict[str, Any] = {"base": base, "price": base.price}
    for t in NODE_TYPES:
        refs[f"ids/{t}"] = base.ids[t]
        refs[f"categorical/{t}"] = base.categorical[t]
        refs[f"numeric/{t}"] = base.numeric[t]
        csr, prefix = base.adjacency[(t, OTHER[t])], prefix_sums(base, t)[0]
        refs[f"adjacency/{t}"], refs[f"prefix/{t}"] = csr, prefix
        for name in ("rowptr", "col", "day"):
            refs[f"adjacency/{t}/{name}"] = getattr(csr, name)
        for name in ("spend", "day_starts", "key"):
            refs[f"prefix/{t}/{name}"] = getattr(prefix, name)
    return refs


def _memory(array: np.ndarray) -> tuple[int, int, str]:
    return array.__array_interface__["data"][0], array.nbytes, array.dtype.str


def _tensor(array: np.ndarray) -> Tensor:
    return torch.from_numpy(array)


# Per-process caches of the graph's objects: never written; a reader starts them empty.
_CACHES = ("kept_cache", "_kept", "_last")


def _restored(cls: type, state: dict[str, Any], emptied: tuple[str, ...]) -> Any:
    obj = object.__new__(cls)
    for name, value in state.items():
        object.__setattr__(obj, name, value)
    for name in emptied:
        object.__setattr__(obj, name, {})
    return obj


class _Writer(pickle.Pickler):
    def __init__(self, file: io.BytesIO, base: GraphSnapshot | None, buffers: list) -> None:
        super().__init__(file, protocol=5, buffer_callback=buffers.append)
        refs = base_references(base) if base is not None else {}
        self._names = {id(obj): name for name, obj in refs.items()}
        # Arrays of the base seen through another object (a numpy view of a mapped tensor).
        self._arrays = {_memory(obj.numpy() if isinstance(obj, Tensor) else obj): name
                        for name, obj in refs.items() if isinstance(obj, Tensor | np.ndarray)}

    def persistent_id(self, obj: Any) -> str | None:
        name = self._names.get(id(obj))
        if name is not None:
            return name
        if type(obj) is np.ndarray:
            name = self._arrays.get(_memory(obj))
            return None if name is None else f"numpy:{name}"
        if isinstance(obj, Tensor) and obj.device.type == "cpu":
            name = self._arrays.get(_memory(obj.detach().numpy()))
            return None if name is None else f"tensor:{name}"
        return None

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):  # as a numpy array: its bytes go out of band, mapped by readers
            return _tensor, (np.ascontiguousarray(obj.detach().cpu().numpy()),)
        state = getattr(obj, "__dict__", None)
        if state is not None and any(name in state for name in _CACHES):
            # Written as it is (never rebuilt by __post_init__), without the caches of this process.
            kept = {k: v for k, v in state.items() if k not in _CACHES}
            emptied = tuple(k for k in _CACHES[:2] if k in state)
            return _restored, (type(obj), kept, emptied)
        return NotImplemented


class _Reader(pickle.Unpickler):
    def __init__(self, data: bytes, base: GraphSnapshot | None, buffers: list) -> None:
        super().__init__(io.BytesIO(data), buffers=buffers)
        self._refs = base_references(base) if base is not None else {}

    def persistent_load(self, name: str) -> Any:
        kind, _, key = name.rpartition(":")
        try:
            obj = self._refs[key]
        except KeyError:
            raise pickle.UnpicklingError(f"unknown base reference {name!r}") from None
        if kind == "numpy" and isinstance(obj, Tensor):
            return obj.numpy()
        if kind == "tensor" and isinstance(obj, np.ndarray):
            return torch.from_numpy(obj)
        return obj

    def find_class(self, module: str, name: str) -> Any:
        if not module.startswith(_ALLOWED):
            raise pickle.UnpicklingError(f"{module}.{name} is not a graph class")
        return super().find_class(module, name)


def _state(view: LiveView) -> dict[str, Any]:
    """What a reader needs besides its base (the live CSRs as they are, merged arrays included)."""
    return {"sequence": view.sequence, "ids": view.ids, "categorical": view.categorical,
            "numeric": view.numeric, "adjacency": view.adjacency, "prefix": view.prefix,
            "min_day": view.min_day, "max_day": view.max_day, "end_time": view.end_time,
            "num_transactions": view.num_transactions,
            "new_ids": {t: tuple(n.ids) for t, n in view.nodes.items()},
            "temporal_rows": view.temporal_rows}


# Per base and direction, the cache a LiveCSR keeps across versions (the base's kept edges).
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _view(base: GraphSnapshot, state: dict[str, Any]) -> LiveView:
    for direction, csr in state["adjacency"].items():
        if isinstance(csr, LiveCSR):
            object.__setattr__(csr, "kept_cache", _KEPT.setdefault(base, {}).setdefault(direction, {}))
    nodes = {}
    for t in NODE_TYPES:
        ids = list(state["new_ids"][t])
        first = len(base.ids[t])
        nodes[t] = NewNodes(base.ids[t], ids, {raw: first + i for i, raw in enumerate(ids)})
    return LiveView(base, state["sequence"], state["ids"], state["categorical"], state["numeric"],
                    state["adjacency"], state["prefix"], state["min_day"], state["max_day"],
                    state["end_time"], state["num_transactions"], nodes, state.get("temporal_rows"))


def write_version(view: LiveView, path: Path) -> int:
    """Write ``view`` to ``path`` (a new file); returns its size in bytes."""
    return dump(_state(view), path, view.base)


def read_version(path: Path, base: GraphSnapshot) -> LiveView:
    """The version written to ``path``, over ``base`` (the snapshot it was written over).

    Raises:
        VersionFileError: not a complete version file.
        OSError: it cannot be opened (e.g. removed meanwhile: read the newer one).
    """
    return _view(base, load(path, base))


def dump(obj: Any, path: Path, base: GraphSnapshot | None = None) -> int:
    """Write ``obj`` (containers of numbers, strings, arrays, tensors and the project's dataclasses;
    objects of ``base`` as references) to ``path``; returns its size in bytes."""
    buffers: list[pickle.PickleBuffer] = []
    data = io.BytesIO()
    _Writer(data, base, buffers).dump(obj)
    raws = [b.raw() for b in buffers]
    table = 8 + 8 + 16 * len(raws) + 16
    offsets, position = [], _aligned(table)
    for raw in raws:
        offsets.append(position)
        position = _aligned(position + raw.nbytes)
    pickled = data.getbuffer()
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(raws)))
        for offset, raw in zip(offsets, raws, strict=True):
            f.write(struct.pack("<QQ", offset, raw.nbytes))
        f.write(struct.pack("<QQ", position, pickled.nbytes))
        for offset, raw in zip(offsets, raws, strict=True):
            f.seek(offset)
            f.write(raw)
        f.seek(position)
        f.write(pickled)
        return f.tell()


def load(path: Path, base: GraphSnapshot | None = None) -> Any:
    """What :func:`dump` wrote to ``path``, its arrays mapped from the file (copy-on-write).

    Raises:
        VersionFileError: not a complete file of this format.
        OSError: it cannot be opened.
    """
    with open(path, "rb") as f:
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except ValueError as e:  # an empty file
            raise VersionFileError(f"{path}: {e}") from None
    view = memoryview(mapped)
    if len(view) < 16 or bytes(view[:8]) != MAGIC:
        raise VersionFileError(f"{path}: not a graph version file")
    (count,) = struct.unpack_from("<Q", view, 8)
    spans = [struct.unpack_from("<QQ", view, 16 + 16 * i) for i in range(count)]
    start, length = struct.unpack_from("<QQ", view, 16 + 16 * count)
    if start + length > len(view) or any(o + n > len(view) for o, n in spans):
        raise VersionFileError(f"{path}: truncated")
    return _Reader(bytes(view[start:start + length]), base, [view[o:o + n] for o, n in spans]).load()


def _aligned(position: int) -> int:
    return -(-position // ALIGN) * ALIGN
