"""The ids a load test asks about: served ids ranked by popularity, and ids of their shape that are absent.

Built once from the memory-mapped graph snapshot by the runner and saved as a small JSON file,
so Locust's process reads a few hundred kilobytes instead of importing torch and the snapshot.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from models.schema import ARTICLE, CUSTOMER, MAX_ID_BYTES
from models.store.ids import ids_text

if TYPE_CHECKING:
    from models.store.snapshot import GraphSnapshot

FORMAT = 1
DEFAULT_MAX_IDS = 20_000
UNKNOWN_IDS = 64


class IdPoolError(ValueError):
    """An id file or snapshot that cannot feed a load test; the message is one line."""


@dataclass
class IdPool:
    """Ids for request bodies.

    Args:
        customers: served customer ids, most active first (the Zipf rank order).
        articles: served article ids, best-selling first.
        unknown_customers: customer ids the snapshot does not hold (answered 404), shaped like its own.
        unknown_articles: article ids the snapshot does not hold, shaped like its own.
        num_articles: articles in the snapshot (the longest possible purchase list).
    """

    customers: list[str]
    articles: list[str]
    unknown_customers: list[str]
    unknown_articles: list[str]
    num_articles: int

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps({"format": FORMAT, **asdict(self)}))
        return path

    @classmethod
    def load(cls, path: str | Path) -> IdPool:
        """Read a file written by :meth:`save` (raises :class:`IdPoolError`)."""
        try:
            raw = json.loads(Path(path).read_text())
            pool = cls(**{k: v for k, v in raw.items() if k != "format"})
        except (OSError, ValueError, TypeError) as e:
            raise IdPoolError(f"{path}: not an id file written by loadtest ({e})") from e
        if not (pool.customers and pool.articles and pool.unknown_customers and pool.unknown_articles):
            raise IdPoolError(f"{path}: an id list is empty")
        return pool

    @classmethod
    def from_snapshot(cls, snapshot_dir: str | Path, max_ids: int = DEFAULT_MAX_IDS, seed: int = 0) -> IdPool:
        """Rank each entity's ids by transaction count (ties in random order) and keep the top ``max_ids``.

        Args:
            snapshot_dir: a graph snapshot (``<artifacts>/snapshot``).
            max_ids: most ids kept per entity type; the Zipf tail beyond is rarely drawn anyway.
            seed: tie order and the random unknown ids.
        """
        from models.store.snapshot import GraphSnapshot, SnapshotError  # imports torch: only here

        try:
            snapshot = GraphSnapshot.open(snapshot_dir)
        except (SnapshotError, OSError, ValueError) as e:
            raise IdPoolError(f"cannot open the graph snapshot: {e}") from e
        rng = np.random.default_rng(seed)
        ranked = {}
        for node_type, direction in ((CUSTOMER, (CUSTOMER, ARTICLE)), (ARTICLE, (ARTICLE, CUSTOMER))):
            ids = snapshot.ids[node_type]
            if len(ids) == 0:
                raise IdPoolError(f"{snapshot_dir}: the snapshot holds no {node_type} ids")
            degree = np.diff(snapshot.adjacency[direction].rowptr.numpy())
            order = np.lexsort((rng.permutation(len(ids)), -degree))[:max_ids]
            ranked[node_type] = ids_text(ids[order])
        return cls(
            customers=ranked[CUSTOMER],
            articles=ranked[ARTICLE],
            unknown_customers=_absent_ids(snapshot, CUSTOMER, ranked[CUSTOMER], rng),
            unknown_articles=_absent_ids(snapshot, ARTICLE, ranked[ARTICLE], rng),
            num_articles=len(snapshot.ids[ARTICLE]),
        )


def _absent_ids(snapshot: GraphSnapshot, node_type: str, known: list[str],
                rng: np.random.Generator) -> list[str]:
    """Ids the snapshot does not hold, shaped like ``known`` (served ids of ``node_type``).

    Each is a known id with its characters shuffled or one of them replaced by another character
    of the known ids: 64 hex characters stay 64 hex characters, ``85123A`` becomes ``8512A3`` or
    ``85133A``. If the snapshot holds every such variant (a tiny one), ``unknown-<n>`` ids do.
    """
    alphabet = sorted(set("".join(known[:1000])))
    candidates = []
    for source in rng.choice(known, 4 * UNKNOWN_IDS).tolist():
        chars = list(source)
        if rng.random() < 0.5:
            rng.shuffle(chars)
        else:
            chars[int(rng.integers(len(chars)))] = alphabet[int(rng.integers(len(alphabet)))]
        candidates.append("".join(chars))
    candidates += [f"unknown-{n}" for n in range(2 * UNKNOWN_IDS)]
    candidates = [c for c in dict.fromkeys(candidates) if len(c.encode()) <= MAX_ID_BYTES]
    found = snapshot.lookup(node_type, candidates)
    return [c for c, index in zip(candidates, found, strict=True) if index < 0][:UNKNOWN_IDS]
