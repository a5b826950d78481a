"""Loading one model version inside a worker, checked before it may serve.

:func:`load_version` loads a version like ``setup()`` loads the first one (the compile cache beside it
included) and refuses it, raising :class:`Refused`, when its bundle does not load (files, checksum
against ``config.json``, feature definition, snapshot columns), its weights hold NaN or infinity, its
warm-up fails, or a smoke prediction for a few real entities is not finite rows of the right shape.
The compiled forwards of the new model go through the worker's
:class:`serve.versions.compiled_regions.ForwardGate`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from models.runtime.bundle import WEIGHTS_FILE, BundleError
from models.schema import ARTICLE
from serve.versions.compiled_regions import ForwardGate, evict_region
from serve.versions.repository import ModelVersion

SMOKE_ROWS = 4


@dataclass(frozen=True)
class Served:
    """The model answering batches (a :class:`models.runtime.inference.TaskInference`) and its version."""

    inference: Any
    version: int
    loaded_at: float
    forced: bool = False


class Refused(Exception):
    """A version that will not be served: ``reason`` (a metric label) and a one-line message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def smoke_problem(inference: Any) -> str | None:
    """Predict for a few real entities; why the answer is unusable, or ``None``."""
    graph = inference.current()
    count = min(SMOKE_ROWS, int(graph.num_nodes[inference.entity_type]))
    if count == 0:
        return None
    k = min(inference.spec.k, int(graph.num_nodes[ARTICLE]))
    with torch.inference_mode():
        result = inference.run(torch.arange(count), k=k)
    values = result.scores if inference.spec.ranks else result.values
    if values is None or values.shape[0] != count:
        rows = None if values is None else values.shape[0]
        return f"the smoke prediction for {count} entities gave {rows} rows"
    if not torch.isfinite(values).all():
        return "the smoke prediction holds NaN or infinite values"
    return None


def load_version(load: Callable[[Path, Any], Any], gate: ForwardGate, version: ModelVersion, graph: Any,
                 force: bool = False) -> tuple[Served, int | None]:
    """``version`` loaded over ``graph`` with ``load`` (``(bundle dir, graph) -> TaskInference``),
    warmed up and checked; returns it and its compiled region.

    Raises:
        Refused: why it will not serve (see the module docstring).
    """
    try:
        inference = load(version.directory, graph)
    except BundleError as e:
        raise Refused("load", str(e)) from None
    except Exception as e:
        raise Refused("load", f"{version.directory}: {type(e).__name__}: {e}") from None
    broken = next((name for name, t in inference.model.state_dict().items()
                   if t.is_floating_point() and not torch.isfinite(t).all()), None)
    if broken is not None:
        raise Refused("weights", f"{version.directory / WEIGHTS_FILE}: {broken} holds NaN or infinite values")
    region = gate.wrap(inference)
    try:
        inference.warm_up()
        problem = smoke_problem(inference)
    except Exception as e:
        problem, reason = f"warm-up failed ({type(e).__name__}: {e})", "error"
    else:
        reason = "smoke"
    if problem is not None:
        model_class = type(inference.model)
        del inference
        with gate.exclusive():  # never served: nothing else runs its graphs
            evict_region(model_class, region)
        raise Refused(reason, f"{version.directory}: {problem}")
    return Served(inference, version.version, time.time(), force), region
