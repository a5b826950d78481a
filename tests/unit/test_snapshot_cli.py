"""``python -m training.snapshot``: a snapshot of the files alone, cut at a day, with the encodings new
nodes need; rebuilt beside a snapshot a process still maps."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from raw_export import write_export

from models.schema import ARTICLE, CUSTOMER, day_number
from models.store.live_nodes import NodeEncoder
from models.store.snapshot import GraphSnapshot
from training.data.load import load_tables
from training.snapshot import main


@pytest.fixture(scope="module")
def built(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("artifacts")
    assert main(["--data", str(tiny_csv_dir), "--out", str(out), "--quiet"]) == 0
    return out


def test_until_cuts_the_transactions_and_keeps_every_node(built: Path, tiny_csv_dir: Path) -> None:
    full = GraphSnapshot.open(built / "snapshot")
    old_day = np.array(full.adjacency[(CUSTOMER, ARTICLE)].day.numpy())
    assert main(["--data", str(tiny_csv_dir), "--out", str(built), "--until", "2020-09-15", "--quiet"]) == 0
    cut = GraphSnapshot.open(built / "snapshot")
    assert cut.max_day == day_number("2020-09-15") and cut.num_nodes == full.num_nodes
    assert cut.num_transactions == int((old_day <= cut.max_day).sum())
    still_mapped = np.asarray(full.adjacency[(CUSTOMER, ARTICLE)].day)
    assert np.array_equal(still_mapped, old_day)  # the old files, replaced beside a reader, are intact
    assert json.loads((built / "snapshot" / "source.json").read_text())["until"] == "2020-09-15"


def test_a_bad_until_is_one_line(tiny_csv_dir: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--data", str(tiny_csv_dir), "--out", str(tmp_path), "--until", "15/09/2020"])
    assert exit_info.value.code == 2 and "is not a date YYYY-MM-DD" in capsys.readouterr().err


@pytest.mark.parametrize(("node_type", "file"), [(CUSTOMER, "customers.csv"), (ARTICLE, "articles.csv")])
def test_new_nodes_encode_as_the_loader_encoded_the_files(built: Path, tiny_csv_dir: Path, node_type: str,
                                                          file: str) -> None:
    snapshot = GraphSnapshot.open(built / "snapshot")
    encoder = NodeEncoder.of(snapshot.directory, node_type, snapshot.categorical_names[node_type],
                             snapshot.numeric_names[node_type])
    assert len(encoder.vocabularies) == len(snapshot.categorical_names[node_type])
    with open(tiny_csv_dir / file, newline="") as f:
        rows = list(csv.DictReader(f))
    index = snapshot.lookup(node_type, [r[f"{node_type}_id"] for r in rows])
    for row, i in zip(rows, index, strict=True):
        values = {k: (v if v != "" else None) for k, v in row.items()}
        codes, numeric = encoder.encode(values)
        assert codes.tolist() == snapshot.categorical[node_type][i].tolist()
        torch.testing.assert_close(torch.from_numpy(numeric), snapshot.numeric[node_type][i], atol=1e-5,
                                   rtol=0)


@pytest.mark.parametrize("through", ["relserve.toml", "--spec"])
def test_until_on_a_raw_shop_export_read_through_its_spec(tiny_csv_dir: Path, tmp_path: Path,
                                                          through: str) -> None:
    """A flat export (ids with letters, cancellations, guest lines) cut at a day: its own ids, every
    node of the cleaned lines kept, only the lines of that day and before."""
    data = write_export(tiny_csv_dir, tmp_path / "data")
    args = ["--data", str(data), "--out", str(tmp_path / "art"), "--until", "2020-09-15", "--quiet"]
    if through == "--spec":
        (data / "relserve.toml").rename(tmp_path / "retail.toml")
        args += ["--spec", str(tmp_path / "retail.toml")]
    assert main(args) == 0
    tables = load_tables(data, progress=False, spec=tmp_path / "retail.toml" if through == "--spec" else None)
    cut = GraphSnapshot.open(tmp_path / "art" / "snapshot")
    assert cut.max_day == day_number("2020-09-15")
    assert cut.num_transactions == int((tables.transactions.day <= cut.max_day).sum())
    assert np.array_equal(cut.ids[ARTICLE], tables.articles.ids)  # 85123A-style codes, every one kept
    assert np.array_equal(cut.ids[CUSTOMER], tables.customers.ids)
    assert cut.lookup(CUSTOMER, ["12346"]).tolist() == [0]
