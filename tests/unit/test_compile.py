"""Compile strategies: compiled == eager, no recompiles inside the ladder, LR as a tensor,
padded training == unpadded training, and the compile-cache artifact's hits and misses.

Recompile and padding tests use the ``aot_eager`` backend: Dynamo traces and guards exactly
as for Inductor, without spending seconds generating C++ per graph.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from models.graph.buckets import BucketLadder
from models.graph.features import gather_inputs, table_specs
from models.nn.config import ModelConfig
from models.nn.model import TaskModel
from models.runtime.compile import CompileConfig, Predictor, compile_function, compiled_graph_count
from models.runtime.compile_cache import CompileCacheRecorder, load_compile_cache, seal, unseal
from models.runtime.train_step import TrainStep, tensor_lr_adam
from training.bench.random_batches import (
    random_batch,
    random_purchase_extras,
    random_tables,
    random_targets,
    tree_ladder,
)

pytestmark = pytest.mark.slow
TABLES = random_tables(300, 80)
COLUMNS = {t: (v.shape[1], TABLES.numeric[t].shape[1]) for t, v in TABLES.categorical.items()}
FAST = {"backend": "aot_eager"}


def _model(task: str = "churn", **config: object) -> TaskModel:
    torch.manual_seed(0)
    return TaskModel(task, table_specs(TABLES), ModelConfig(hidden=32, head_hidden=16, embedding_dim=8,
                                                            **config))  # type: ignore[arg-type]


def _batches(seed_type: str, sizes: list[int], seed: int = 0) -> list:
    gen = torch.Generator().manual_seed(seed)
    fills = [0.2, 0.9, 0.5, 0.7]
    return [gather_inputs(TABLES, random_batch(TABLES, seed_type, n, fill=fills[i % 4], generator=gen))
            for i, n in enumerate(sizes)]


def _ladder(seed_type: str = "customer", max_seeds: int = 8) -> BucketLadder:
    return tree_ladder(seed_type, max_seeds, factor=4.0)


def test_inductor_outputs_match_eager() -> None:
    eager = Predictor(_model(), CompileConfig("none"))
    dynamic = Predictor(_model(), CompileConfig("dynamic"))
    buckets = Predictor(_model(), CompileConfig("buckets"), _ladder(max_seeds=4))
    for inputs in _batches("customer", [3, 2, 4]):
        expected = eager(inputs)
        assert expected.shape == (inputs.num_seeds,)
        torch.testing.assert_close(dynamic(inputs), expected, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(buckets(inputs), expected, rtol=1e-4, atol=1e-4)


def test_no_recompiles_within_the_ladder_after_warmup() -> None:
    ladder = _ladder()
    predictor = Predictor(_model("purchase"), CompileConfig("buckets", **FAST), [ladder, _ladder("article")])
    before = compiled_graph_count()
    runs = predictor.warmup(COLUMNS)
    assert runs == len(ladder.buckets) + len(_ladder("article").buckets)
    assert compiled_graph_count() - before == runs  # one graph per bucket and seed type
    warmed = compiled_graph_count()
    used = set()
    batches = _batches("customer", [1, 8, 3, 5, 2, 7, 4, 6, 1, 8], seed=1) + _batches("article", [1, 8, 5])
    for inputs in batches:
        used.add((inputs.seed_type, predictor.bucket_for(inputs).name))
        assert predictor(inputs).shape == (inputs.num_seeds, 9)
    assert compiled_graph_count() == warmed
    assert len(used) >= 3


def test_dynamic_warmup_covers_the_ladder_and_a_lonely_seed() -> None:
    predictor = Predictor(_model(), CompileConfig("dynamic", **FAST), _ladder())
    assert predictor.warmup(COLUMNS) == len(_ladder().buckets) + 1
    assert Predictor(_model(), CompileConfig("none")).warmup(COLUMNS) == 0


def test_padded_training_matches_unpadded_and_lr_tensor_never_recompiles() -> None:
    # Mean aggregation: with sum, two Adam steps turn the padded forward's other summation order
    # into 4e-5 differences (the sign-like update, as below); the forwards themselves agree to 1e-5.
    model = _model(aggregation="mean")
    steps = {}
    for strategy in ("none", "buckets"):
        copy_ = copy.deepcopy(model)
        optimizer = tensor_lr_adam(copy_.parameters(), 1e-2)
        steps[strategy] = TrainStep(copy_, optimizer, CompileConfig(strategy, **FAST), _ladder())
    batches = _batches("customer", [6, 6, 6], seed=2)
    targets = [random_targets("churn", 6, seed=i) for i in range(3)]
    for step in steps.values():
        losses = [step(b, t) for b, t in zip(batches[:2], targets[:2], strict=True)]
        assert all(loss.dim() == 0 and torch.isfinite(loss) for loss in losses)
    for a, b in zip(steps["none"].model.parameters(), steps["buckets"].model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    step = steps["buckets"]
    graphs = compiled_graph_count()
    step.optimizer.param_groups[0]["lr"].fill_(0.0)
    frozen = [p.detach().clone() for p in step.model.parameters()]
    step(batches[2], targets[2])
    assert all(torch.equal(a, b) for a, b in zip(frozen, step.model.parameters(), strict=True))
    step.optimizer.param_groups[0]["lr"].fill_(5e-3)
    step(batches[2], targets[2])
    assert not all(torch.equal(a, b) for a, b in zip(frozen, step.model.parameters(), strict=True))
    assert compiled_graph_count() == graphs


def test_purchase_training_step_padded_and_compiled_matches_eager() -> None:
    # At a learning rate of 0 both steps see the same weights at every call, so each loss compares
    # closely (after a real step Adam's sign-like update turns float noise into 1e-3 differences).
    steps = {}
    for strategy in ("none", "buckets"):
        model = _model("purchase")  # the same seed: the same weights
        steps[strategy] = TrainStep(model, tensor_lr_adam(model.parameters(), 0.0),
                                    CompileConfig(strategy, **FAST), [_ladder(), _ladder("article")])
    customers, articles = _batches("customer", [5])[0], _batches("article", [5])[0]
    generator = torch.Generator().manual_seed(3)
    calls = [(), (torch.rand(5, generator=generator), random_purchase_extras(TABLES, 5)),  # histories, prior
             (torch.rand(5, generator=generator), random_purchase_extras(TABLES, 5, seed=1))]  # other ones
    losses: dict[str, list[torch.Tensor]] = {}
    for strategy, step in steps.items():
        graphs = compiled_graph_count()
        losses[strategy] = [step(customers, articles, *extra) for extra in calls]
        if strategy == "buckets":  # padded like the bucket: with and without extras, then reused
            assert compiled_graph_count() - graphs == 2
    for eager, padded in zip(losses["none"], losses["buckets"], strict=True):
        assert eager.dim() == 0 and torch.isfinite(eager)
        torch.testing.assert_close(padded, eager, rtol=1e-5, atol=1e-6)
    assert len({float(loss) for loss in losses["none"]}) == 3  # the extras change what is computed


def test_cuda_graphs_refused_on_cpu() -> None:
    with pytest.raises(ValueError, match="reduce-overhead"):
        compile_function(lambda x: x, CompileConfig("buckets", mode="reduce-overhead"), "cpu")
    with pytest.raises(ValueError, match="unknown compile strategy"):
        CompileConfig("static")


def _square_plus_one(x: torch.Tensor) -> torch.Tensor:
    return x * x + 1


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cache") / "compile_cache.bin"
    recorder = CompileCacheRecorder()
    torch.compile(_square_plus_one, dynamic=False)(torch.arange(7.0))
    assert recorder.save(path, "cpu")
    return path


def test_artifact_warms_a_fresh_process(artifact: Path, tmp_path: Path) -> None:
    code = ("import sys, torch; from torch._dynamo.utils import counters;"
            "from torch._inductor.cpp_builder import CppBuilder;"
            "from models.runtime.compile_cache import load_compile_cache;"
            "from tests.unit.test_compile import _square_plus_one;"
            "builds = [];"
            "build = CppBuilder.build;"
            "CppBuilder.build = lambda self: builds.append(self) or build(self);"
            "hit = load_compile_cache(sys.argv[1], 'cpu');"
            "print(torch.compile(_square_plus_one, dynamic=False)(torch.arange(7.0))[3].item());"
            "print(hit, counters['inductor']['fxgraph_cache_hit'],"
            "      sum(b.get_target_file_path().endswith('.so') for b in builds))")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "PYTHONPATH": os.getcwd(),
           "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code, str(artifact)], env=env, capture_output=True,
                          text=True, check=True)
    value, summary = done.stdout.strip().splitlines()[-2:]
    assert float(value) == 10.0
    # Inductor still preprocesses its kernel header once per process; it links nothing.
    assert summary.split() == ["True", "1", "0"], "warm start must hit the graph cache and link no library"


def test_a_tampered_artifact_is_a_miss_with_a_warning(artifact: Path, tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    raw = artifact.read_bytes()
    tampered = tmp_path / "tampered.bin"
    tampered.write_bytes(raw[:-1] + bytes([raw[-1] ^ 0x01]))
    with caplog.at_level(logging.WARNING, logger="models.runtime.compile_cache"):
        assert load_compile_cache(tampered, "cpu") is False
    assert f"{tampered} does not match the sha256 recorded when it was written" in caplog.text


def test_stale_corrupt_or_foreign_artifacts_are_misses(artifact: Path, tmp_path: Path) -> None:
    assert load_compile_cache(artifact, "cpu")
    raw = artifact.read_bytes()
    body = unseal(raw)
    header, _, payload = body.partition(b"\n")
    meta = json.loads(header)
    cases = {
        "missing": None,
        "garbage": b"not an artifact at all",
        "unsealed": body,
        "truncated": raw[: len(raw) // 2],
        # A changed byte fails the seal; re-sealed, it still fails its part's own digest.
        "flipped": raw[:-1] + bytes([raw[-1] ^ 0xFF]),
        "flipped-resealed": seal(header + b"\n" + bytes([payload[0] ^ 0xFF]) + payload[1:]),
        "stale": seal(json.dumps({**meta, "key": {**meta["key"], "torch": "1"}}).encode() + b"\n" + payload),
    }
    escape = copy.deepcopy(meta)
    escape["parts"][-1][0] = "kernel:../../escaped.so"
    cases["escaping"] = seal(json.dumps(escape).encode() + b"\n" + payload)
    for name, content in cases.items():
        path = tmp_path / f"{name}.bin"
        if content is not None:
            path.write_bytes(content)
        assert load_compile_cache(path, "cpu") is False, name
    assert not (tmp_path.parent / "escaped.so").exists()
