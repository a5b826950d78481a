"""Exports as downloaded: a zip holding the shop's files, read through the spec without unzipping.

The raw export in a zip (as a public repository hands out the UCI workbook, with a macOS leftover
beside it), named by the archive alone, by a member, or by a glob over members, loads exactly as the
plain file does; a training run's source signature names the member and is the same on every read;
every mistake is one line naming the archive.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest
from raw_export import export_table, shipped_spec, write_zipped_workbook

from training.data.common import DataError
from training.data.files import resolve_files
from training.data.load import load_tables
from training.data.slice import slice_dataset
from training.data.spec_file import SPEC_FILE, find_spec
from training.fit.dataset import source_signature


def write_csv(table: pa.Table, path: Path) -> Path:
    pa_csv.write_csv(table, path, pa_csv.WriteOptions(quoting_style="needed"))
    return path


def write_spec(directory: Path, file: str) -> None:
    (directory / SPEC_FILE).write_text(shipped_spec(file))


def assert_same_lines(expected: Path, loaded: Path) -> None:
    a, b = load_tables(expected, progress=False), load_tables(loaded, progress=False)
    for name in ("customer", "article", "day", "price"):
        np.testing.assert_array_equal(getattr(a.transactions, name), getattr(b.transactions, name))
    np.testing.assert_array_equal(a.customers.ids, b.customers.ids)
    np.testing.assert_array_equal(a.articles.ids, b.articles.ids)


@pytest.fixture(scope="module")
def export(tiny_csv_dir: Path) -> pa.Table:
    return export_table(tiny_csv_dir)


@pytest.fixture
def plain(export: pa.Table, tmp_path: Path) -> Path:
    (tmp_path / "plain").mkdir()
    write_csv(export, tmp_path / "plain" / "export.csv")
    write_spec(tmp_path / "plain", "export.csv")
    return tmp_path / "plain"


def test_a_zipped_export_reads_as_the_plain_file(export: pa.Table, plain: Path, tmp_path: Path) -> None:
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    with zipfile.ZipFile(zipped / "online_retail_II.zip", "w", zipfile.ZIP_DEFLATED) as book:
        book.write(plain / "export.csv", "online_retail_II/export.csv")
        book.writestr("__MACOSX/online_retail_II/._export.csv", b"\x00\x05\x16\x07")
        book.writestr("online_retail_II/README.md", "not a table")
    for name in ("online_retail_II.zip", "online_retail_II.zip/export.csv",
                 "online_retail_II.zip/online_retail_II/*.csv"):
        write_spec(zipped, name)
        assert_same_lines(plain, zipped)
    signature = source_signature(zipped, find_spec(zipped))
    assert signature == source_signature(zipped, find_spec(zipped))  # extracted once, same bytes
    member = signature["online_retail_II.zip/online_retail_II/*.csv"]
    assert member["bytes"] == (plain / "export.csv").stat().st_size


def test_members_of_a_zip_are_parts_of_one_table(export: pa.Table, plain: Path, tmp_path: Path) -> None:
    half = export.num_rows // 2
    with zipfile.ZipFile(tmp_path / "dump.zip", "w") as book:
        for k, part in enumerate((export.slice(0, half), export.slice(half))):
            book.write(write_csv(part, tmp_path / f"part{k}.csv"), f"lines/{k}.csv")
    write_spec(tmp_path, "dump.zip/lines/*.csv")
    assert_same_lines(plain, tmp_path)
    files = resolve_files(tmp_path, "dump.zip")
    assert [f.member for f in files] == ["lines/0.csv", "lines/1.csv"]
    assert [f.relative_to(tmp_path) for f in files] == ["dump.zip/lines/0.csv", "dump.zip/lines/1.csv"]
    signature = source_signature(tmp_path, find_spec(tmp_path))
    assert set(signature) == {"dump.zip/lines/0.csv", "dump.zip/lines/1.csv", "spec"}


def test_zip_mistakes_are_one_line_naming_the_archive(export: pa.Table, tmp_path: Path) -> None:
    (tmp_path / "broken.zip").write_bytes(b"PK not really")
    with pytest.raises(DataError, match=r"^broken\.zip: not a readable zip archive"):
        resolve_files(tmp_path, "broken.zip")
    with zipfile.ZipFile(tmp_path / "notes.zip", "w") as book:
        book.writestr("README.md", "no tables here")
        book.writestr("orders.json", "{}")
    with pytest.raises(DataError, match=re.escape("notes.zip: no member is a table file "
                                                  "(members: README.md, orders.json)")):
        resolve_files(tmp_path, "notes.zip")
    with pytest.raises(DataError, match=re.escape("notes.zip: no member matches 'lines.csv'")):
        resolve_files(tmp_path, "notes.zip/lines.csv")
    with pytest.raises(DataError, match=r"^orders\.json: unknown file type \(.*in a \.zip\)"):
        resolve_files(tmp_path, "notes.zip/orders.json")
    with pytest.raises(DataError, match=r"missing\.zip: file not found"):
        resolve_files(tmp_path, "missing.zip")


def test_a_member_named_outside_stays_inside(export: pa.Table, tmp_path: Path) -> None:
    """A member whose name climbs out of the archive (``../``) is extracted under its base name into
    the private directory, never beside the data."""
    with zipfile.ZipFile(tmp_path / "evil.zip", "w") as book:
        book.writestr("../../escaped.csv", "a,b\n1,2\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "evil.zip").write_bytes((tmp_path / "evil.zip").read_bytes())
    (file,) = resolve_files(data, "evil.zip")
    assert file.path.name == "escaped.csv" and file.columns() == ["a", "b"]
    assert not (tmp_path / "escaped.csv").exists() and not (tmp_path.parent / "escaped.csv").exists()


def test_a_slice_refuses_an_archive(export: pa.Table, tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "dump.zip", "w") as book:
        book.write(write_csv(export, tmp_path / "export.csv"), "export.csv")
    write_spec(tmp_path, "dump.zip")
    with pytest.raises(DataError, match=re.escape("dump.zip: a slice writes each file in its own format, and "
                                                  "zip archives are read, not written: unzip it")):
        slice_dataset(tmp_path, tmp_path / "slice", customers=2, weeks=1)


def test_a_workbook_in_a_zip_reads_its_sheet(export: pa.Table, plain: Path, tmp_path: Path) -> None:
    """The UCI download's shape: a zip holding one workbook, the year a sheet of it."""
    write_zipped_workbook(tmp_path / "online_retail_II.zip", "online_retail_II.xlsx",
                          {"Year 2009-2010": None, "Year 2010-2011": export})
    (tmp_path / SPEC_FILE).write_text(shipped_spec("online_retail_II.zip", 'sheet = "Year 2010-2011"\n'))
    assert_same_lines(plain, tmp_path)
