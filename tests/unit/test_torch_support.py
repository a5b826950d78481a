"""The torch it finds: the tested range in one place, a one-line refusal outside it, and every
compiled path on a torch without ``torch.compile(recompile_limit=, isolate_recompiles=)`` (torch
2.11, as GPU images ship it), simulated here by hiding those keywords from the pinned torch."""

from __future__ import annotations

import functools
import inspect
import tomllib
from pathlib import Path

import pytest
import torch

import models.cli
from models.graph.features import gather_inputs, table_specs
from models.nn.config import ModelConfig
from models.nn.model import TaskModel
from models.runtime.compile import CompileConfig, Predictor, compiled_graph_count
from models.torch_support import SUPPORTED_TORCH, CompileFeatures, compile_features, release, torch_problem
from serve.versions.compiled_regions import ForwardGate
from training.bench.random_batches import random_batch, random_tables, tree_ladder

ROOT = Path(__file__).resolve().parents[2]
TABLES = random_tables(200, 60)
COLUMNS = {t: (v.shape[1], TABLES.numeric[t].shape[1]) for t, v in TABLES.categorical.items()}


def test_pyproject_declares_the_tested_range() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_requirement = next(d for d in dependencies if d.startswith("torch") and d[5] in "<>=!~ ")
    assert torch_requirement.split(";")[0].replace(" ", "") == f"torch{SUPPORTED_TORCH}"
    assert torch_problem(torch.__version__) is None  # CI's pinned torch is inside it


@pytest.mark.parametrize(("version", "supported"), [
    ("2.11.0+cu130", True), ("2.12.1", True), ("2.13.0+cpu", True),
    ("2.10.0", False), ("2.14.0", False), ("1.13.1", False), ("nightly", False), (None, False),
])
def test_the_range_is_checked_by_release(version: str | None, supported: bool) -> None:
    assert (torch_problem(version) is None) == supported


def test_a_command_line_on_an_untested_torch_stops_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture) -> None:
    from serve.config import parse_args

    monkeypatch.setattr(models.cli, "installed_torch", lambda: "2.9.1")
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--artifacts", "somewhere"])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "torch 2.9.1" in lines[0] and SUPPORTED_TORCH in lines[0]


def test_features_follow_the_release() -> None:
    newer = release(torch.__version__) >= (2, 13)  # CI's pinned torch; GPU images ship 2.11
    assert compile_features() == CompileFeatures(newer, newer, True)


@pytest.fixture
def older_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile as torch 2.11 has it: no recompile budget or isolation per compile."""
    real = torch.compile

    @functools.wraps(real)
    def compile_211(*args: object, **kwargs: object) -> object:
        for keyword in ("recompile_limit", "isolate_recompiles"):
            if keyword in kwargs:
                raise TypeError(f"compile() got an unexpected keyword argument '{keyword}'")
        return real(*args, **kwargs)

    parameters = [p for name, p in inspect.signature(real).parameters.items()
                  if name not in ("recompile_limit", "isolate_recompiles")]
    compile_211.__signature__ = inspect.signature(real).replace(parameters=parameters)
    monkeypatch.setattr(torch, "compile", compile_211)
    limit = torch._dynamo.config.recompile_limit
    compile_features.cache_clear()
    yield
    compile_features.cache_clear()
    torch._dynamo.config.recompile_limit = limit


def _model(hidden: int, seed: int) -> TaskModel:
    torch.manual_seed(seed)
    config = ModelConfig(hidden=hidden, head_hidden=16, embedding_dim=8)
    return TaskModel("churn", table_specs(TABLES), config)


@pytest.mark.slow
def test_buckets_compile_and_swap_without_the_213_keywords(older_torch: None) -> None:
    features = compile_features()
    assert not features.recompile_limit and not features.isolate_recompiles
    ladder = tree_ladder("customer", 8, factor=4.0)
    gen = torch.Generator().manual_seed(3)
    batches = [gather_inputs(TABLES, random_batch(TABLES, "customer", n, fill=0.6, generator=gen))
               for n in (1, 5, 8, 3)]
    # two versions of one model class in one process, as a hot swap holds them: without isolated
    # recompiles the module guards are what keep their graphs apart (one is twice as wide)
    served = []
    for hidden, seed in ((32, 0), (64, 1)):
        eager = Predictor(_model(hidden, seed), CompileConfig("none"))
        compiled = Predictor(_model(hidden, seed), CompileConfig("buckets", backend="aot_eager"), ladder)
        gate = ForwardGate()
        assert gate.wrap(type("Inference", (), {"predictor": compiled})()) is None  # no regions
        assert compiled.forward is not compiled.model  # but the forward is gated
        assert compiled.warmup(COLUMNS) == len(ladder.buckets)
        served.append((eager, compiled))
    warmed = compiled_graph_count()
    for _ in range(2):
        for eager, compiled in served:
            for inputs in batches:
                torch.testing.assert_close(compiled(inputs), eager(inputs), rtol=1e-5, atol=1e-5)
    assert compiled_graph_count() == warmed  # every bucket of both versions stayed compiled
