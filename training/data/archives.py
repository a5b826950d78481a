"""Zip archives as published: a table's files read from inside a ``.zip`` without unzipping it first.

Public repositories and shops hand out exports zipped (the UCI Online Retail II download is a zip
holding one workbook; a marketplace's dump is a zip of CSV files). A spec names the archive, and
optionally which of its members, as a path through it::

    file = "online_retail_II.zip"               # every member that is a table file
    file = "olist.zip/olist_orders_dataset.csv"  # one member (also found inside a folder of the zip)
    file = "dump.zip/orders/*.csv"              # a glob over the members

Members are extracted once per process into a private temporary directory (removed at exit) and
read from there as any other file, so every format, option and error message is the plain file's.
Extracted files are named after the member's base name, never its path, so a member whose name
climbs out of the archive (``..`` parts) cannot land outside that directory.
"""

from __future__ import annotations

import atexit
import fnmatch
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path, PurePosixPath

from training.data.common import DataError

ARCHIVE_SUFFIX = ".zip"
_MAX_LISTED = 8


def is_archive(name: str) -> bool:
    """Whether ``name`` is a zip archive's (by its extension)."""
    return name.lower().endswith(ARCHIVE_SUFFIX)


def split_archive(pattern: str) -> tuple[str, str] | None:
    """``(archive, members)`` when a part of ``pattern`` names a zip (``members`` is ``""`` when
    the pattern ends at the archive), else ``None``: ``"a/b.zip/c/*.csv"`` -> ``("a/b.zip", "c/*.csv")``."""
    parts = PurePosixPath(pattern.replace("\\", "/")).parts
    for k, part in enumerate(parts):
        if is_archive(part):
            return str(PurePosixPath(*parts[:k + 1])), "/".join(parts[k + 1:])
    return None


def _is_table_member(info: zipfile.ZipInfo) -> bool:
    """A file member that is not an operating system's leftover (``__MACOSX/``, dot files)."""
    path = PurePosixPath(info.filename)
    return not info.is_dir() and "__MACOSX" not in path.parts and not path.name.startswith(".")


def _matches(name: str, pattern: str) -> bool:
    """Whether member ``name`` is what ``pattern`` names: by its path in the archive or its base name."""
    return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(PurePosixPath(name).name, pattern)


def archive_members(archive: Path, pattern: str, is_table: Callable[[str], bool]) -> list[tuple[str, Path]]:
    """The members of ``archive`` that ``pattern`` names (``""``: every member ``is_table`` accepts
    by name), as ``(name in the archive, extracted path)``, in name order.

    Raises:
        DataError: not a readable zip, nothing matches, or a member cannot be extracted.
    """
    stat = archive.stat()
    return [(name, _extract(archive, stat.st_mtime_ns, name))
            for name in _member_names(archive, stat.st_mtime_ns, pattern, is_table)]


def _member_names(archive: Path, mtime_ns: int, pattern: str, is_table: Callable[[str], bool]) -> list[str]:
    try:
        with zipfile.ZipFile(archive) as book:
            infos = [i for i in book.infolist() if _is_table_member(i)]
    except (zipfile.BadZipFile, OSError) as err:
        raise DataError(f"{archive.name}: not a readable zip archive ({err})") from None
    names = sorted(i.filename for i in infos)
    chosen = [n for n in names if _matches(n, pattern)] if pattern else [n for n in names if is_table(n)]
    if not chosen:
        listed = ", ".join(names[:_MAX_LISTED]) + (", ..." if len(names) > _MAX_LISTED else "")
        what = f"no member matches {pattern!r}" if pattern else "no member is a table file"
        raise DataError(f"{archive.name}: {what} (members: {listed or 'none'})")
    return chosen


@cache
def _extract(archive: Path, mtime_ns: int, name: str) -> Path:
    """``name`` of ``archive`` (as it was at ``mtime_ns``) extracted once into :func:`_scratch`."""
    target = Path(tempfile.mkdtemp(dir=_scratch())) / PurePosixPath(name).name
    try:
        with zipfile.ZipFile(archive) as book, book.open(name) as source, open(target, "wb") as sink:
            shutil.copyfileobj(source, sink, 1 << 22)
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError) as err:
        # RuntimeError: an encrypted member; NotImplementedError: a compression zipfile lacks
        raise DataError(f"{archive.name}: cannot extract {name} ({err})") from None
    return target


@lru_cache(maxsize=1)
def _scratch() -> str:
    """This process's directory for extracted members, removed when it exits."""
    directory = tempfile.mkdtemp(prefix="relserve-zip-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory
