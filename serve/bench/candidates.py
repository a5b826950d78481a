"""What the purchase answer pays for ranking last week's best sellers beside the history.

    python -m serve.bench.candidates --artifacts artifacts [--rounds 7] [--sizes 1 32]

One purchase bundle, one process, one torch thread (one worker of ``python -m serve`` on 2 cores),
its forward compiled as the server compiles it. Each round times ``TaskInference.run`` on random
customers with the bundle's candidates and with none (``popular_candidates = 0``: the history alone),
alternately, so both sides share the machine's noise; the candidates are found once per graph
version and day, as in a server, so the rounds measure what each answer adds. Prints the median ms
per batch of each side and their ratio per batch size.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch

from models.runtime.inference import TaskInference
from models.schema import ARTICLE
from models.store.snapshot import GraphSnapshot
from serve.bench.model import time_runs
from serve.versions.bundles import ArtifactsError, find_bundles

DEFAULT_CANDIDATES = 24  # a bundle written before the candidates is timed with the default count


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m serve.bench.candidates",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"),
                   help="artifacts with a purchase bundle")
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds per side and batch size")
    p.add_argument("--seconds", type=float, default=1.0, help="seconds per round")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 32], help="batch sizes (ids per run)")
    args = p.parse_args(argv)
    try:
        bundles = find_bundles(args.artifacts, ("purchase",))
    except ArtifactsError as e:
        print(f"python -m serve.bench.candidates: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    bundle = bundles[0]
    inference = TaskInference.from_bundle(bundle.bundle_dir, GraphSnapshot.open(bundle.snapshot_dir),
                                          compile="buckets", max_batch_size=max(args.sizes))
    inference.warm_up()
    config = inference.model.config
    candidates = config.popular_candidates or DEFAULT_CANDIDATES
    sides = {"history only": dataclasses.replace(config, popular_candidates=0),
             f"{candidates} best sellers beside it": dataclasses.replace(config,
                                                                          popular_candidates=candidates)}
    rng = np.random.default_rng(0)
    articles = inference.snapshot.num_nodes[ARTICLE]
    print(f"purchase bundle {bundle.bundle_dir}, {articles:,} articles, 1 thread")
    for size in args.sizes:
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.rounds):
            for name, side in sides.items():
                inference.model.config = side
                times[name] += time_runs(inference, size, args.seconds, rng)
        ms = {name: float(np.median(t) * 1000) for name, t in times.items()}
        line = ", ".join(f"{name} {value:.2f} ms" for name, value in ms.items())
        before, after = ms.values()
        print(f"batch {size}: {line}; ratio {after / before:.3f}")
    inference.model.config = config
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
