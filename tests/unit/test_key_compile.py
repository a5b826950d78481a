"""The article keys' compiled forward: compiled in a background thread on a real trained purchase
bundle while eager refreshes go on, equal to the eager keys, and dropped for the eager forward when
it fails. When the graph owner starts it: ``test_graph_owner.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.runtime.inference import TaskInference
from models.runtime.key_compile import CompiledKeyForward, KeyCompiler
from models.store.live import LiveGraph
from models.store.snapshot import GraphSnapshot

pytestmark = pytest.mark.slow  # one dynamic-shape compile of the purchase model


@pytest.fixture(scope="module")
def inference(trained_artifacts: Path) -> TaskInference:
    graph = LiveGraph(GraphSnapshot.open(trained_artifacts / "snapshot"))
    return TaskInference.from_bundle(trained_artifacts / "purchase", graph, compile="none")


def test_the_compiled_keys_equal_the_eager_ones_and_eager_refreshes_go_on_meanwhile(
        inference: TaskInference) -> None:
    view = inference.current()
    eager = inference.compute_article_keys(view.end_time, view)
    compiler = KeyCompiler(inference, view).start()
    refreshed = 0
    while not compiler.done.is_set():  # refreshing beside the compile, as the owner does
        # (two threads' parallel reductions split differently: equal within float rounding)
        torch.testing.assert_close(inference.compute_article_keys(view.end_time, view), eager,
                                   rtol=1e-5, atol=1e-5)
        refreshed += 1
    assert refreshed > 0
    assert compiler.join(0) and compiler.seconds is not None
    assert isinstance(inference.key_forward, CompiledKeyForward)
    compiled = inference.compute_article_keys(view.end_time, view)
    assert not inference.key_forward.failed
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)


def test_a_failing_compiled_forward_falls_back_to_eager_for_good(
        inference: TaskInference, caplog: pytest.LogCaptureFixture) -> None:
    view = inference.current()
    inference.key_forward = None
    eager = inference.compute_article_keys(view.end_time, view)
    forward = CompiledKeyForward(inference)
    calls = []

    def broken(inputs):
        calls.append(1)
        raise RuntimeError("recompile limit reached\nmore lines")

    forward.compiled = broken
    inference.key_forward = forward
    try:
        assert torch.equal(inference.compute_article_keys(view.end_time, view), eager)
        assert torch.equal(inference.compute_article_keys(view.end_time, view), eager)
    finally:
        inference.key_forward = None
    assert forward.failed and len(calls) == 1
    assert "refreshing eagerly from now on" in caplog.text and "more lines" not in caplog.text
