"""The tables in a shop's folder, for a drafted spec (:mod:`training.data.draft`).

Every table file counts: at the top, one folder down, and inside each zip. Files side by side with
the same columns and extension are the parts of one table (monthly exports ``orders_2010-01.csv``,
``orders_2010-02.csv``, ...) and are named by one glob over their common prefix
(``orders_2010-*.csv``), as long as that glob names exactly them; any other file is a table of its
own.
"""

from __future__ import annotations

import glob
from collections import defaultdict
from pathlib import Path, PurePosixPath

from training.data.archives import is_archive
from training.data.common import DataError
from training.data.files import SourceFile, known_format, resolve_files, table_suffix
from training.data.spec_file import SPEC_FILE


def _entries(data_dir: Path) -> list[tuple[str, str, SourceFile]]:
    """``(container, spec name, file)`` of every table file: ``container`` is the folder (or the
    zip and the folder in it) the file sits in, with a trailing ``/``, empty at the top."""
    entries = []
    for path in sorted(data_dir.iterdir()):
        if path.name.startswith(".") or path.name == SPEC_FILE:
            continue
        if path.is_dir():
            for part in sorted(path.iterdir()):
                if part.is_file() and known_format(part.name) and not part.name.startswith("."):
                    entries.append((f"{path.name}/", f"{path.name}/{part.name}",
                                    resolve_files(data_dir, f"{path.name}/{part.name}")[0]))
        elif is_archive(path.name):
            for file in resolve_files(data_dir, path.name):
                parent = str(PurePosixPath(file.member).parent)
                container = f"{path.name}/" + ("" if parent == "." else f"{parent}/")
                entries.append((container, f"{path.name}/{file.member}", file))
        elif known_format(path.name):
            entries.append(("", path.name, resolve_files(data_dir, path.name)[0]))
    return entries


def _columns(file: SourceFile) -> tuple[str, ...] | None:
    try:
        return tuple(file.columns())
    except DataError:
        return None


def table_files(data_dir: Path) -> list[tuple[str, list[SourceFile]]]:
    """``(spec file name or glob, its files)`` for every table in ``data_dir``, in name order."""
    groups: dict[tuple, list[tuple[str, SourceFile]]] = defaultdict(list)
    for container, name, file in _entries(data_dir):
        columns = _columns(file)
        key = (container, table_suffix(name), columns) if columns is not None else (name,)
        groups[key].append((name, file))
    tables = []
    for key, members in groups.items():
        if len(members) > 1:
            container, suffix = key[0], key[1]
            prefix = _common_prefix([PurePosixPath(n).name for n, _ in members])
            pattern = f"{container}{glob.escape(prefix)}*{suffix}"
            files = resolve_files(data_dir, pattern)
            if sorted(map(_identity, files)) == sorted(_identity(f) for _, f in members):
                tables.append((pattern, files))
                continue
        tables += [(name, [file]) for name, file in members]
    return sorted(tables, key=lambda table: table[0])


def _common_prefix(names: list[str]) -> str:
    """The characters every one of ``names`` starts with."""
    first, last = min(names), max(names)
    same = next((k for k, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))
    return first[:same]


def _identity(file: SourceFile) -> tuple[str, str]:
    return (str(file.archive or file.path), file.member or "")
