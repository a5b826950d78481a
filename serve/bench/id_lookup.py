"""``python -m serve.bench.id_lookup``: the cost of finding an id's dense index, per id shape and width.

The server looks up one id per request and batch scoring none (it walks the indices); a caller
with a list of ids looks them up together. This times :func:`models.store.ids.lookup_sorted`, which
takes any string or integer id of any stored width, against the lookup it replaced (kept below
only for this comparison), which took H&M's fixed-width string ids (``S64`` customers, ``S10``
articles) and nothing else. Both search the same sorted table with the same queries (half known,
half unknown), in nanoseconds per id, for one id per call (a request) and for batches.
"""

from __future__ import annotations

import argparse
import string
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from models.store.ids import lookup_sorted

SHAPES = ("string", "integer")
WIDTHS = (10, 64, 128)  # H&M articles, H&M customers, the longest id accepted
H_AND_M = {10: "articles", 64: "customers"}


def fixed_width_lookup(sorted_ids: np.ndarray, ids: Sequence[str]) -> np.ndarray:
    """The lookup before arbitrary ids, verbatim: string ids only (here, for the comparison)."""
    width = sorted_ids.dtype.itemsize
    raw = [i.encode("utf-8", "replace") if isinstance(i, str) else bytes(i) for i in ids]
    fits = np.fromiter((len(r) <= width for r in raw), dtype=bool, count=len(raw))
    query = np.asarray([r if f else b"" for r, f in zip(raw, fits, strict=True)], dtype=sorted_ids.dtype)
    if len(sorted_ids) == 0 or len(query) == 0:
        return np.full(len(query), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_ids, query)
    pos_c = np.minimum(pos, len(sorted_ids) - 1)
    found = fits & (pos < len(sorted_ids)) & (sorted_ids[pos_c] == query)
    return np.where(found, pos_c, -1).astype(np.int64)


def table(shape: str, width: int, rows: int, rng: np.random.Generator) -> tuple[np.ndarray, list, list]:
    """Sorted ``S<width>`` ids of ``shape``, and the queries: as the server gets them, and as text.

    A string id is ``width`` random letters and digits; an integer id has ``width`` digits (the
    server gets it as a JSON integer; the old lookup took it only as text).
    """
    alphabet = np.frombuffer((string.ascii_letters + string.digits).encode(), np.uint8)
    first = alphabet[10:] if shape == "string" else np.frombuffer(b"123456789", np.uint8)
    rest = alphabet if shape == "string" else np.frombuffer(string.digits.encode(), np.uint8)
    chars = np.concatenate([rng.choice(first, (2 * rows, 1)), rng.choice(rest, (2 * rows, width - 1))], 1)
    ids = np.unique(chars.view(f"S{width}").reshape(-1))
    rng.shuffle(ids)
    stored, absent = np.sort(ids[:rows]), ids[rows:]
    picks = np.concatenate([rng.choice(stored, rows // 2), rng.choice(absent, rows // 2)])
    text = [b.decode() for b in rng.permutation(picks).tolist()]
    return stored, [int(t) for t in text] if shape == "integer" else text, text


def ns_per_id(lookup: Callable, sorted_ids: np.ndarray, queries: list, batch: int, seconds: float) -> float:
    """Best of three timed rounds of ``lookup`` over ``queries`` in calls of ``batch`` ids."""
    calls = [queries[i : i + batch] for i in range(0, len(queries), batch)]
    best = float("inf")
    for _ in range(3):
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / 3:
            for call in calls[:max(1, 20_000 // batch)]:
                lookup(sorted_ids, call)
                done += len(call)
        best = min(best, (time.perf_counter() - start) / done)
    return best * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.bench.id_lookup",
                                     description=__doc__.splitlines()[0].split(": ", 1)[1])
    parser.add_argument("--rows", type=int, default=200_000, help="ids in the table (default 200000)")
    parser.add_argument("--batches", default="1,1024", help="ids per call, comma-separated (default 1,1024)")
    parser.add_argument("--seconds", type=float, default=0.6, help="time per measurement (default 0.6)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"ns per id, {args.rows:,} sorted ids, half the queries unknown; old = the fixed-width "
          "lookup (string ids only: an integer id is given to it as text)")
    print(f"{'shape':8s} {'width':>5s} {'batch':>6s} {'old ns':>8s} {'new ns':>8s} {'new/old':>7s}")
    for shape in SHAPES:
        for width in WIDTHS:
            stored, queries, text = table(shape, width, args.rows, rng)
            expected = fixed_width_lookup(stored, text)
            if not np.array_equal(lookup_sorted(stored, queries), expected):
                raise SystemExit(f"{shape} ids of width {width}: the lookups disagree")
            for batch in (int(b) for b in args.batches.split(",")):
                old = ns_per_id(fixed_width_lookup, stored, text, batch, args.seconds)
                new = ns_per_id(lookup_sorted, stored, queries, batch, args.seconds)
                note = f"  (H&M {H_AND_M[width]})" if shape == "string" and width in H_AND_M else ""
                print(f"{shape:8s} {width:5d} {batch:6d} {old:8.0f} {new:8.0f} {new / old:7.2f}{note}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
