"""What a hot swap needs from ``torch.compile`` beyond its public API, in one module.

Read from **torch 2.13** (``models/runtime/compile.py`` compiles every model with
``isolate_recompiles=True``: each compiled model keeps its graphs in a region of its own; an older
torch has no regions, so the gate still serialises forwards but nothing is evicted). A worker
loading a new model version compiles it in a background thread while its batch loop keeps
answering with the old one, and three things in torch are not made for that:

* The region a compiled call looks its graphs up in is process-wide, not per thread
  (``torch._C._dynamo.eval_frame.set_eval_frame_isolate_recompiles_id``): a forward of the old
  model running while the new one compiles reads the new model's region, misses, recompiles, and
  within a few swaps fails on the region's recompile limit (``FailOnRecompileLimitHit`` with
  ``fullgraph=True``). :class:`ForwardGate` runs compiled forwards one at a time, in the order
  they arrive, so neither a busy batch loop nor a loader compiling bucket after bucket starves the other.
* Graphs stay cached on the model's code object after the model is gone (about 10 MiB a swap for the
  demo models). :func:`evict_region` invalidates the old region's entries, which drops their
  compiled code.
* Invalidated entries still count toward ``torch._dynamo.config.accumulated_recompile_limit``
  (256 per code object): :func:`allow_swaps` lifts that process-wide cap; each region keeps its own limit.

An upgrade of torch checks this module against ``torch/_dynamo/eval_frame.py`` and
``torch/_dynamo/guards.py`` (``tests/unit/test_model_swap.py`` covers it).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

from models.runtime.compile import compiled_graph_count

log = logging.getLogger("relserve.models")

TORCH_VERSION_READ = "2.13"
SWAP_RECOMPILE_CAP = 1_000_000


def allow_swaps() -> None:
    """Lift Dynamo's process-wide cap on graphs per code object (see the module docstring)."""
    config = torch._dynamo.config
    config.accumulated_recompile_limit = max(config.accumulated_recompile_limit, SWAP_RECOMPILE_CAP)


class FairLock:
    """A lock taken in the order it was asked for (``threading.Lock`` is not: a thread that releases
    it and asks again at once usually gets it back, so a loader compiling bucket after bucket would
    hold off the batch loop for the whole warm-up)."""

    def __init__(self) -> None:
        self._turn = threading.Condition(threading.Lock())
        self._next_ticket = 0
        self._now_serving = 0

    def __enter__(self) -> None:
        with self._turn:
            ticket = self._next_ticket
            self._next_ticket += 1
            while ticket != self._now_serving:
                self._turn.wait()

    def __exit__(self, *exc: object) -> None:
        with self._turn:
            self._now_serving += 1
            self._turn.notify_all()


class ForwardGate:
    """Runs the compiled forwards of one worker one at a time, first come first served (see the
    module docstring): while the thread set as :attr:`loader` compiles a bucket, the batch loop's
    next forward waits for that one bucket, then runs before the loader's next one.
    :attr:`graphs_by_loads` counts the graphs the loader compiled, which are not recompiles of the
    serving model (:meth:`graphs_not_loaded`).
    """

    def __init__(self) -> None:
        self._lock = FairLock()
        self.loader: int | None = None
        self.graphs_by_loads = 0
        self._count_lock = threading.Lock()
        self._load_started: int | None = None  # the graph count when the loader's forward began

    def graphs_not_loaded(self) -> int:
        """Graphs this process compiled other than in the loader's forwards (exact at any moment: a
        graph the loader is compiling right now is not counted either)."""
        with self._count_lock:
            count = compiled_graph_count() if self._load_started is None else self._load_started
            return count - self.graphs_by_loads

    def wrap(self, inference: Any) -> int | None:
        """Route ``inference``'s compiled forward through the gate; returns its region id
        (``None``: not compiled, or a torch without regions, whose old graphs stay cached)."""
        predictor = inference.predictor
        forward = predictor.forward
        context = getattr(forward, "dynamo_ctx", None)
        if context is None:  # eager: nothing compiled, nothing to serialise
            return None
        predictor.forward = self._gated(forward)
        # not isolated (before torch 2.13 always; -1 from 2.13): one graph cache for every model
        # of the class, which must never be evicted wholesale
        region = getattr(context, "_isolate_recompiles_id", None)
        return region if region is not None and region >= 0 else None

    def _gated(self, forward: Callable) -> Callable:
        def gated(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == self.loader:
                return self._load_call(forward, args, kwargs)
            with self._lock:
                return forward(*args, **kwargs)

        gated.dynamo_ctx = forward.dynamo_ctx  # the region stays readable through the wrapper
        return gated

    def _load_call(self, forward: Callable, args: tuple, kwargs: dict) -> Any:
        with self.exclusive():
            with self._count_lock:
                self._load_started = compiled_graph_count()
            try:
                return forward(*args, **kwargs)
            finally:
                with self._count_lock:
                    self.graphs_by_loads += compiled_graph_count() - self._load_started
                    self._load_started = None

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """No compiled forward runs inside (after the one running, if any): evicting graphs edits the
        cache list the serving forward looks its graph up in."""
        with self._lock:
            yield


def evict_region(model_class: type[torch.nn.Module], region: int | None) -> int:
    """Invalidate the graphs ``region`` holds for ``model_class.forward`` (call it once the model of
    that region is gone); returns how many. Never raises: at worst the entries stay cached (memory,
    not correctness)."""
    if region is None:
        return 0
    try:
        from torch._dynamo.eval_frame import _get_cache_entries_for_region
        from torch._dynamo.guards import DeletedGuardManagerWrapper

        evicted = 0
        for entry in _get_cache_entries_for_region(model_class.forward.__code__, region):
            manager = entry.guard_manager
            extra_state = getattr(manager, "extra_state", None)
            cache_entry = getattr(manager, "cache_entry", None)
            if extra_state is not None and cache_entry is not None:
                extra_state.invalidate(cache_entry, DeletedGuardManagerWrapper("model version replaced"))
                evicted += 1
        return evicted
    except Exception as e:  # an internal API that moved: keep serving, say so once per swap
        log.warning("compiled graphs of the replaced model not evicted (%s: %s)", type(e).__name__, e)
        return 0


def return_free_memory() -> None:
    """Give the heap memory freed with an old model back to the system (glibc's ``malloc_trim``).

    The new version was loaded in a background thread, whose allocations live in that thread's own
    malloc arena; glibc returns a freed arena's pages only when asked, so without this a worker's
    resident memory keeps the size of both versions. A no-op off glibc."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
