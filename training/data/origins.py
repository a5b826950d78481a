"""Where the rows of a table read from several files came from, for messages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.data.files import CSV, SourceFile, table_label


@dataclass(frozen=True)
class RowOrigins:
    """Where the rows of a table read from several files came from, for messages.

    Args:
        label: the table's files as one name (the file's name, or the spec's glob).
        files: the files, in reading order.
        starts: ``(len(files),)`` the first table row of each file.
    """

    label: str
    files: tuple[SourceFile, ...]
    starts: tuple[int, ...]

    @classmethod
    def of(cls, pattern: str, files: list[SourceFile], rows: list[int]) -> RowOrigins:
        """Origins of ``files`` read in order with ``rows`` rows each."""
        starts = tuple(int(s) for s in np.cumsum([0, *rows[:-1]]))
        return cls(table_label(pattern, files), tuple(files), starts)

    def locate(self, row: int) -> tuple[SourceFile, int]:
        """The file of table row ``row`` and the row's 0-based position in it."""
        k = int(np.searchsorted(self.starts, row, side="right")) - 1
        return self.files[k], int(row) - self.starts[k]

    def where(self, row: int) -> str:
        """``customers.csv: line 3`` for table row ``row``."""
        file, local = self.locate(row)
        return f"{file.name}: {file.where(local)}"

    def both(self, first: int, second: int) -> str:
        """Two rows as ``lines 3 and 5`` (one file) or ``a.csv line 3 and b.csv line 5``."""
        (fa, ra), (fb, rb) = self.locate(first), self.locate(second)
        if fa == fb:
            plural = "lines" if fa.format == CSV else "rows"
            return f"{plural} {fa.where(ra).split()[1]} and {fb.where(rb).split()[1]}"
        return f"{fa.name} {fa.where(ra)} and {fb.name} {fb.where(rb)}"
