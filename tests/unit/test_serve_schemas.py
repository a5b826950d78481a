"""Request models and the flat 422 messages built from their validation errors."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from models.schema import MAX_ID_BYTES
from serve.errors import describe_error, validation_error_handler
from serve.schemas import MAX_K, REQUESTS

CustomerRequest, ArticleRequest, PurchaseRequest = REQUESTS["churn"], REQUESTS["sales"], REQUESTS["purchase"]

CUSTOMER = "0" * 63 + "a"
TYPE = "must be a string or an integer, got"
LONG = f"must be at most {MAX_ID_BYTES} bytes in UTF-8, got"
SURROGATE = "must be unicode text, got a lone surrogate '\\ud800' at position 0"


def messages(model, body) -> list[str]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(body)
    return [describe_error({**e, "loc": ("body", *e["loc"])}) for e in info.value.errors()]


def test_valid_bodies_parse_and_purchase_k_defaults_to_12():
    assert CustomerRequest(customer_id=CUSTOMER).customer_id == CUSTOMER
    assert ArticleRequest(article_id="0108775015").article_id == "0108775015"
    assert PurchaseRequest(customer_id=CUSTOMER).k == 12
    assert PurchaseRequest(customer_id=CUSTOMER, k=MAX_K).k == MAX_K


@pytest.mark.parametrize("sent, text", [
    ("13085", "13085"), (13085, "13085"), (-7, "-7"), (0, "0"), ("0108775015", "0108775015"),
    ("85123A", "85123A"), ("3f2a6c1e-7b1d-4c55-9e0a-2d9b5e1f4a77", "3f2a6c1e-7b1d-4c55-9e0a-2d9b5e1f4a77"),
    ("Müller, Anna", "Müller, Anna"), ("客户-7", "客户-7"), ("\U0001f600", "\U0001f600"), (" a b ", " a b "),
    ("x" * MAX_ID_BYTES, "x" * MAX_ID_BYTES), ("é" * (MAX_ID_BYTES // 2), "é" * (MAX_ID_BYTES // 2)),
    (10 ** (MAX_ID_BYTES - 1), str(10 ** (MAX_ID_BYTES - 1))),
])
def test_any_string_or_integer_id_is_accepted_as_text(sent, text):
    for model, field in ((CustomerRequest, "customer_id"), (ArticleRequest, "article_id")):
        assert getattr(model.model_validate({field: sent}), field) == text


@pytest.mark.parametrize("body, expected", [
    ({}, "customer_id: field required"),
    ({"customer_id": ""}, "customer_id: must not be empty"),
    ({"customer_id": "x" * (MAX_ID_BYTES + 1)}, f"customer_id: {LONG} {MAX_ID_BYTES + 1} bytes"),
    ({"customer_id": "é" * 65}, f"customer_id: {LONG} 130 bytes"),
    ({"customer_id": 10**MAX_ID_BYTES}, f"customer_id: {LONG} {MAX_ID_BYTES + 1} bytes"),
    ({"customer_id": 10**1000}, f"customer_id: {LONG} an integer of more digits"),
    ({"customer_id": "\ud800x"}, f"customer_id: {SURROGATE}"),
    ({"customer_id": 5.0}, f"customer_id: {TYPE} a number with a fraction or exponent"),
    ({"customer_id": True}, f"customer_id: {TYPE} a boolean"),
    ({"customer_id": None}, f"customer_id: {TYPE} null"),
    ({"customer_id": [CUSTOMER]}, f"customer_id: {TYPE} a list"),
    ({"customer_id": {"$ne": ""}}, f"customer_id: {TYPE} an object"),
    ({"customer_id": CUSTOMER, "\x00\n": 1}, "'\\x00\\n': unexpected field"),
    ({"customer_id": CUSTOMER, "": 1}, "'': unexpected field"),
    ({"customer_id": CUSTOMER, "x" * 1000: 1}, f"'{'x' * 24}...' (1000 characters): unexpected field"),
    ({"customer_id": CUSTOMER, "extra": 1}, "extra: unexpected field"),
])
def test_customer_errors_name_the_field(body, expected):
    assert messages(CustomerRequest, body) == [expected]


def test_the_openapi_schema_says_string_or_integer():
    field = CustomerRequest.model_json_schema()["properties"]["customer_id"]
    assert field["anyOf"] == [{"type": "string", "minLength": 1}, {"type": "integer"}]
    assert f"at most {MAX_ID_BYTES} bytes" in field["description"]


@pytest.mark.parametrize("k", [0, MAX_K + 1, "12", 2.5, True])
def test_k_is_an_integer_from_1_to_100(k):
    assert messages(PurchaseRequest, {"customer_id": CUSTOMER, "k": k})[0].startswith("k:")


def test_a_body_with_many_problems_names_the_first_five():
    fields = {f"extra{i}": i for i in range(50)}
    with pytest.raises(ValidationError) as info:
        CustomerRequest.model_validate(fields)
    errors = [{**e, "loc": ("body", *e["loc"])} for e in info.value.errors()]
    detail = asyncio.run(validation_error_handler(None, RequestValidationError(errors))).body.decode()
    assert json.loads(detail)["detail"].endswith("extra3: unexpected field; and 46 more")


def test_body_level_errors_read_as_sentences():
    empty = describe_error({"type": "missing", "loc": ("body",)})
    assert empty == "request body is empty: send a JSON object"
    assert describe_error({"type": "model_attributes_type", "loc": ("body",)}) == "body must be a JSON object"
    error = {"type": "json_invalid", "loc": ("body", 7), "ctx": {"error": "Expecting value"}}
    invalid = describe_error(error)
    assert invalid == "body is not valid JSON (Expecting value at character 7)"
