"""The torch releases relserve is tested on, and what the installed release offers.

GPU machines ship their own torch (often a release or two behind the one CI pins), so the compile
path asks the installed torch what it can do instead of assuming the pinned release:

* ``torch.compile(recompile_limit=..., isolate_recompiles=...)`` exist from torch 2.13. Before,
  the recompile budget is Dynamo's process-wide ``recompile_limit`` (raised here by each compile's
  own budget) and all models of one class share one cache of graphs.
* ``torch.compiler.skip_guard_on_all_nn_modules_unsafe`` (a ``guard_filter_fn``) is only used
  with isolated recompiles: without them two models of one class share their graphs, and the
  guards on module attributes are what tells them apart.

Importing this module does not import torch (the command lines check the version before the
seconds an ``import torch`` costs).
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import re
from dataclasses import dataclass

SUPPORTED_TORCH = ">=2.11,<2.14"
"""The range pyproject.toml declares (a test keeps them equal): CI runs the pinned 2.13 CPU build;
2.11 is the release GPU machine images ship, checked there and, in CI, by simulating its API."""
OLDEST = (2, 11)
NEWEST = (2, 13)


def release(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a torch version string such as ``2.13.0+cpu`` (``None``: unreadable)."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None


def installed_torch() -> str | None:
    """The installed torch's version, read from its package metadata (``None``: not installed)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_problem(version: str | None) -> str | None:
    """Why relserve cannot run on torch ``version`` (one line), or ``None`` when it can."""
    if version is None:
        return f"torch is not installed; relserve needs torch {SUPPORTED_TORCH}"
    found = release(version)
    if found is None or not OLDEST <= found <= NEWEST:
        return (f"torch {version} is installed; relserve is tested on torch {SUPPORTED_TORCH} "
                f"(install one of those releases)")
    return None


@dataclass(frozen=True)
class CompileFeatures:
    """What ``torch.compile`` offers in the installed release.

    Args:
        recompile_limit: ``torch.compile`` takes ``recompile_limit=`` (a budget per compile).
        isolate_recompiles: ``torch.compile`` takes ``isolate_recompiles=`` (graphs per compile).
        module_guard_filter: ``torch.compiler.skip_guard_on_all_nn_modules_unsafe`` exists.
    """

    recompile_limit: bool
    isolate_recompiles: bool
    module_guard_filter: bool


@functools.cache
def compile_features() -> CompileFeatures:
    """Detected once per process from ``torch.compile``'s signature and ``torch.compiler``."""
    import torch

    parameters = inspect.signature(torch.compile).parameters
    return CompileFeatures(recompile_limit="recompile_limit" in parameters,
                           isolate_recompiles="isolate_recompiles" in parameters,
                           module_guard_filter=hasattr(torch.compiler, "skip_guard_on_all_nn_modules_unsafe"))
