"""The article keys' forward compiled with symbolic sizes, in the background, for the one process that
refreshes them under a stream of batches (the graph owner).

A refresh of the whole catalogue's keys runs one forward per chunk of articles over their shared
trees (:meth:`models.runtime.serving_state.ServingGraph.compute_article_keys`), whose sizes change
with every graph version: no bucket fits them, so the serving buckets do not apply, and eagerly
the encoders' and layers' many small operations cost about as much as their arithmetic (on the
demo catalogue, one thread, a refresh compiled with ``dynamic=True`` takes 0.64-0.76 of the eager
CPU, keys equal within 1e-6: ``python -m serve.bench.graph_owner --compiled-keys``). Compiling
costs seconds of CPU (about 20 s on 2 cores), so it is done once it pays: :class:`KeyCompiler`
compiles in a thread of its own on one chunk of the current graph while refreshes go on eagerly,
and only then hands the compiled forward to the model (``TaskInference.key_forward``). A forward
that fails later (a recompile past its budget) is dropped for the eager one, with one warning;
the keys never stop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any

import torch
from torch import Tensor

from models.nn.inputs import ModelInputs
from models.runtime.compile import CompileConfig, compile_function
from models.runtime.serving_state import ARTICLE_KEY_BATCH
from models.schema import ARTICLE

log = logging.getLogger(__name__)

COMPILE_NICENESS = 10  # added to the compiling thread's: a one-off, it must not delay answers


class CompiledKeyForward:
    """The model's forward compiled with symbolic sizes, falling back to eager for good on a failure.

    Args:
        inference: the :class:`models.runtime.inference.TaskInference` whose model it runs.
    """

    def __init__(self, inference: Any) -> None:
        self.inference = inference
        self.model = inference.model
        self.compiled = compile_function(self.model, CompileConfig("dynamic"), inference.device)
        self.failed = False

    def __call__(self, inputs: ModelInputs) -> Tensor:
        if not self.failed:
            try:
                return self.compiled(inputs)
            except Exception as e:  # a recompile past the budget, a compiler gone missing: stay eager
                self.failed = True
                log.warning("%s: the compiled article-key forward failed (%s: %s); refreshing eagerly "
                            "from now on", self.inference.task, type(e).__name__, str(e).split("\n")[0])
        return self.model(inputs)


class KeyCompiler:
    """Compiles a model's key forward in a background thread (see the module docstring).

    Args:
        inference: the model whose keys a process refreshes; its ``key_forward`` is set once compiled.
        graph: the graph version to compile on (a snapshot or a live graph's version; its first
            chunk of articles is the example the compiler traces).
    """

    def __init__(self, inference: Any, graph: Any) -> None:
        self.inference = inference
        self.graph = graph
        self.done = threading.Event()
        self.seconds: float | None = None  # how long compiling took (``None``: not done, or failed)
        self._thread = threading.Thread(target=self._compile, name="relserve-key-compile", daemon=True)

    def start(self) -> KeyCompiler:
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the compile; whether it ended (compiled or failed)."""
        return self.done.wait(timeout)

    def _compile(self) -> None:
        inference = self.inference
        with contextlib.suppress(OSError):  # Linux: this thread only; the refreshes keep their priority
            os.nice(COMPILE_NICENESS)
        started = time.perf_counter()
        try:
            forward = CompiledKeyForward(inference)
            with torch.inference_mode():  # as compute_article_keys calls it: Dynamo guards on the mode
                seeds = torch.arange(min(ARTICLE_KEY_BATCH, self.graph.num_nodes[ARTICLE]))
                forward.compiled(inference.article_key_inputs(seeds, int(self.graph.end_time), self.graph))
        except Exception as e:
            log.warning("%s: compiling the article-key forward failed (%s: %s); keys stay eager",
                        inference.task, type(e).__name__, str(e).split("\n")[0])
        else:
            self.seconds = time.perf_counter() - started
            inference.key_forward = forward
            log.info("%s: article-key forward compiled in %.1f s", inference.task, self.seconds)
        finally:
            self.done.set()
