"""The synthetic data generator: Kaggle file layout, value formats, determinism and CLI errors."""

from __future__ import annotations

import csv
import datetime as dt
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pc
import pytest

from models.schema import (
    ARTICLE_COLUMNS,
    ARTICLES_CSV,
    CUSTOMER_COLUMNS,
    CUSTOMERS_CSV,
    TRANSACTION_COLUMNS,
    TRANSACTIONS_CSV,
)
from training.synth.cli import SynthConfig, generate, main
from training.synth.csv_format import encode_rows

HEX64 = re.compile(r"^[0-9a-f]{64}$")
FILES = {
    CUSTOMERS_CSV: CUSTOMER_COLUMNS,
    ARTICLES_CSV: ARTICLE_COLUMNS,
    TRANSACTIONS_CSV: TRANSACTION_COLUMNS,
}


def read_text(path: Path) -> dict[str, np.ndarray]:
    """Every column as raw text (empty fields stay ``""``): what a loader keeping ids as text sees."""
    names = pc.read_csv(path, read_options=pc.ReadOptions(skip_rows_after_names=10**9)).column_names
    table = pc.read_csv(
        path, convert_options=pc.ConvertOptions(column_types=dict.fromkeys(names, pa.string()))
    )
    return {name: table[name].to_numpy(zero_copy_only=False).astype(str) for name in names}


