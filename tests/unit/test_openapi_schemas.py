"""The JSON schemas of the request bodies say what their validators accept, both ways.

Every body drawn from a schema (schemathesis' generator) passes the model's own validation, which
for the ingestion rows is the rule set of ``serve.ingest.values``; bodies the server refuses are
outside the schema. What JSON Schema cannot state is left out of the draws: ids are ASCII where the
byte limit matters (``maxLength`` counts characters), and an ingestion body's integral numbers are
written as integers (JSON Schema's ``integer`` admits ``5.0``, which the ingestion rules refuse; a
prediction body takes it, an id below 2**53 and ``k``, and is drawn both ways).
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from models.schema import ARTICLE, CUSTOMER, MAX_ID_BYTES
from serve.http.schemas import REQUESTS
from serve.id_fields import MAX_IDS
from serve.ingest.body_schema import body_models, openapi_body
from serve.ingest.validation import NodeColumns

COLUMNS = {CUSTOMER: NodeColumns.of(CUSTOMER, ("FN", "club_member_status"), ("age", "age_missing")),
           ARTICLE: NodeColumns.of(ARTICLE, ("copy", "colour name"), ("price", "price_missing"))}
INGEST = body_models(COLUMNS, max_rows=50)
FEW = settings(max_examples=25, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))


def ingest_schema(kind: str) -> dict:
    return openapi_body(INGEST[kind])["requestBody"]["content"]["application/json"]["schema"]


def ascii_ids(schema: object) -> object:
    """``schema`` with string ids limited to ASCII, whose characters are bytes."""
    if isinstance(schema, dict):
        if schema.get("maxLength") == MAX_ID_BYTES:
            return {**schema, "pattern": "^[ -~]+$"}
        return {k: ascii_ids(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [ascii_ids(v) for v in schema]
    return schema


def as_integers(value: Any) -> Any:
    """``value`` with every integral float written as an integer, as a JSON client writes a count."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: as_integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_integers(v) for v in value]
    return value


def as_floats(value: Any) -> Any:
    """``value`` with every integer below 2**53 written as a float (``5`` as ``5.0``)."""
    if type(value) is int and abs(value) < 2**53:
        return float(value)
    if isinstance(value, dict):
        return {k: as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_floats(v) for v in value]
    return value


def bodies(schema: dict) -> st.SearchStrategy[Any]:
    """JSON bodies drawn from ``schema`` by schemathesis (as the body of a one-route OpenAPI document)."""
    body = {"required": True, "content": {"application/json": {"schema": ascii_ids(schema)}}}
    spec = {"openapi": "3.1.0", "info": {"title": "bodies", "version": "1"},
            "paths": {"/x": {"post": {"requestBody": body, "responses": {"200": {"description": "ok"}}}}}}
    operation = schemathesis.openapi.from_dict(spec)["/x"]["POST"]
    return operation.as_strategy().map(lambda case: as_integers(case.body))


def check_drawn(model: type[BaseModel], schema: dict, integers_as_floats: bool = False) -> None:
    @FEW
    @given(bodies(schema))
    def validates(body: dict) -> None:
        accepted = model.model_validate(body)
        if integers_as_floats:
            assert model.model_validate(as_floats(body)) == accepted

    validates()


def outside(body: Any, schema: dict) -> bool:
    return not jsonschema_rs.validator_for(schema).is_valid(body)


@pytest.mark.parametrize("task", list(REQUESTS))
def test_every_prediction_body_the_schema_allows_is_accepted(task):
    check_drawn(REQUESTS[task], REQUESTS[task].model_json_schema(), integers_as_floats=True)


@pytest.mark.parametrize("kind", list(INGEST))
def test_every_ingestion_body_the_schema_allows_passes_the_row_rules(kind):
    check_drawn(INGEST[kind], ingest_schema(kind))


@pytest.mark.parametrize("body", [
    {}, {"customer_id": "a", "customer_ids": ["a"]}, {"customer_ids": []}, {"customer_ids": ["a", 1]},
    {"customer_ids": ["a"] * (MAX_IDS + 1)}, {"customer_id": None}, {"customer_id": ""},
    {"customer_id": True}, {"customer_id": "x" * (MAX_ID_BYTES + 1)}, {"customer_id": 10**MAX_ID_BYTES},
    {"customer_id": "a", "k": 0}, {"customer_id": "a", "k": 101}, {"customer_id": "a", "extra": 1},
])
def test_a_prediction_body_the_server_refuses_is_outside_the_schema(body):
    assert outside(body, REQUESTS["purchase"].model_json_schema())


ROW = {"t_dat": "2020-09-01", "customer_id": "a", "article_id": "b", "price": 1.5, "sales_channel_id": 2}


@pytest.mark.parametrize("kind, body", [
    ("transactions", {"rows": []}),
    ("transactions", {"rows": [ROW] * 51}),
    ("transactions", {"rows": [{**ROW, "t_dat": "2020-13-01"}]}),
    ("transactions", {"rows": [{**ROW, "t_dat": "1 Sep 2020"}]}),
    ("transactions", {"rows": [{**ROW, "price": -1}]}),
    ("transactions", {"rows": [{**ROW, "sales_channel_id": 2.5}]}),
    ("transactions", {"rows": [{**ROW, "customer_id": "a\nb"}]}),
    ("transactions", {"rows": [{k: v for k, v in ROW.items() if k != "price"}]}),
    ("transactions", {"rows": [{**ROW, "extra": 1}]}),
    ("customers", {"rows": [{"FN": 1}]}),
    ("customers", {"rows": [{"customer_id": "c", "age": "old"}]}),
    ("customers", {"rows": [{"customer_id": "c", "FN": [1]}]}),
    ("articles", {"rows": [{"article_id": "a", "copy": True}]}),
    ("articles", {"rows": [{"article_id": "a"}], "batch_id": 7}),
    ("articles", {"rows": [{"article_id": "a"}], "batch_id": ""}),
    ("articles", {"rows": [{"article_id": "a"}], "batch_id": "é"}),
])
def test_an_ingestion_body_the_rules_refuse_is_outside_the_schema(kind, body):
    assert outside(body, ingest_schema(kind))
    with pytest.raises(ValueError):  # pydantic's ValidationError is a ValueError
        INGEST[kind].model_validate(body)


def test_node_rows_name_their_columns_and_drop_the_layout_ones():
    rows = ingest_schema("articles")["properties"]["rows"]["items"]
    assert rows["required"] == ["article_id"] and rows["additionalProperties"] is False
    assert {"copy", "colour name", "price", "prod_name"} <= set(rows["properties"])
    INGEST["articles"].model_validate({"rows": [{"article_id": 7, "copy": "x", "colour name": 3,
                                                 "price": "2020-09-01", "prod_name": {"any": "thing"}}]})
