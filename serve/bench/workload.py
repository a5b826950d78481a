"""What a serving benchmark sends and serves: request bodies with known ids, the traffic mix of the
registry, and artifacts copies with empty compile caches (for cold starts)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from models.registry import TASKS
from models.runtime.bundle import CACHE_DIR
from models.store.ids import ids_text
from models.store.snapshot import GraphSnapshot
from serve.versions.bundles import TaskBundle, find_bundles


def request_bodies(snapshot: GraphSnapshot, task: str, count: int = 512, seed: int = 0) -> list[dict]:
    """``count`` bodies for ``task`` with known ids drawn at random (fixed seed)."""
    spec = TASKS[task]
    ids = snapshot.ids[spec.entity_type]
    picks = np.random.default_rng(seed).integers(0, len(ids), size=count)
    return [{spec.id_field: text} | ({"k": spec.k} if spec.ranks else {}) for text in ids_text(ids[picks])]


def traffic_mix(tasks: Iterable[str]) -> dict[str, float]:
    """Each of ``tasks``' share of mixed traffic (summing to 1), largest first: its registry
    ``load_share``, the mix the load test sends, renormalized over the tasks given (those served)."""
    shares = {task: TASKS[task].load_share for task in tasks}
    total = sum(shares.values())
    if total <= 0:
        raise ValueError(f"no load_share in the registry for any of {', '.join(shares)}: no mixed traffic")
    return {task: share / total for task, share in sorted(shares.items(), key=lambda kv: -kv[1])}


def mixed(bodies: dict[str, list[dict]], count: int = 4000, seed: int = 1) -> list[tuple[str, dict]]:
    """``count`` requests, each task drawn with its :func:`traffic_mix` share of those served; fixed seed."""
    mix = traffic_mix(bodies)
    tasks = list(mix)
    picks = np.random.default_rng(seed).choice(len(tasks), size=count, p=list(mix.values()))
    return [(TASKS[tasks[p]].path, bodies[tasks[p]][i % len(bodies[tasks[p]])]) for i, p in enumerate(picks)]


def encoded_mix(snapshot: GraphSnapshot, tasks: Iterable[str]) -> list[tuple[str, bytes]]:
    """:func:`mixed` requests over ``tasks`` with known ids of ``snapshot``, bodies encoded as JSON."""
    bodies = {task: request_bodies(snapshot, task) for task in tasks}
    return [(path, json.dumps(body).encode()) for path, body in mixed(bodies)]


def served_mix(artifacts: Path) -> tuple[list[TaskBundle], GraphSnapshot, list[tuple[str, bytes]]]:
    """The bundles of ``artifacts``, their snapshot, and :func:`encoded_mix` requests over their tasks.

    Raises:
        serve.versions.bundles.ArtifactsError: no usable bundle in ``artifacts``.
    """
    bundles = find_bundles(artifacts)
    snapshot = GraphSnapshot.open(bundles[0].snapshot_dir)
    return bundles, snapshot, encoded_mix(snapshot, [b.task for b in bundles])


def copy_without_compile_cache(artifacts: Path, out: Path) -> Path:
    """A copy of ``artifacts`` whose bundles have empty compile caches (snapshot linked, not copied)."""
    out.mkdir(parents=True)
    (out / "snapshot").symlink_to((artifacts / "snapshot").resolve())
    for bundle in find_bundles(artifacts):
        shutil.copytree(bundle.bundle_dir, out / bundle.task, ignore=shutil.ignore_patterns(CACHE_DIR))
        (out / bundle.task / CACHE_DIR).mkdir()
    return out
