"""Compile-cache artifact: what a fresh process needs to skip compiling, in one file.

``torch.compiler.save_cache_artifacts()`` (the "mega-cache") holds the AOTAutograd and Inductor
graph caches, but on CPU not the C++ kernels those graphs call: a fresh process would still run
g++ for every kernel, which is most of the cold compile time. So the artifact also carries the
kernel binaries Inductor built while recording, and loading puts them back into this process's
Inductor cache directory, where Inductor finds them by content hash.

File layout: a seal line ``relserve-compile-cache sha256 <hex>`` holding the sha256 of everything
after it, recorded when the file was written and checked before anything in it is used (a
mismatch is a miss and a warning); then one JSON header line (format, key, and per-part
offset/length/sha256) followed by the raw parts. Files are written under per-process temporary
names and renamed into place, so two workers saving one artifact leave one complete file.
Nothing is unpickled by this module; the mega-cache and kernels are still code that torch will
run, so an artifact is trusted exactly like the bundle it ships in (see the README).
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import sys
from pathlib import Path

import torch
from torch._inductor.runtime.cache_dir_utils import cache_dir

from models.files import atomic_write
from models.runtime.kernel_files import (
    KERNEL_SUFFIXES,
    is_complete,
    is_complete_file,
    kernel_files,
)

log = logging.getLogger(__name__)

FORMAT = 1
SEAL = b"relserve-compile-cache sha256 "


def cache_key(device: torch.device | str) -> dict[str, str]:
    """What an artifact must match to be usable: torch, Python, device, CPU ISA / GPU arch, threads.

    Inductor's own graph-cache keys include the torch thread count, so an artifact recorded with
    2 threads loads but recompiles in a 1-thread worker: the count is part of the key here too.
    """
    device = torch.device(device)
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        arch = f"sm_{major}{minor}"
    else:
        # ATen's dispatch level, not Inductor's pick_vec_isa(): that one compiles ISA probes, which
        # must come from the artifact. Kernels compiled for other flags have other cache keys.
        arch = f"{platform.machine()}-{torch.backends.cpu.get_cpu_capability()}"
    return {"torch": torch.__version__, "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "device": device.type, "arch": arch, "threads": str(torch.get_num_threads())}


def _isa_checks(root: Path) -> set[Path]:
    """Inductor's CPU-ISA probe libraries (its first compile builds ~7 of them, seconds of g++)."""
    found = set()
    for source in root.glob("*/*.cpp"):
        library = source.with_suffix(".so")
        if (source.stat().st_size < 4096 and library.is_file()
                and "_chk_kernel" in source.read_text(errors="replace")):
            found.add(library.relative_to(root))
    return found


def _loaded_kernels(root: Path) -> set[Path]:
    """Kernel modules this process imported from the cache, including ones built by earlier processes."""
    loaded = set()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and file.endswith(KERNEL_SUFFIXES) and Path(file).resolve().is_relative_to(root):
            loaded.add(Path(file).resolve().relative_to(root))
    return loaded


class CompileCacheRecorder:
    """Records what gets compiled from now on, and writes it as one artifact.

    Create it before the first compiled call; :meth:`save` after warm-up. Kernels are those built
    since then, those this process loaded from the cache (built earlier by another process), and
    Inductor's ISA probes.
    """

    def __init__(self) -> None:
        self.root = Path(cache_dir()).resolve()
        self.before = kernel_files(self.root)

    def save(self, path: str | Path, device: torch.device | str) -> bool:
        """Write the artifact to ``path``; ``False`` (and nothing written) if nothing was compiled."""
        mega = torch.compiler.save_cache_artifacts()
        # another process may be compiling a kernel right now: a short file is left out, not recorded
        kernels = sorted(p for p in (kernel_files(self.root) - self.before) | _loaded_kernels(self.root)
                         | _isa_checks(self.root) if is_complete_file(self.root / p))
        if mega is None and not kernels:
            log.info("compile cache: nothing compiled, no artifact written")
            return False
        parts: list[tuple[str, bytes]] = [("mega", mega[0] if mega else b"")]
        parts += [(f"kernel:{p.as_posix()}", (self.root / p).read_bytes()) for p in kernels]
        header, offset = {"format": FORMAT, "key": cache_key(device), "parts": []}, 0
        for name, data in parts:
            header["parts"].append([name, offset, len(data), hashlib.sha256(data).hexdigest()])
            offset += len(data)
        body = b"".join([json.dumps(header).encode(), b"\n", *(data for _, data in parts)])
        atomic_write(path, seal(body))
        return True


def seal(body: bytes) -> bytes:
    """``body`` behind the line that records its sha256 (what :func:`load_compile_cache` checks)."""
    return SEAL + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def unseal(raw: bytes) -> bytes | None:
    """The body of a sealed file, or ``None`` when it is unsealed or its sha256 does not match."""
    line, _, body = raw.partition(b"\n")
    if not line.startswith(SEAL) or line[len(SEAL):] != hashlib.sha256(body).hexdigest().encode():
        return None
    return body


def load_compile_cache(path: str | Path, device: torch.device | str) -> bool:
    """Load an artifact written by :meth:`CompileCacheRecorder.save` into this process.

    Returns:
        ``True`` on a hit. A missing, stale (other torch / device / ISA), corrupt or foreign file
        is a miss: logged, ``False``, never an exception; compiling then simply runs cold.
    """
    try:
        return _load(Path(path), device)
    except Exception as exc:  # a cache must never take the process down
        log.warning("compile cache miss: %s unreadable (%s: %s)", path, type(exc).__name__, exc)
        return False


def _load(path: Path, device: torch.device | str) -> bool:
    if not path.is_file():
        log.info("compile cache miss: %s does not exist", path)
        return False
    body = unseal(path.read_bytes())
    if body is None:
        log.warning("compile cache miss: %s does not match the sha256 recorded when it was written", path)
        return False
    line, _, payload = body.partition(b"\n")
    header = json.loads(line)
    if header.get("format") != FORMAT or header.get("key") != cache_key(device):
        log.warning("compile cache miss: %s was built for %s, this process is %s",
                    path, header.get("key"), cache_key(device))
        return False
    parts = {}
    for name, offset, length, digest in header["parts"]:
        data = payload[offset:offset + length]
        if len(data) != length or hashlib.sha256(data).hexdigest() != digest:
            log.warning("compile cache miss: %s is corrupt (part %s)", path, name)
            return False
        parts[name] = data
    root = Path(cache_dir()).resolve()
    kernels = {(root / name.removeprefix("kernel:")).resolve(): data
               for name, data in parts.items() if name.startswith("kernel:")}
    if any(root not in target.parents for target in kernels):
        log.warning("compile cache miss: %s names files outside the cache directory", path)
        return False
    for target, data in kernels.items():
        if not is_complete(data[:64], len(data)):  # recorded by a version that did not check
            log.warning("compile cache: %s holds a truncated kernel %s; it is compiled instead",
                        path, target.name)
        elif not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, data)
    if parts.get("mega") and torch.compiler.load_cache_artifacts(parts["mega"]) is None:
        log.warning("compile cache miss: torch rejected the mega-cache in %s", path)
        return False
    return True
