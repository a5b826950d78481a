"""Compile strategies for the model: eager, ``dynamic=True``, or static shape buckets.

``none``     eager PyTorch.
``dynamic``  ``torch.compile(dynamic=True)``: one graph with symbolic sizes, no padding.
``buckets``  ``torch.compile(dynamic=False)`` on inputs padded to a :class:`BucketLadder` bucket:
             one static graph per bucket, no recompiles after warm-up, and on CUDA
             ``mode="reduce-overhead"`` (CUDA Graphs) becomes possible.

:class:`Predictor` runs inference here and :class:`models.runtime.train_step.TrainStep` one
optimisation step; both pad, call the compiled function and drop padded rows, and neither
synchronises with the host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch._dynamo.utils import counters

from models.graph.buckets import Bucket, BucketLadder, empty_inputs, pad_inputs
from models.nn.inputs import ModelInputs
from models.nn.model import TaskModel
from models.torch_support import compile_features

STRATEGIES = ("none", "dynamic", "buckets")


@dataclass
class CompileConfig:
    """How to run the model.

    Args:
        strategy: ``"none"``, ``"dynamic"`` or ``"buckets"``.
        mode: ``torch.compile`` mode, e.g. ``"reduce-overhead"`` (CUDA Graphs; CUDA + buckets only).
        options: extra Inductor options passed to ``torch.compile``.
        backend: ``torch.compile`` backend; ``"aot_eager"`` traces and guards exactly like
            ``"inductor"`` without generating code, which tests of recompiles use for speed.
        skip_module_guards: drop Dynamo's guards on module attributes (a structure that never
            changes after construction); saves ~20 us of guard checks per call, which is 10-15%
            of a small compiled forward. :class:`Predictor` and ``TrainStep`` pin the one
            attribute that matters, ``training``, before every call. Only where each compile
            keeps its own graphs (torch >= 2.13): otherwise these guards tell models apart.
        cpu_kernel_threads: OpenMP threads of Inductor's generated CPU kernels (``None``: all
            of torch's). Their scatter-adds (mean aggregation, gather and embedding backward)
            are atomic adds, which contend across threads: on 2 cores a compiled train step ran
            at 0.4x eager with 2 kernel threads and 2.1x with 1. Matmuls are library calls and
            keep every thread.
    """

    strategy: str = "buckets"
    mode: str | None = None
    options: dict[str, Any] | None = None
    backend: str = "inductor"
    skip_module_guards: bool = True
    cpu_kernel_threads: int | None = 1

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown compile strategy {self.strategy!r}; use one of {STRATEGIES}")


def compiled_graph_count() -> int:
    """Graphs Dynamo has compiled in this process so far (first compiles and recompiles alike)."""
    return int(counters["stats"]["unique_graphs"])


def compile_function(fn: Callable, config: CompileConfig, device: torch.device | str,
                     graphs: int = 1) -> Callable:
    """``fn`` compiled per ``config`` (or ``fn`` itself for ``"none"``).

    Args:
        fn: the function or module to compile.
        config: strategy, mode and options.
        device: where it runs; ``reduce-overhead`` is refused off CUDA.
        graphs: graphs ``fn`` may legitimately need (buckets x seed types; seed types for
            ``dynamic``). This compile gets its own recompile budget of about that size (isolated
            from other compiles of the same code from torch 2.13; added to the process-wide budget
            before, see :mod:`models.torch_support`), and with ``fullgraph`` going past it raises
            instead of silently running eager.
    """
    if config.strategy == "none":
        return fn
    on_cuda = torch.device(device).type == "cuda"
    if config.mode == "reduce-overhead" and not (on_cuda and config.strategy == "buckets"):
        raise ValueError("mode='reduce-overhead' (CUDA Graphs) needs a CUDA device and the buckets strategy")
    dynamic = config.strategy == "dynamic"
    options = dict(config.options or {})
    if not on_cuda and config.cpu_kernel_threads is not None and config.backend == "inductor":
        options.setdefault("cpp.threads", config.cpu_kernel_threads)
    features = compile_features()
    if config.skip_module_guards and features.module_guard_filter and features.isolate_recompiles:
        options["guard_filter_fn"] = torch.compiler.skip_guard_on_all_nn_modules_unsafe
    mode = config.mode
    if mode is not None and options and config.backend == "inductor":
        # torch.compile takes options or a mode, not both: spell the mode out as its options
        options = {**torch._inductor.list_mode_options(mode, dynamic), **options}
        mode = None
    # dynamic specialises sizes 0 and 1 (one seed, no edges of a type): a few graphs per seed type
    limit = graphs if config.strategy == "buckets" else 8 * graphs
    budget: dict[str, Any] = {}
    if features.recompile_limit:
        budget["recompile_limit"] = limit
    else:  # one process-wide budget per code object: every compile adds what it may need
        dynamo = torch._dynamo.config
        dynamo.recompile_limit += limit
    if features.isolate_recompiles:
        budget["isolate_recompiles"] = True
    return torch.compile(fn, dynamic=dynamic, fullgraph=True, backend=config.backend, mode=mode,
                         options=options or None, **budget)


Ladders = BucketLadder | list[BucketLadder] | None


class Runner:
    """Shared padding logic of :class:`Predictor` and :class:`models.runtime.train_step.TrainStep`."""

    def __init__(self, model: TaskModel, config: CompileConfig, ladders: Ladders,
                 seed_types: tuple[str, ...] | None = None) -> None:
        ladders = [ladders] if isinstance(ladders, BucketLadder) else list(ladders or [])
        self.ladders = {ladder.seed_type: ladder for ladder in ladders}
        self.seed_types = tuple(seed_types or model.head.seed_types)
        missing = set(self.seed_types) - set(self.ladders)
        if config.strategy == "buckets" and missing:
            raise ValueError(f"the buckets strategy needs a BucketLadder for {sorted(missing)} seeds")
        self.config = config
        self.cuda_graphs = config.mode == "reduce-overhead"
        graphs = sum(len(ladder.buckets) for ladder in ladders)
        self.num_graphs = graphs if config.strategy == "buckets" else len(self.seed_types)

    def bucket_for(self, inputs: ModelInputs) -> Bucket | None:
        """The bucket ``inputs`` will be padded to (``None`` when not padding)."""
        if self.config.strategy != "buckets":
            return None
        return self.ladders[inputs.seed_type].choose(inputs)

    def _prepare(self, inputs: ModelInputs) -> tuple[ModelInputs, int]:
        bucket = self.bucket_for(inputs)
        if self.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        return (inputs, inputs.num_seeds) if bucket is None else (pad_inputs(inputs, bucket), bucket.seeds)


class Predictor(Runner):
    """Inference with one compile strategy.

    Padded inputs are made under ``inference_mode`` here; unpadded ones (``dynamic``) are used as
    given, so create them consistently (Dynamo guards on whether tensors were made inside
    ``inference_mode``; mixing costs one recompile).

    Args:
        model: the trained model (put in eval mode here).
        config: compile strategy.
        ladders: per seed type it runs, its buckets (required for ``"buckets"``).
        device: where inputs are moved and the model runs.
        seed_types: the seed types it will be called with (default: every one of the head's; a
            purchase server runs customers only, its article keys are computed once, eagerly).
    """

    def __init__(self, model: TaskModel, config: CompileConfig, ladders: Ladders = None,
                 device: torch.device | str = "cpu", seed_types: tuple[str, ...] | None = None) -> None:
        super().__init__(model, config, ladders, seed_types)
        self.model = model.eval().to(device)
        self.device = torch.device(device)
        self.forward = compile_function(self.model, config, self.device, self.num_graphs)

    @torch.inference_mode()
    def __call__(self, inputs: ModelInputs) -> Tensor:
        """Model output for the real seeds: ``(B,)`` or ``(B, D + 1)``."""
        if self.model.training:
            self.model.eval()
        padded, _ = self._prepare(inputs.to(self.device))
        out = self.forward(padded)[: inputs.num_seeds]
        return out.clone() if self.cuda_graphs else out

    def warmup(self, num_columns: dict[str, tuple[int, int]]) -> int:
        """Compile (or load) ahead of traffic: every bucket of every ladder once; for ``dynamic``
        also one seed without neighbours (sizes 0 and 1 get their own graphs).

        Args:
            num_columns: per node type ``(C_t, F_t)``, to build all-padding inputs.

        Returns:
            Number of forwards run.
        """
        if self.config.strategy == "none":
            return 0
        shapes = []
        for seed_type, ladder in self.ladders.items():
            shapes += [(seed_type, bucket) for bucket in ladder.buckets]
            if self.config.strategy == "dynamic":
                edges = {e: 0 for e in ladder.buckets[0].edges}
                shapes.append((seed_type, Bucket(1, {t: 2 for t in num_columns}, edges)))
        # Inside inference mode, as __call__ pads: tensors made outside it carry another dispatch
        # key, which Dynamo guards on, so they would compile every bucket a second time.
        with torch.inference_mode():
            for seed_type, bucket in shapes:
                self.forward(empty_inputs(bucket, seed_type, num_columns).to(self.device))
        return len(shapes)
