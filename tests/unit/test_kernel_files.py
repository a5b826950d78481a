"""Truncated compiled kernels: told apart from whole ones, removed, compiled again.

A compile killed while g++ writes its output leaves a short ``.so`` that Inductor trusts forever
(``ImportError: file too short``), so a worker restarted by the server fails the same way each
time. The last test reproduces that with a real Inductor cache in fresh processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from models.runtime.kernel_files import is_complete, is_complete_file, kernel_files, repair_kernel_cache

LIBRARY = next(Path(torch.__file__).parent.joinpath("lib").glob("libc10.so*"), None)


@pytest.mark.skipif(LIBRARY is None, reason="no ELF shared library of torch to read")
def test_a_whole_library_is_complete_and_any_cut_of_it_is_not(tmp_path: Path) -> None:
    data = LIBRARY.read_bytes()
    assert is_complete(data[:64], len(data))
    for size in (0, 63, 64, 4096, len(data) // 2, len(data) - 1):
        assert not is_complete(data[:64], size), size
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[: len(data) - 1])
    assert not is_complete_file(cut)
    assert not is_complete_file(tmp_path / "missing.so")


def test_a_non_elf_kernel_only_has_to_be_non_empty() -> None:
    assert is_complete(b"\xcf\xfa\xed\xfe" + bytes(60), 4096)  # Mach-O
    assert not is_complete(b"", 0)


@pytest.mark.skipif(LIBRARY is None, reason="no ELF shared library of torch to read")
def test_repair_removes_short_kernels_and_keeps_whole_ones(tmp_path: Path) -> None:
    whole = tmp_path / "ab" / "cabwhole.main.so"
    short = tmp_path / "cd" / "ccdshort.main.so"
    empty = tmp_path / "cd" / "ccdempty.main.o"
    for path in (whole, short, empty):
        path.parent.mkdir(exist_ok=True)
    whole.write_bytes(LIBRARY.read_bytes())
    short.write_bytes(LIBRARY.read_bytes()[:10_000])
    empty.write_bytes(b"")
    (tmp_path / "cd" / "ccdshort.main.cpp").write_text("// source stays")
    removed = repair_kernel_cache(tmp_path)
    assert sorted(removed) == sorted([short.relative_to(tmp_path), empty.relative_to(tmp_path)])
    assert kernel_files(tmp_path) == {whole.relative_to(tmp_path)}
    assert (tmp_path / "cd" / "ccdshort.main.cpp").exists()
    assert repair_kernel_cache(tmp_path) == []


COMPILE = """
import sys, torch
if sys.argv[1] == "repair":
    from pathlib import Path
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    from models.runtime.kernel_files import repair_kernel_cache
    print("removed", len(repair_kernel_cache(Path(cache_dir()))))
f = torch.compile(lambda x: (x * 2.0 + 1.0).relu().sum(dim=1), backend="inductor")
print("value", float(f(torch.ones(4, 3)).sum()))
"""


@pytest.mark.slow
def test_a_truncated_kernel_breaks_every_later_compile_until_repaired(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
           "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "OMP_NUM_THREADS": "1"}

    def run(mode: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", COMPILE, mode], env=env, capture_output=True,
                              text=True, timeout=300, cwd=Path(__file__).parents[2])

    first = run("plain")
    assert first.returncode == 0 and "value 36.0" in first.stdout, first.stderr[-2000:]
    kernels = [tmp_path / "inductor" / p for p in kernel_files(tmp_path / "inductor")
               if p.name.endswith(".main.so")]
    assert kernels, "the compile built no kernel"
    for kernel in kernels:
        kernel.write_bytes(kernel.read_bytes()[:100])

    broken = run("plain")
    assert broken.returncode != 0 and "ImportError" in broken.stderr, broken.stderr[-2000:]

    repaired = run("repair")
    assert repaired.returncode == 0, repaired.stderr[-2000:]
    assert f"removed {len(kernels)}" in repaired.stdout and "value 36.0" in repaired.stdout
    assert all(is_complete_file(kernel) for kernel in kernels)