@pytest.fixture(scope="module")
def small(small_csv_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    return {name: read_text(small_csv_dir / name) for name in FILES}


@pytest.mark.parametrize("name", list(FILES))
def test_exact_headers(tiny_csv_dir: Path, name: str):
    with open(tiny_csv_dir / name, encoding="utf-8") as f:
        assert f.readline() == ",".join(FILES[name]) + "\n"


def test_every_row_has_every_field_even_with_commas_in_text(tiny_csv_dir: Path):
    for name, columns in FILES.items():
        with open(tiny_csv_dir / name, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        assert {len(r) for r in rows} == {len(columns)}, name
    with open(tiny_csv_dir / ARTICLES_CSV, newline="", encoding="utf-8") as f:
        descs = [r[-1] for r in list(csv.reader(f))[1:]]
    assert any("," in d for d in descs)


def test_id_formats(small: dict[str, dict[str, np.ndarray]]):
    customers, articles = small[CUSTOMERS_CSV], small[ARTICLES_CSV]
    for column in (customers["customer_id"], customers["postal_code"]):
        assert all(HEX64.match(v) for v in column)
    assert len(np.unique(customers["customer_id"])) == len(customers["customer_id"])
    assert len(np.unique(customers["postal_code"])) < len(customers["postal_code"])  # shared, as in real data
    ids = articles["article_id"]
    assert all(re.fullmatch(r"0\d{9}", v) for v in ids)
    assert [int(v[:7]) for v in ids] == [int(p) for p in articles["product_code"]]
    assert len(np.unique(ids)) == len(ids)
    assert (np.sort(ids) == ids).all() and (
        np.sort(customers["customer_id"]) == customers["customer_id"]
    ).all()


def test_optional_customer_fields_use_the_real_vocabularies(small: dict[str, dict[str, np.ndarray]]):
    c = small[CUSTOMERS_CSV]
    assert set(c["FN"]) == {"", "1.0"}
    assert set(c["Active"]) == {"", "1.0"}
    assert set(c["club_member_status"]) == {"", "ACTIVE", "PRE-CREATE", "LEFT CLUB"}
    assert set(c["fashion_news_frequency"]) == {"", "NONE", "Regularly", "Monthly"}
    ages = c["age"]
    assert (ages == "").any()
    present = ages[ages != ""].astype(int)
    assert present.min() >= 16 and present.max() <= 99


def test_article_codes_map_to_one_name_each(small: dict[str, dict[str, np.ndarray]]):
    a = small[ARTICLES_CSV]
    pairs = [
        ("product_type_no", "product_type_name"),
        ("graphical_appearance_no", "graphical_appearance_name"),
        ("colour_group_code", "colour_group_name"),
        ("perceived_colour_value_id", "perceived_colour_value_name"),
        ("perceived_colour_master_id", "perceived_colour_master_name"),
        ("department_no", "department_name"),
        ("index_code", "index_name"),
        ("index_group_no", "index_group_name"),
        ("section_no", "section_name"),
        ("garment_group_no", "garment_group_name"),
        ("product_type_no", "product_group_name"),
        ("index_code", "index_group_no"),
        ("department_no", "section_no"),
    ]
    for code, name in pairs:
        assert len(set(zip(a[code], a[name], strict=True))) == len(set(a[code])), (code, name)
    assert len(set(a["department_no"])) > 20 and len(set(a["colour_group_code"])) > 15


def test_transactions_dates_prices_channels_and_order(small, small_synth_config: SynthConfig):
    t, c, a = small[TRANSACTIONS_CSV], small[CUSTOMERS_CSV], small[ARTICLES_CSV]
    dates = np.array(t["t_dat"], dtype="datetime64[D]")
    end = np.datetime64(small_synth_config.end_date)
    assert dates.max() == end and dates.min() > end - np.timedelta64(small_synth_config.days, "D")
    order = np.lexsort((t["customer_id"], dates))
    assert (order == np.arange(len(order))).all()  # sorted by date, then customer, like the real file
    assert all(re.fullmatch(r"0\.\d{16}", p) for p in t["price"][:1000])
    price = t["price"].astype(float)
    assert price.min() > 0 and price.max() <= 0.6 and 0.005 < np.median(price) < 0.1
    assert set(t["sales_channel_id"]) == {"1", "2"}
    assert np.isin(t["customer_id"], c["customer_id"]).all()
    assert np.isin(t["article_id"], a["article_id"]).all()


def test_same_seed_same_bytes_other_seed_other_data(tmp_path: Path):
    config = SynthConfig(customers=200, articles=80, days=40, seed=3)
    runs = [
        generate(config, tmp_path / "a"),
        generate(config, tmp_path / "b"),
        generate(SynthConfig(customers=200, articles=80, days=40, seed=4), tmp_path / "c"),
    ]
    for name in FILES:
        first, again, other = ((tmp_path / d / name).read_bytes() for d in "abc")
        assert first == again
        assert first != other
    assert runs[0].transactions == runs[1].transactions > 0


def _rebought_share(customer: np.ndarray, article: np.ndarray, day: np.ndarray) -> float:
    """Share of (customer, article) pairs bought again on a later day."""
    pairs = np.unique(np.char.add(customer, article), return_inverse=True)[1]
    first, last = np.full(pairs.max() + 1, 10**9), np.full(pairs.max() + 1, -1)
    np.minimum.at(first, pairs, day)
    np.maximum.at(last, pairs, day)
    return float((last > first).mean())


def test_customers_rebuy_their_own_articles(small: dict[str, dict[str, np.ndarray]]):
    t = small[TRANSACTIONS_CSV]
    day = np.array(t["t_dat"], dtype="datetime64[D]").astype(np.int64)
    rebought = _rebought_share(t["customer_id"], t["article_id"], day)
    # Shuffling articles among the buyers of each day keeps popularity and removes personal habit.
    rng = np.random.default_rng(0)
    shuffled = t["article_id"][np.lexsort((rng.random(len(day)), day))]
    assert rebought > 1.5 * _rebought_share(t["customer_id"], shuffled, day)
    assert rebought > 0.21  # taste alone gives about 0.19 here; repeat purchases lift it to about 0.25


def test_customers_keep_to_a_department_mix(small: dict[str, dict[str, np.ndarray]]):
    t, a = small[TRANSACTIONS_CSV], small[ARTICLES_CSV]
    dept = dict(zip(a["article_id"], a["department_no"], strict=True))
    bought = np.array([dept[x] for x in t["article_id"]])

    def top_share(d: np.ndarray) -> float:
        """Share of purchases falling in each customer's most bought department."""
        keys, counts = np.unique(np.char.add(np.char.add(t["customer_id"], ":"), d), return_counts=True)
        best: dict[str, int] = {}
        for key, n in zip(keys, counts, strict=True):
            customer = key.split(":")[0]
            best[customer] = max(best.get(customer, 0), int(n))
        return sum(best.values()) / len(d)

    assert top_share(bought) > top_share(np.random.default_rng(0).permutation(bought)) + 0.05


def test_activity_differs_by_segment(small: dict[str, dict[str, np.ndarray]]):
    t, c = small[TRANSACTIONS_CSV], small[CUSTOMERS_CSV]
    ids, per_customer = np.unique(t["customer_id"], return_counts=True)
    counts = dict(zip(ids, per_customer, strict=True))
    n = np.array([counts.get(x, 0) for x in c["customer_id"]])
    members = c["fashion_news_frequency"] == "Regularly"
    assert n[members].mean() > 1.15 * n[~members].mean()
    assert (
        n[c["club_member_status"] == "ACTIVE"].mean()
        > 1.3 * n[c["club_member_status"] == "PRE-CREATE"].mean()
    )


def test_articles_have_a_sales_lifecycle(small: dict[str, dict[str, np.ndarray]]):
    t = small[TRANSACTIONS_CSV]
    dates = np.array(t["t_dat"], dtype="datetime64[D]").astype(np.int64)
    ids, inverse, counts = np.unique(t["article_id"], return_inverse=True, return_counts=True)
    spread = np.zeros(len(ids))
    np.add.at(spread, inverse, (dates - np.bincount(inverse, dates)[inverse] / counts[inverse]) ** 2)
    busy = counts >= 30
    # sales of a busy article bunch around its peak instead of spreading over all 200 days
    assert np.median(np.sqrt(spread[busy] / counts[busy])) < 200 / np.sqrt(12) / 2


def test_encode_rows_drops_padding_and_keeps_empty_fields():
    cols = [np.array([b"a", b"bbb", b""]), np.array([b"", b"1.0", b"x"])]
    assert bytes(encode_rows(cols)) == b"a,\nbbb,1.0\n,x\n"
    full = [np.array([b"ab", b"cd"]), np.array([b"1", b"2"])]
    assert bytes(encode_rows(full)) == b"ab,1\ncd,2\n"


@pytest.mark.parametrize(
    "args",
    [
        ["--customers", "-5"],
        ["--articles", "0"],
        ["--days", "x"],
        ["--end-date", "2020-13-01"],
        ["--seed", "-1"],
    ],
)
def test_cli_bad_arguments_give_one_line_and_exit_2(tmp_path: Path, capsys, args: list[str]):
    with pytest.raises(SystemExit) as exit_info:
        main(["--out", str(tmp_path), *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err and "Traceback" not in err


def test_cli_unwritable_out_is_a_clean_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out in (blocker, blocker / "sub"):
        proc = subprocess.run(
            [sys.executable, "-m", "training.synth", "--out", str(out), "--customers", "5"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parents[2],
            check=False,
        )
        assert proc.returncode == 2
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and "--out" in proc.stderr


def test_cli_writes_the_files(tmp_path: Path, capsys):
    out = tmp_path / "new" / "dir"
    assert main(["--out", str(out), "--customers", "50", "--articles", "30", "--days", "20", "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    assert "transactions" in capsys.readouterr().out


def test_config_rejects_bad_sizes():
    with pytest.raises(ValueError, match="customers"):
        SynthConfig(customers=0)
    assert (
        SynthConfig(end_date=dt.date(2020, 1, 31), days=31).first_day
        == SynthConfig(end_date=dt.date(2020, 1, 1), days=1).first_day
    )
