"""The architecture contracts of ``pyproject.toml`` ([tool.importlinter]), checked by import-linter.

The tree must keep them, and a violating import must break them: both run ``lint-imports`` for real,
the second on a copy of the packages with one bad import added.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("models", "serve", "training", "loadtest")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=300)


def test_the_tree_keeps_every_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "bad_import", "broken"), [
    ("models/nn/ranking.py", "from models.store.csr import TemporalCSR",
     "models.nn is not allowed to import models.store"),
    ("models/store/csr.py", "from models.graph import sampler",
     "models.store is not allowed to import models.graph"),
    ("serve/http/apis.py", "import lightgbm", "serve.http is not allowed to import lightgbm"),
    ("serve/score/run.py", "import lightgbm", "serve is not allowed to import lightgbm"),
    ("serve/graph/owner.py", "from serve.bench import run",
     "serve.graph is not allowed to import serve.bench"),
    ("models/registry.py", "from training.tasks import definitions",
     "models is not allowed to import training"),
    ("serve/bench/ceiling.py", "from serve.bench.run import main", "No cycles are allowed in serve.bench"),
])
def test_a_violating_import_breaks_its_contract(tmp_path, module, bad_import, broken):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    path = tmp_path / module
    path.write_text(path.read_text() + f"\n{bad_import}\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert broken in " ".join(result.stdout.split()), result.stdout
