"""The dataset spec file: every validation error is one line naming the key; the shipped specs parse."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from training.data.conditions import ConditionError, parse_condition
from training.data.spec import HM_SPEC, NUMERIC, TEXT, Feature
from training.data.spec_file import SpecError, find_spec, read_spec

REPO = Path(__file__).resolve().parents[2]
MINIMAL = '[transactions]\nfile = "orders.csv"\ncustomer = "customer"\narticle = "sku"\ntime = "day"\n'


def spec_error(tmp_path: Path, text: str) -> str:
    (tmp_path / "relserve.toml").write_text(text)
    with pytest.raises(SpecError) as err:
        read_spec(tmp_path / "relserve.toml")
    message = str(err.value)
    assert "\n" not in message
    return message


M, TX = MINIMAL, "[transactions] "
ARTICLES_FILE = "[articles]\nfile = 'a.csv'\nid = 'sku'\n"
CUSTOMERS_FILE = "[customers]\nfile = 'c.csv'\nid = 'c'\n"
ERRORS = {  # case: (spec text, the start of its message after "relserve.toml: ")
    "unknown-key": (M.replace("customer =", "custmer ="),
                    TX + "unknown key 'custmer' (did you mean 'customer'?)"),
    "missing-role": (M.replace('time = "day"\n', ""), TX + "missing required key 'time'"),
    "missing-table": (CUSTOMERS_FILE, "missing required table [transactions]"),
    "unknown-table": (M + "[custmers]\n", "unknown table [custmers] (did you mean [customers]?)"),
    "wrong-type": (M.replace('"customer"', "42"), TX + "customer: must be a non-empty string, got 42"),
    "price-and-amount": (M + 'price = "p"\namount = "a"\n',
                         TX + "give price (unit price) or amount (line total), not both"),
    "quantity-alone": (M + 'quantity = "q"\n', TX + "quantity needs price"),
    "bad-time-format": (M + 'time_format = "YYYY-MM-DD"\n', TX + "time_format: must be a strptime"),
    "filter-not-a-list": (M + 'filter = "Quantity > 0"\n', TX + "filter: must be a list of conditions"),
    "bad-filter": (M + 'filter = ["Quantity > 0", "Quantity >> 0"]\n',
                   TX + "filter[1]: cannot parse 'Quantity >> 0': expected '<column> <op> <value>'"),
    "text-comparison": (M + 'filter = ["Country > UK"]\n',
                        TX + "filter[0]: cannot parse 'Country > UK': > compares numbers, got UK"),
    "bad-regex": (M + 'filter = ["Invoice ~ ^(C"]\n',
                  TX + "filter[0]: cannot parse 'Invoice ~ ^(C': bad regular expression"),
    "lookaround-regex": (M + 'filter = ["Invoice ~ ^(?!C)"]\n',  # Python's re takes it, pyarrow's RE2 not
                         TX + "filter[0]: cannot parse 'Invoice ~ ^(?!C)': bad regular expression (invalid "
                              "perl operator: (?!; RE2 syntax: no backreferences or lookaround)"),
    "bad-feature-type": (M + ARTICLES_FILE + "features = { colour = 'colour' }\n",
                         "[articles] features.colour: type must be one of categorical, numeric, timestamp, "
                         "text (or auto), got 'colour'"),
    "file-without-id": (M + "[articles]\nfile = 'a.csv'\n", "[articles] missing required key 'id'"),
    "id-without-file": (M + "[articles]\nid = 'sku'\n",
                        "[articles] missing required key 'file' (or from = "),
    "bad-from": (M + "[articles]\nfrom = 'orders'\n",
                 "[articles] from: must be \"transactions\", got 'orders'"),
    "derived-with-id": (M + "[articles]\nfrom = 'transactions'\nid = 'sku'\n",
                        "[articles] id: a derived table's id is the transactions' column 'sku'"),
    "long-ids": (M + ARTICLES_FILE + "max_id_bytes = 500\n",
                 "[articles] max_id_bytes: must be an integer 1..128, got 500"),
    "repeated-feature": (M + CUSTOMERS_FILE + "features = ['age', 'age']\n",
                         "[customers] features: 'age' is listed twice"),
    "id-as-feature": (M + CUSTOMERS_FILE + "features = ['c']\n",
                      "[customers] features.c: the id column is not a feature"),
    "bad-toml": ("[transactions\n", "not valid TOML: "),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_each_error_is_one_line_naming_the_key(tmp_path: Path, case: str) -> None:
    text, expected = ERRORS[case]
    assert spec_error(tmp_path, text).startswith(f"relserve.toml: {expected}")


def test_a_minimal_spec_derives_both_tables_and_counts_lines(tmp_path: Path) -> None:
    (tmp_path / "relserve.toml").write_text(MINIMAL)
    spec = find_spec(tmp_path)
    assert spec.customers.derived and spec.articles.derived
    assert (spec.customers.id, spec.articles.id) == ("customer", "sku")
    assert spec.customers.features is None and not spec.transactions.has_amount
    assert spec.path == tmp_path / "relserve.toml" and spec.origin == "relserve.toml"


def test_features_as_a_list_or_a_table(tmp_path: Path) -> None:
    text = MINIMAL + CUSTOMERS_FILE + "features = ['age', 'city']\n" + ARTICLES_FILE + (
        "[articles.features]\nweight = 'numeric'\ndescription = 'text'\ncolour = 'auto'\n")
    (tmp_path / "relserve.toml").write_text(text)
    spec = read_spec(tmp_path / "relserve.toml")
    assert spec.customers.features == (Feature("age"), Feature("city"))
    assert spec.articles.features == (
        Feature("weight", NUMERIC), Feature("description", TEXT), Feature("colour"))


def test_without_a_spec_file_the_directory_is_the_hm_layout(tmp_path: Path) -> None:
    assert find_spec(tmp_path) is HM_SPEC


def test_the_shipped_hm_spec_is_the_built_in_default() -> None:
    spec = read_spec(REPO / "data" / "specs" / "hm.toml")
    assert spec.transactions == HM_SPEC.transactions
    assert (spec.customers, spec.articles) == (HM_SPEC.customers, HM_SPEC.articles)


def test_the_online_retail_ii_spec_parses() -> None:
    spec = read_spec(REPO / "data" / "real" / "online-retail-ii" / "relserve.toml")
    assert spec.customers.derived and spec.articles.derived
    assert [c.text for c in spec.transactions.filter] == [
        "Customer ID > 0", "Invoice !~ ^C", "Quantity > 0", "Price > 0"]
    assert (spec.transactions.price, spec.transactions.quantity) == ("Price", "Quantity")


@pytest.mark.parametrize(("text", "column", "op", "value"), [
    ("Quantity > 0", "Quantity", ">", 0.0),
    ("Customer ID != null", "Customer ID", "!=", None),
    ("Invoice !~ ^C", "Invoice", "!~", "^C"),
    ("Country == 'United Kingdom'", "Country", "==", "United Kingdom"),
    ("Country == United Kingdom", "Country", "==", "United Kingdom"),
    ("`Unit Price` >= 0.5", "Unit Price", ">=", 0.5),
    ("StockCode == '85123'", "StockCode", "==", "85123"),
])
def test_conditions_parse(text: str, column: str, op: str, value: object) -> None:
    condition = parse_condition(text)
    assert (condition.column, condition.op, condition.value) == (column, op, value)


@pytest.mark.parametrize("text", ["Quantity>0", "> 0", "Quantity >", "Price < null", "Code ~ (a"])
def test_bad_conditions_are_refused(text: str) -> None:
    with pytest.raises(ConditionError, match=f"^cannot parse {re.escape(repr(text))}: "):
        parse_condition(text)


def test_a_bad_spec_stops_training_fit_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(MINIMAL.replace("customer =", "custmer ="))
    result = subprocess.run([sys.executable, "-m", "training.fit", "--data", str(tmp_path), "--spec",
                             str(tmp_path / "bad.toml"), "--task", "churn", "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=REPO, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["python -m training.fit: error: bad.toml: [transactions] "
                                                  "unknown key 'custmer' (did you mean 'customer'?)"]


def test_a_missing_spec_file_is_refused_before_any_work(tmp_path: Path) -> None:
    from training.fit.run import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--data", str(tmp_path), "--spec", str(tmp_path / "nope.toml"), "--task", "churn",
              "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
