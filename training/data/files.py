"""The files of a table: found by name or glob, their format by extension (delimited text, plain or
gzip; Parquet; a spreadsheet's sheet), read with the table's :class:`training.data.spec.FileOptions`
(:mod:`training.data.sources` reads them). Positions in messages are ``line N`` in a CSV file (the
header is line 1) and ``row N`` in a Parquet file or a sheet.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from training.data.common import DataError, check_columns, data_file, line_number, read_header
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
    """

    path: Path
    format: str
    options: FileOptions = field(default_factory=FileOptions)

    @property
    def encoding(self) -> str:
        return self.options.encoding

    @property
    def sheet(self) -> str | None:
        return self.options.sheet

    @property
    def name(self) -> str:
        return self.path.name

    def where(self, row: int) -> str:
        """The position of 0-based data row ``row``: ``line N`` (CSV), ``row N`` (Parquet; a sheet's
        row as the spreadsheet numbers it, the header being row 1)."""
        if self.format == SHEET:
            return f"row {int(row) + 2}"
        return f"line {line_number(row)}" if self.format == CSV else f"row {int(row) + 1}"

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


def file_format(path: Path) -> str:
    """:data:`CSV` or :data:`PARQUET` from the name's extension; :class:`DataError` otherwise."""
    name = path.name.lower()
    for suffix, kind in _FORMATS.items():
        if name.endswith(suffix):
            return kind
    raise DataError(f"{path.name}: unknown file type (use .csv, .tsv or .txt, gzipped or not, .parquet, or a "
                    "spreadsheet: .xlsx, .xls, .ods)")


def resolve_files(data_dir: Path, pattern: str, options: FileOptions | None = None) -> list[SourceFile]:
    """The files ``pattern`` names under ``data_dir`` (or absolute): one name (``name`` or ``name.gz``)
    or a glob (``orders/*.parquet``), matches in sorted order; read as ``options`` say.

    Raises:
        DataError: nothing matches, or a match has an unknown extension.
    """
    if not glob.has_magic(pattern):
        path = data_file(data_dir, pattern)
        return [SourceFile(path, file_format(path), options or FileOptions())]
    matches = glob.glob(str(Path(data_dir) / pattern), recursive=True)
    paths = sorted(p for p in map(Path, matches) if p.is_file())
    if not paths:
        raise DataError(f"{pattern}: no file matches it in {data_dir}")
    return [SourceFile(p, file_format(p), options or FileOptions()) for p in paths]


def table_label(pattern: str, files: list[SourceFile]) -> str:
    """How messages name a table: its file's name, or the glob when it has several files."""
    return files[0].name if len(files) == 1 else pattern
