"""Row validation and body parsing: each bad input is refused naming its row and field, good rows
become the batch's columns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from models.schema import ARTICLE, CUSTOMER, day_number
from serve.ingest.bodies import parse_body
from serve.ingest.problems import BatchRejected
from serve.ingest.validation import NodeColumns, Validator

LATEST = day_number("2020-09-22")
TODAY = day_number("2020-09-30")
KNOWN = {CUSTOMER: {"c1", "c2"}, ARTICLE: {"0001", "0002"}}


class Facts:
    """A stand-in for the graph: two customers, two articles, latest day 2020-09-22."""

    latest_day = LATEST

    def known(self, node_type: str, ids: list[str]) -> list[bool]:
        return [i in KNOWN[node_type] for i in ids]


COLUMNS = {CUSTOMER: NodeColumns.of(CUSTOMER, ("FN", "club_member_status"), ("age", "age_missing")),
           ARTICLE: NodeColumns.of(ARTICLE, ("colour_group_code",), ())}
VALIDATOR = Validator(COLUMNS, lateness_days=3, today=lambda: TODAY)


def tx(**changes: Any) -> dict[str, Any]:
    row = {"t_dat": "2020-09-23", "customer_id": "c1", "article_id": "0001", "price": 0.03,
           "sales_channel_id": 2}
    row.update(changes)
    return {k: v for k, v in row.items() if v is not ...}


def refused(kind: str, rows: list[Any], text: bool = False) -> BatchRejected:
    with pytest.raises(BatchRejected) as caught:
        VALIDATOR.validate(kind, rows, Facts(), text)
    return caught.value


def test_good_transactions_become_columns() -> None:
    columns = VALIDATOR.validate("transactions", [tx(), tx(t_dat="2020-09-19T23:59:00", customer_id="c2",
                                                           price=0, sales_channel_id=1)], Facts())
    assert columns == {"day": [LATEST + 1, LATEST - 3], "customer_id": ["c1", "c2"],
                       "article_id": ["0001", "0001"], "price": [0.03, 0.0], "sales_channel_id": [2, 1]}


@pytest.mark.parametrize(("row", "where", "says", "reason"), [
    (tx(t_dat=...), "rows[1].t_dat", "field required", "invalid"),
    (tx(extra=1), "rows[1].extra", "unexpected field", "invalid"),
    (tx(t_dat="23/09/2020"), "rows[1].t_dat", "must be a date YYYY-MM-DD", "invalid"),
    (tx(t_dat="2020-02-30"), "rows[1].t_dat", "not a calendar date", "invalid"),
    (tx(t_dat=20200923), "rows[1].t_dat", "must be a date", "invalid"),
    (tx(t_dat="2020-09-18"), "rows[1].t_dat", "too late", "late"),
    (tx(t_dat="2020-10-02"), "rows[1].t_dat", "in the future", "future"),
    (tx(customer_id="nobody"), "rows[1].customer_id", "unknown customer 'nobody'", "unknown_id"),
    (tx(article_id="0009"), "rows[1].article_id", "POST /ingest/articles", "unknown_id"),
    (tx(customer_id=""), "rows[1].customer_id", "must be 1 to 128 bytes", "invalid"),
    (tx(customer_id="x" * 129), "rows[1].customer_id", "got 129", "invalid"),
    (tx(customer_id="a\nb"), "rows[1].customer_id", "control characters", "invalid"),
    (tx(customer_id="\ud800"), "rows[1].customer_id", "valid Unicode", "invalid"),
    (tx(customer_id=["c1"]), "rows[1].customer_id", "must be a string", "invalid"),
    (tx(price=-1), "rows[1].price", "must be >= 0", "invalid"),
    (tx(price="0.1"), "rows[1].price", "must be a number", "invalid"),
    (tx(price=True), "rows[1].price", "must be a number", "invalid"),
    (tx(price=float("inf")), "rows[1].price", "must be finite", "invalid"),
    (tx(sales_channel_id=1.5), "rows[1].sales_channel_id", "must be an integer", "invalid"),
    (tx(sales_channel_id=-1), "rows[1].sales_channel_id", "must be in 0..", "invalid"),
])
def test_each_bad_transaction_is_named_by_row_and_field(row: dict, where: str, says: str,
                                                        reason: str) -> None:
    error = refused("transactions", [tx(), row])
    assert str(error.problems[0]).startswith(f"{where}: ") and says in str(error.problems[0])
    assert error.reason == reason and error.status == 422
    assert error.body()["problems"][0]["row"] == 1


def test_whole_numbers_written_with_a_point_are_integers_as_json_schema_says() -> None:
    columns = VALIDATOR.validate("transactions", [tx(sales_channel_id=2.0)], Facts())
    assert columns["sales_channel_id"] == [2] and type(columns["sales_channel_id"][0]) is int
    assert "sales_channel_id" in refused("transactions", [tx(sales_channel_id=2.5)]).detail


def test_every_problem_is_listed_and_detail_names_the_first_five() -> None:
    error = refused("transactions", [tx(price=-i - 1) for i in range(8)] + ["not an object"])
    assert error.problems[0].message == "must be an object, got str"
    error = refused("transactions", [tx(price=-i - 1) for i in range(8)])
    assert len(error.problems) == 8 and error.detail.endswith("; and 3 more")
    assert error.detail.startswith("rows[0].price: must be >= 0, got -1; rows[1].price")


def test_an_empty_batch_is_refused() -> None:
    assert str(refused("transactions", []).problems[0]) == "rows: must hold at least one row"


def test_text_values_parse_as_numbers_only_when_they_came_as_text() -> None:
    row = tx(price="0.5", sales_channel_id="1")
    assert VALIDATOR.validate("transactions", [row], Facts(), text=True)["price"] == [0.5]
    assert "sales_channel_id" in refused("transactions", [tx(sales_channel_id="1")]).detail


def test_new_customers_keep_raw_features_and_missing_columns_are_none() -> None:
    columns = VALIDATOR.validate("customers", [
        {"customer_id": "new1", "FN": 1.0, "age": 31, "postal_code": "dropped"},
        {"customer_id": "new2", "club_member_status": "ACTIVE", "age": "", "FN": None}], Facts())
    assert columns == {"customer_id": ["new1", "new2"], "FN": [1.0, None],
                       "club_member_status": [None, "ACTIVE"], "age": [31.0, None]}


@pytest.mark.parametrize(("kind", "row", "where", "says", "reason"), [
    ("customers", {"customer_id": "c2"}, "rows[1].customer_id", "customer 'c2' already exists", "exists"),
    ("customers", {"customer_id": "n1"}, "rows[1].customer_id", "also in rows[0]", "exists"),
    ("customers", {"FN": 1}, "rows[1].customer_id", "field required", "invalid"),
    ("customers", {"customer_id": "n2", "age": "old"}, "rows[1].age", "must be a number", "invalid"),
    ("customers", {"customer_id": "n2", "FN": [1]}, "rows[1].FN", "text or a number", "invalid"),
    ("customers", {"customer_id": "n2", "fav": "x"}, "rows[1].fav", "unexpected field", "invalid"),
    ("articles", {"article_id": "0002"}, "rows[1].article_id", "already exists", "exists"),
    ("articles", {"article_id": "0003", "age": 3}, "rows[1].age", "unexpected field", "invalid"),
])
def test_each_bad_node_row_is_named(kind: str, row: dict, where: str, says: str, reason: str) -> None:
    first = {"customer_id": "n1"} if kind == "customers" else {"article_id": "0003"}
    error = refused(kind, [first, row])
    assert str(error.problems[0]).startswith(f"{where}: ") and says in error.detail
    assert error.reason == reason


@pytest.mark.parametrize(("body", "content_type", "status", "says"), [
    (b'{"rows": []}', "text/plain", 415, "must be application/json, application/x-ndjson or text/csv"),
    (b'{"rows": []}', None, 415, "got none"),
    (b'{"rows": [', "application/json", 422, "body: body is not valid JSON"),
    (b"\xff", "application/json", 422, "not UTF-8"),
    (b"[1, 2]", "application/json", 422, "must be a JSON object"),
    (b'{"rows": {}}', "application/json", 422, "rows: must be a list of objects"),
    (b'{}', "application/json", 422, "rows: field required"),
    (b'{"rows": [], "x": 1}', "application/json", 422, "x: unexpected field"),
    (b'{"rows": [], "batch_id": 5}', "application/json", 422, "batch_id: must be a string"),
    (b'{"a": 1}\n{"b": 2', "application/x-ndjson", 422, "line 2 is not valid JSON"),
    (b"", "text/csv", 422, "CSV has no header line"),
    (b"a,a\n1,2\n", "text/csv", 422, "names a column twice"),
    (b"a,b\n1,2\n3\n", "text/csv", 422, "rows[1]: 1 values for 2 columns"),
])
def test_bad_bodies_are_refused(body: bytes, content_type: str | None, status: int, says: str) -> None:
    with pytest.raises(BatchRejected) as caught:
        parse_body(body, content_type)
    assert caught.value.status == status and says in caught.value.detail, caught.value.detail


def test_json_ndjson_and_csv_bodies_give_the_same_rows() -> None:
    rows = [tx(), tx(customer_id="c2")]
    as_json = parse_body(json.dumps({"rows": rows, "batch_id": "b1"}).encode(),
                         "application/json; charset=utf-8")
    as_ndjson = parse_body("\n".join(json.dumps(r) for r in rows).encode() + b"\n\n", "application/x-ndjson")
    csv = "t_dat,customer_id,article_id,price,sales_channel_id\n" + "".join(
        f"{r['t_dat']},{r['customer_id']},{r['article_id']},{r['price']},{r['sales_channel_id']}\r\n"
        for r in rows)
    as_csv = parse_body(csv.encode(), "text/csv")
    assert as_json.rows == as_ndjson.rows == rows and as_json.batch_id == "b1" and not as_json.text
    assert as_csv.text and VALIDATOR.validate("transactions", as_csv.rows, Facts(), text=True) == \
        VALIDATOR.validate("transactions", rows, Facts())
