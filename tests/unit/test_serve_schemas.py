"""Request models and the flat 422 messages built from their validation errors."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from serve.errors import describe_error, validation_error_handler
from serve.schemas import MAX_K, REQUESTS

CustomerRequest, ArticleRequest, PurchaseRequest = REQUESTS["churn"], REQUESTS["sales"], REQUESTS["purchase"]

CUSTOMER = "0" * 63 + "a"
HEX64 = "64 lowercase hex characters"


def messages(model, body) -> list[str]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(body)
    return [describe_error({**e, "loc": ("body", *e["loc"])}) for e in info.value.errors()]


def test_valid_bodies_parse_and_purchase_k_defaults_to_12():
    assert CustomerRequest(customer_id=CUSTOMER).customer_id == CUSTOMER
    assert ArticleRequest(article_id="0108775015").article_id == "0108775015"
    assert PurchaseRequest(customer_id=CUSTOMER).k == 12
    assert PurchaseRequest(customer_id=CUSTOMER, k=MAX_K).k == MAX_K


@pytest.mark.parametrize("body, expected", [
    ({}, "customer_id: field required"),
    ({"customer_id": "abc"}, f"customer_id: must be {HEX64}, got 3 characters"),
    ({"customer_id": "a"}, f"customer_id: must be {HEX64}, got 1 character"),
    ({"customer_id": CUSTOMER.upper()}, f"customer_id: must be {HEX64}, got 'A' at position 63"),
    ({"customer_id": "\x1b" + CUSTOMER[1:]}, f"customer_id: must be {HEX64}, got '\\x1b' at position 0"),
    ({"customer_id": CUSTOMER, "\x00\n": 1}, "'\\x00\\n': unexpected field"),
    ({"customer_id": CUSTOMER, "": 1}, "'': unexpected field"),
    ({"customer_id": CUSTOMER, "x" * 1000: 1}, f"'{'x' * 24}...' (1000 characters): unexpected field"),
    ({"customer_id": CUSTOMER, "extra": 1}, "extra: unexpected field"),
    ({"customer_id": 5}, "customer_id: Input should be a valid string"),
])
def test_customer_errors_name_the_field(body, expected):
    message = messages(CustomerRequest, body)[0]
    assert message.startswith(expected) and not message.startswith(expected + "s")


@pytest.mark.parametrize("article_id", ["108775015", "01087750150", "010877501x", ""])
def test_article_ids_are_exactly_ten_digits(article_id):
    assert messages(ArticleRequest, {"article_id": article_id})[0].startswith("article_id:")


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
