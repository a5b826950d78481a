"""On-disk layout of a graph snapshot: array names, ``meta.json``, checked loading, fingerprint.

A snapshot directory holds one plain ``.npy`` file per array plus ``meta.json``, which is
written last so that an interrupted build reads as incomplete. Every problem found while
opening one is reported as a :class:`SnapshotError` naming the file, never a numpy traceback.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.files import atomic_write
from models.schema import ARTICLE, CUSTOMER, NODE_TYPES
from models.store.snapshot_prefix import prefix_spec

FORMAT_VERSION = 1
META_FILE = "meta.json"
# Adjacency directions as (src type, dst type); customer -> article also carries the price.
DIRECTIONS: tuple[tuple[str, str], ...] = ((CUSTOMER, ARTICLE), (ARTICLE, CUSTOMER))
PRICE_DIRECTION = (CUSTOMER, ARTICLE)


class SnapshotError(ValueError):
    """A snapshot directory is missing, incomplete or corrupt."""


def node_array(node_type: str, field: str) -> str:
    """File stem of a node table array, e.g. ``customer.ids``."""
    return f"{node_type}.{field}"


def edge_array(direction: tuple[str, str], field: str) -> str:
    """File stem of an adjacency array, e.g. ``customer_article.rowptr``."""
    return f"{direction[0]}_{direction[1]}.{field}"


def expected_arrays(meta: dict[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Every array a snapshot must hold, as ``name -> (dtype, shape)``, derived from ``meta.json``.

    The dtype of id arrays is ``"S"`` (any fixed width); the others are exact numpy dtype names.

    Raises:
        KeyError, TypeError, ValueError: ``meta`` lacks a field or holds a malformed one.
    """
    counts = {t: int(meta["num_nodes"][t]) for t in NODE_TYPES}
    num_edges = int(meta["num_transactions"])
    spec: dict[str, tuple[str, tuple[int, ...]]] = {}
    for t in NODE_TYPES:
        features = meta["features"][t]
        spec[node_array(t, "ids")] = ("S", (counts[t],))
        spec[node_array(t, "categorical")] = ("int64", (counts[t], len(features["categorical_names"])))
        spec[node_array(t, "numeric")] = ("float32", (counts[t], len(features["numeric_names"])))
        if len(features["cardinalities"]) != len(features["categorical_names"]):
            raise ValueError(f"{t} cardinalities do not match its categorical columns")
    for direction in DIRECTIONS:
        spec[edge_array(direction, "rowptr")] = ("int64", (counts[direction[0]] + 1,))
        spec[edge_array(direction, "col")] = ("int32", (num_edges,))
        spec[edge_array(direction, "day")] = ("int32", (num_edges,))
    spec[edge_array(PRICE_DIRECTION, "price")] = ("float32", (num_edges,))
    return spec


def read_meta(directory: Path) -> dict[str, Any]:
    """Parse and check ``meta.json`` of a snapshot directory."""
    path = directory / META_FILE
    if not directory.is_dir():
        raise SnapshotError(f"{directory}: no such directory")
    if not path.is_file():
        raise SnapshotError(f"{path}: missing (incomplete snapshot; rebuild it)")
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SnapshotError(f"{path}: unreadable JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise SnapshotError(f"{path}: expected a JSON object")
    if meta.get("format_version") != FORMAT_VERSION:
        raise SnapshotError(
            f"{path}: format_version {meta.get('format_version')!r}, this code reads {FORMAT_VERSION}"
        )
    try:
        expected_arrays(meta)
        for key in ("min_day", "max_day", "end_time"):
            int(meta[key])
        str(meta["fingerprint"])
        if "prefix" in meta:  # optional: snapshots built before it was stored compute it in memory
            for dtype, _ in prefix_spec(meta["prefix"], int(meta["num_transactions"])).values():
                np.dtype(dtype)
            int(meta["prefix"]["min_day"]), int(meta["prefix"]["span"])
            float(meta["prefix"]["mean_price"]), str(meta["prefix"]["sha256"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotError(f"{path}: missing or malformed field ({type(exc).__name__}: {exc})") from None
    return meta


def write_meta(directory: Path, meta: dict[str, Any]) -> None:
    """Write ``meta.json`` atomically (it marks the snapshot complete)."""
    atomic_write(directory / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")


def load_array(directory: Path, name: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Memory-map one ``.npy`` file read-only and check its dtype and shape; nothing is copied."""
    path = directory / f"{name}.npy"
    if not path.is_file():
        raise SnapshotError(f"{path}: missing")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise SnapshotError(f"{path}: corrupt or truncated .npy ({exc})") from None
    kind_ok = array.dtype.kind == "S" if dtype == "S" else array.dtype == np.dtype(dtype)
    if not kind_ok or tuple(array.shape) != shape:
        found = f"{array.dtype} {tuple(array.shape)}"
        raise SnapshotError(f"{path}: holds {found}, {META_FILE} says {dtype} {shape}")
    return array


def load_arrays(directory: Path, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """Memory-map every array that ``meta`` calls for (see :func:`load_array`), prefix arrays excluded."""
    return {name: load_array(directory, name, *spec) for name, spec in expected_arrays(meta).items()}


def load_prefix_arrays(directory: Path, meta: dict[str, Any]) -> dict[str, np.ndarray] | None:
    """Memory-map the prefix arrays ``meta["prefix"]`` calls for; ``None`` if it records none."""
    if "prefix" not in meta:
        return None
    spec = prefix_spec(meta["prefix"], int(meta["num_transactions"]))
    return {name: load_array(directory, name, *s) for name, s in spec.items()}


def as_tensor(array: np.ndarray) -> torch.Tensor:
    """Wrap a read-only memory map as a tensor without copying it.

    The tensor must never be written to: the pages are shared with every process that
    maps the same snapshot, so numpy's warning about non-writable arrays is expected here.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def fingerprint(arrays: dict[str, np.ndarray], features: dict[str, Any]) -> str:
    """sha256 over every array's name, dtype, shape and bytes (in name order) and the feature metadata."""
    digest = hashlib.sha256(json.dumps(features, sort_keys=True).encode())
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}".encode())
        digest.update(memoryview(array.reshape(-1).view(np.uint8)))
    return digest.hexdigest()
