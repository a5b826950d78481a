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
    digits = np.frombuffer(string.digits.encode(), np.uint8)
    letters = np.frombuffer(string.ascii_letters.encode(), np.uint8)
    first = letters if shape == "string" else digits[1:]
    rest = np.concatenate([letters, digits]) if shape == "string" else digits
    count = rows + rows // 2  # a third stay out of the table: the unknown queries
    chars = np.empty((count, width), np.uint8)
    chars[:, 0] = first[rng.integers(0, len(first), count, dtype=np.uint8)]
    chars[:, 1:] = rest[rng.integers(0, len(rest), (count, width - 1), dtype=np.uint8)]
    ids = np.unique(chars.view(f"S{width}").reshape(-1))
    rng.shuffle(ids)
    stored, absent = np.sort(ids[:rows]), ids[rows:]  # np.unique: a 10-digit clash is possible
    picks = np.concatenate([rng.choice(stored, rows // 2), rng.choice(absent, rows // 2)])
    text = [b.decode() for b in rng.permutation(picks).tolist()]
    return stored, [int(t) for t in text] if shape == "integer" else text, text


def ns_per_id(lookups: dict[str, tuple[Callable, list]], sorted_ids: np.ndarray, batch: int,
              seconds: float) -> dict[str, float]:
    """Per lookup, the best of five timed rounds over its queries in calls of ``batch`` ids.

    Args:
        lookups: name -> (lookup function, its queries).
        sorted_ids: the table searched.
        batch: ids per call.
        seconds: total time per lookup.

    The rounds of the lookups alternate, so that a machine busy with other work slows both alike.
    """
    calls = {name: [q[i : i + batch] for i in range(0, min(len(q), 20_000), batch)]
             for name, (_, q) in lookups.items()}
    best = dict.fromkeys(lookups, float("inf"))
    for _ in range(5):
        for name, (lookup, _) in lookups.items():
            done, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds / 5:
                for call in calls[name]:
                    lookup(sorted_ids, call)
                    done += len(call)
            best[name] = min(best[name], (time.perf_counter() - start) / done * 1e9)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.bench.id_lookup",
                                     description=__doc__.splitlines()[0].split(": ", 1)[1].capitalize())
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
                ns = ns_per_id({"old": (fixed_width_lookup, text), "new": (lookup_sorted, queries)}, stored,
                               batch, args.seconds)
                old, new = ns["old"], ns["new"]
                note = f"  (H&M {H_AND_M[width]})" if shape == "string" and width in H_AND_M else ""
                print(f"{shape:8s} {width:5d} {batch:6d} {old:8.0f} {new:8.0f} {new / old:7.2f}{note}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
