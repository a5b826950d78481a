"""Compiled kernels in Inductor's cache directory: telling a whole one from a truncated one.

Inductor builds a C++ kernel with the compiler writing straight to its final path
(``<cache>/<xx>/<key>.main.so``) and afterwards trusts any file at that path: a compile killed
mid-write (the process group stopped while g++ ran) leaves a short file, and every later process
fails to load it (``ImportError: ... file too short``) without compiling again, so a server
would restart its worker forever. A reader that copies kernels while another process builds one
(:class:`models.runtime.compile_cache.CompileCacheRecorder`) can see the same short file. Both
check :func:`is_complete` first; :func:`repair_kernel_cache` removes short kernels so Inductor
builds them again.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

from torch.utils._filelock import FileLock

log = logging.getLogger(__name__)

KERNEL_SUFFIXES = (".so", ".o")
_ELF = b"\x7fELF"
# e_ident's class byte -> (offset of e_shoff, its struct code, offset of e_shentsize)
_LAYOUT = {1: (0x20, "I", 0x2E), 2: (0x28, "Q", 0x3A)}
_LOCK_TIMEOUT_S = 600.0  # Inductor's own LOCK_TIMEOUT: a build of one kernel never takes longer


def is_complete(head: bytes, size: int) -> bool:
    """Whether a kernel file of ``size`` bytes starting with ``head`` (its first 64 bytes or
    more) is whole.

    An ELF file (Linux) is whole when it reaches the end of its section header table, which the
    linker writes last; any other format only has to be non-empty.
    """
    if size == 0:
        return False
    if not head.startswith(_ELF):
        return True
    layout = _LAYOUT.get(head[4] if len(head) > 4 else 0)
    if layout is None or len(head) < 64:
        return False
    endian = "<" if head[5] == 1 else ">"
    offset, code, entsize_at = layout
    (table,) = struct.unpack_from(endian + code, head, offset)
    entsize, count = struct.unpack_from(endian + "HH", head, entsize_at)
    return size >= table + entsize * count


def is_complete_file(path: Path) -> bool:
    """:func:`is_complete` for a file on disk (``False`` when it cannot be read)."""
    try:
        with path.open("rb") as file:
            return is_complete(file.read(64), path.stat().st_size)
    except OSError:
        return False


def kernel_files(root: Path) -> set[Path]:
    """Kernel binaries under ``root``, relative to it (whole or not)."""
    if not root.is_dir():
        return set()
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file() and p.name.endswith(KERNEL_SUFFIXES)}


def repair_kernel_cache(root: Path) -> list[Path]:
    """Remove the truncated kernels under ``root`` (Inductor's cache directory); returns them.

    Each candidate is checked again under the lock Inductor holds while building that kernel, so a
    kernel another process is compiling right now is waited for, not removed.
    """
    removed = []
    for relative in sorted(kernel_files(root)):
        path = root / relative
        if is_complete_file(path):
            continue
        (root / "locks").mkdir(parents=True, exist_ok=True)
        key = path.name.split(".", 1)[0]
        with FileLock(str(root / "locks" / f"{key}.lock"), timeout=_LOCK_TIMEOUT_S):
            if path.exists() and not is_complete_file(path):
                path.unlink()
                removed.append(relative)
    if removed:
        log.warning("compile cache: removed %d truncated kernel(s) from %s (a compile was killed "
                    "mid-write); they are compiled again: %s", len(removed), root,
                    ", ".join(p.as_posix() for p in removed))
    return removed
