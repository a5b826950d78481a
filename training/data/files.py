"""The files of a table: found by name or glob, their format by extension (delimited text, plain or
gzip; Parquet; a spreadsheet's sheet; any of these inside a zip archive), read with the table's
:class:`training.data.spec.FileOptions` (:mod:`training.data.sources` reads them). Positions in
messages are ``line N`` in a CSV file (the header is line 1) and ``row N`` in a Parquet file or a
sheet.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from training.data.archives import archive_members, split_archive
from training.data.common import DataError, check_columns, data_file, data_line, read_header
from training.data.sheets import SHEET_SUFFIXES, sheet_table
from training.data.spec import FileOptions

CSV, PARQUET, SHEET = "csv", "parquet", "sheet"
# Delimited text by any of its usual names (the delimiter is read off the header line).
_FORMATS = {".csv": CSV, ".csv.gz": CSV, ".tsv": CSV, ".tsv.gz": CSV, ".txt": CSV, ".txt.gz": CSV,
            ".parquet": PARQUET, ".pq": PARQUET, **dict.fromkeys(SHEET_SUFFIXES, SHEET)}
PARQUET_BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class SourceFile:
    """One input file.

    Args:
        path: where it is.
        format: :data:`CSV`, :data:`PARQUET` or :data:`SHEET`.
        options: how it is written past its name (encoding, sheet, decimal mark).
        archive: the zip it was extracted from (``path`` is then the extracted copy), or ``None``.
        member: its name inside ``archive``.
    """

    path: Path
    format: str
    options: FileOptions = field(default_factory=FileOptions)
    archive: Path | None = None
    member: str | None = None

    @property
    def encoding(self) -> str:
        return self.options.encoding

    @property
    def sheet(self) -> str | None:
        return self.options.sheet

    @property
    def name(self) -> str:
        return self.path.name

    def relative_to(self, data_dir: Path) -> str:
        """Where it is under ``data_dir`` (``orders/2010.csv``, ``dump.zip/orders.csv``), or its
        absolute path when outside."""
        path = self.archive if self.archive is not None else self.path
        try:
            where = str(path.relative_to(data_dir))
        except ValueError:
            where = str(path)
        return where if self.archive is None else f"{where}/{self.member}"

    def where(self, row: int) -> str:
        """The position of 0-based data row ``row``: ``line N`` (CSV), ``row N`` (Parquet; a sheet's
        row as the spreadsheet numbers it, the header being row 1)."""
        if self.format == SHEET:
            return f"row {int(row) + 2}"
        if self.format == CSV:
            return f"line {data_line(self.path, row, self.encoding)}"
        return f"row {int(row) + 1}"

    def columns(self) -> list[str]:
        """The column names (the CSV header, the Parquet schema or the sheet's first row)."""
        if self.format == CSV:
            return read_header(self.path, self.encoding)
        if self.format == SHEET:
            return sheet_table(self.path, self.sheet)[0]
        try:
            return list(pq.read_schema(self.path).names)
        except (pa.ArrowInvalid, OSError) as err:
            raise DataError(f"{self.name}: not a readable Parquet file ({err})") from None

    def require(self, columns: tuple[str, ...]) -> None:
        """:class:`DataError` naming every column of ``columns`` the file lacks."""
        check_columns(self.path, self.columns(), tuple(dict.fromkeys(columns)))


def table_suffix(name: str) -> str | None:
    """The table extension ``name`` ends with (``.csv.gz``, ``.parquet``), or ``None``."""
    name = name.lower()
    return next((suffix for suffix in _FORMATS if name.endswith(suffix)), None)


def known_format(name: str) -> str | None:
    """The format of a file named ``name``, or ``None`` when its extension is not a table's."""
    suffix = table_suffix(name)
    return None if suffix is None else _FORMATS[suffix]


def file_format(path: Path) -> str:
    """:data:`CSV`, :data:`PARQUET` or :data:`SHEET` from the name's extension; :class:`DataError`
    otherwise."""
    kind = known_format(path.name)
    if kind is None:
        raise DataError(f"{path.name}: unknown file type (use .csv, .tsv or .txt, gzipped or not, .parquet, "
                        "a spreadsheet: .xlsx, .xls, .ods, or any of them in a .zip)")
    return kind


def resolve_files(data_dir: Path, pattern: str, options: FileOptions | None = None) -> list[SourceFile]:
    """The files ``pattern`` names under ``data_dir`` (or absolute): one name (``name`` or ``name.gz``)
    or a glob (``orders/*.parquet``), matches in sorted order; read as ``options`` say. A pattern
    through a zip (``dump.zip``, ``dump.zip/orders/*.csv``) names members of the archive
    (:mod:`training.data.archives`).

    Raises:
        DataError: nothing matches, or a match has an unknown extension.
    """
    options = options or FileOptions()
    through = split_archive(pattern)
    if through is None:
        return [SourceFile(p, file_format(p), options) for p in _paths(data_dir, pattern)]
    archives, members = through
    return [SourceFile(path, file_format(path), options, archive, name)
            for archive in _paths(data_dir, archives)
            for name, path in archive_members(archive, members, lambda n: known_format(n) is not None)]


def _paths(data_dir: Path, pattern: str) -> list[Path]:
    if not glob.has_magic(pattern):
        return [data_file(data_dir, pattern)]
    matches = glob.glob(str(Path(data_dir) / pattern), recursive=True)
    paths = sorted(p for p in map(Path, matches) if p.is_file())
    if not paths:
        raise DataError(f"{pattern}: no file matches it in {data_dir}")
    return paths


def table_label(pattern: str, files: list[SourceFile]) -> str:
    """How messages name a table: its file's name, or the glob when it has several files."""
    return files[0].name if len(files) == 1 else pattern
