"""What a hot swap needs from torch.compile (serve.versions.compiled_regions), on a small compiled module.

The first test pins the torch behaviour the gate exists for; if a torch upgrade makes the recompile
region per thread, it fails, and the gate may be dropped (see the module docstring).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import torch
from torch._C._dynamo.eval_frame import (
    get_eval_frame_isolate_recompiles_id,
    set_eval_frame_isolate_recompiles_id,
)
from torch._dynamo.eval_frame import _get_cache_entries_for_region

from models.runtime.compile import compiled_graph_count
from serve.versions.compiled_regions import ForwardGate, allow_swaps, evict_region


class Net(torch.nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((3,), scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.weight).sum(1)


SHAPES = ((2, 3), (4, 3))


def compiled_model(scale: float) -> SimpleNamespace:
    """A stand-in for TaskInference: what the gate touches is ``predictor.forward``."""
    model = Net(scale)
    forward = torch.compile(model, dynamic=False, fullgraph=True, backend="eager",
                            recompile_limit=len(SHAPES), isolate_recompiles=True)
    return SimpleNamespace(model=model, predictor=SimpleNamespace(forward=forward))


def test_the_recompile_region_is_process_wide_which_is_why_forwards_are_gated() -> None:
    seen = []
    previous = set_eval_frame_isolate_recompiles_id(12345)
    try:
        thread = threading.Thread(target=lambda: seen.append(get_eval_frame_isolate_recompiles_id()))
        thread.start()
        thread.join()
    finally:
        set_eval_frame_isolate_recompiles_id(previous)
    assert seen == [12345]


def test_a_model_compiled_beside_a_serving_one_never_recompiles_it() -> None:
    allow_swaps()
    gate = ForwardGate()
    serving = compiled_model(1.0)
    gate.wrap(serving)
    with torch.inference_mode():
        for shape in SHAPES:
            serving.predictor.forward(torch.ones(shape))
    baseline, stop, errors, calls = compiled_graph_count(), threading.Event(), [], [0]
    not_loaded, seen = gate.graphs_not_loaded(), []

    def serve() -> None:
        while not stop.is_set():
            try:
                with torch.inference_mode():
                    out = serving.predictor.forward(torch.ones(SHAPES[calls[0] % 2]))
                assert torch.equal(out, torch.full((SHAPES[calls[0] % 2][0],), 3.0))
                seen.append(gate.graphs_not_loaded() - not_loaded)  # what relserve_recompiles reads
                calls[0] += 1
            except Exception as e:  # the failure this test is about: FailOnRecompileLimitHit
                errors.append(repr(e))
                return

    thread = threading.Thread(target=serve)
    thread.start()
    gate.loader = threading.get_ident()
    try:
        old = None
        for swap in range(5):
            new = compiled_model(float(swap + 2))
            region = gate.wrap(new)
            with torch.inference_mode():
                outs = [new.predictor.forward(torch.ones(shape)) for shape in SHAPES]
            assert torch.equal(outs[0], torch.full((2,), 3.0 * (swap + 2)))
            if old is not None:
                with gate.exclusive():
                    assert evict_region(Net, old) == len(SHAPES)
            old = region
    finally:
        stop.set()
        thread.join()
    assert not errors and calls[0] > 0 and set(seen) == {0}
    compiled = compiled_graph_count() - baseline
    assert compiled == gate.graphs_by_loads == 5 * len(SHAPES), "the serving model recompiled"


def test_evicting_a_region_drops_its_compiled_code_and_leaves_the_others_alone() -> None:
    gate = ForwardGate()
    first, second = compiled_model(1.0), compiled_model(2.0)
    regions = [gate.wrap(first), gate.wrap(second)]
    with torch.inference_mode():
        for shape in SHAPES:
            first.predictor.forward(torch.ones(shape))
            second.predictor.forward(torch.ones(shape))
    code = Net.forward.__code__
    assert [len(_get_cache_entries_for_region(code, r)) for r in regions] == [2, 2]
    assert evict_region(Net, regions[0]) == 2
    assert all(entry.code is None for entry in _get_cache_entries_for_region(code, regions[0]))
    assert all(entry.code is not None for entry in _get_cache_entries_for_region(code, regions[1]))
    before = compiled_graph_count()
    with torch.inference_mode():
        assert torch.equal(second.predictor.forward(torch.ones(2, 3)), torch.full((2,), 6.0))
    assert compiled_graph_count() == before
    assert evict_region(Net, None) == 0 and gate.wrap(SimpleNamespace(predictor=SimpleNamespace(
        forward=Net(1.0)))) is None, "an eager model has no region"
