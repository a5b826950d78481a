"""Request models and the flat 422 messages built from their validation errors."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from models.registry import TASKS
from models.schema import MAX_ID_BYTES
from serve.http.errors import describe_error, validation_error_handler
from serve.http.schemas import MAX_K, REQUESTS
from serve.id_fields import MAX_IDS

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
    assert PurchaseRequest.model_validate({"customer_id": CUSTOMER, "k": 5.0}).k == 5  # JSON Schema's integer


@pytest.mark.parametrize("k", [5.5, "5", True, None, float("nan"), float("inf"), [5]])
def test_k_is_a_json_integer_and_nothing_else(k):
    assert messages(PurchaseRequest, {"customer_id": CUSTOMER, "k": k}) == [
        "k: Input should be a valid integer"]


def test_each_ranking_task_defaults_k_to_its_registry_entry():
    for name, request in REQUESTS.items():
        if TASKS[name].ranks:
            assert request.model_fields["k"].default == TASKS[name].k
            assert request.model_json_schema()["properties"]["k"]["default"] == TASKS[name].k


@pytest.mark.parametrize("sent, text", [
    ("13085", "13085"), (13085, "13085"), (-7, "-7"), (0, "0"), ("0108775015", "0108775015"),
    ("85123A", "85123A"), ("3f2a6c1e-7b1d-4c55-9e0a-2d9b5e1f4a77", "3f2a6c1e-7b1d-4c55-9e0a-2d9b5e1f4a77"),
    ("Müller, Anna", "Müller, Anna"), ("客户-7", "客户-7"), ("\U0001f600", "\U0001f600"), (" a b ", " a b "),
    (5.0, "5"), (-7.0, "-7"), (2.0**53 - 1, str(2**53 - 1)),
    ("x" * MAX_ID_BYTES, "x" * MAX_ID_BYTES), ("é" * (MAX_ID_BYTES // 2), "é" * (MAX_ID_BYTES // 2)),
    (10 ** (MAX_ID_BYTES - 1), str(10 ** (MAX_ID_BYTES - 1))),
])
def test_any_string_or_integer_id_is_accepted_as_text(sent, text):
    for model, field in ((CustomerRequest, "customer_id"), (ArticleRequest, "article_id")):
        assert getattr(model.model_validate({field: sent}), field) == text


@pytest.mark.parametrize("body, expected", [
    ({}, "customer_id: field required (or customer_ids: a list of ids)"),
    ({"customer_id": CUSTOMER, "customer_ids": [CUSTOMER]}, "send customer_id or customer_ids, not both"),
    ({"customer_id": ""}, "customer_id: must not be empty"),
    ({"customer_id": "x" * (MAX_ID_BYTES + 1)}, f"customer_id: {LONG} {MAX_ID_BYTES + 1} bytes"),
    ({"customer_id": "é" * 65}, f"customer_id: {LONG} 130 bytes"),
    ({"customer_id": 10**MAX_ID_BYTES}, f"customer_id: {LONG} {MAX_ID_BYTES + 1} bytes"),
    ({"customer_id": 10**1000}, f"customer_id: {LONG} an integer of more digits"),
    ({"customer_id": "\ud800x"}, f"customer_id: {SURROGATE}"),
    ({"customer_id": 5.5}, f"customer_id: {TYPE} a number with a fraction or exponent"),
    ({"customer_id": 2.0**53}, "customer_id: must be below 2**53 when written with a fraction or exponent "
                               "(its digits are lost): send it as an integer or a string, "
                               "got 9007199254740992.0"),
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


def test_a_missing_id_is_named_first_then_what_else_is_wrong():
    missing = "customer_id: field required (or customer_ids: a list of ids)"
    other_task = messages(CustomerRequest, {"article_id": "0108775015"})
    assert other_task == [missing, "article_id: unexpected field"]
    k_too = messages(PurchaseRequest, {"k": 0, "x": 1})
    assert k_too == [missing, "k: Input should be greater than or equal to 1", "x: unexpected field"]


def test_the_openapi_schema_says_string_or_integer():
    schema = CustomerRequest.model_json_schema()
    field = schema["properties"]["customer_id"]
    string = {"type": "string", "minLength": 1, "maxLength": MAX_ID_BYTES}
    integer = {"type": "integer", "minimum": -(10 ** (MAX_ID_BYTES - 1) - 1), "maximum": 10**MAX_ID_BYTES - 1}
    assert field["anyOf"] == [string, integer] and "default" not in field
    assert f"at most {MAX_ID_BYTES} bytes" in field["description"]
    many = schema["properties"]["customer_ids"]
    assert many["anyOf"] == [{"type": "array", "items": item, "minItems": 1, "maxItems": MAX_IDS}
                             for item in (string, integer)]
    assert schema["oneOf"] == [{"required": ["customer_id"]}, {"required": ["customer_ids"]}]
    assert schema["additionalProperties"] is False and "required" not in schema


@pytest.mark.parametrize("sent", [-(10 ** (MAX_ID_BYTES - 1) - 1), 10**MAX_ID_BYTES - 1])
def test_the_schema_integer_bounds_are_the_longest_integers_accepted(sent):
    assert CustomerRequest.model_validate({"customer_id": sent}).customer_id == str(sent)
    for beyond in (sent - 1 if sent < 0 else sent + 1,):
        assert messages(CustomerRequest, {"customer_id": beyond})[0].startswith(f"customer_id: {LONG}")


def test_a_list_is_read_as_text_in_order_with_repeats():
    body = PurchaseRequest.model_validate({"customer_ids": ["b", "a", "b"], "k": 5})
    assert body.customer_ids == ("b", "a", "b") and body.customer_id is None and body.k == 5
    assert CustomerRequest.model_validate({"customer_ids": [7, -1]}).customer_ids == ("7", "-1")
    assert len(ArticleRequest.model_validate({"article_ids": ["a"] * MAX_IDS}).article_ids) == MAX_IDS


@pytest.mark.parametrize("ids, expected", [
    ([], [f"customer_ids: must hold 1 to {MAX_IDS} ids, got 0"]),
    (["a"] * (MAX_IDS + 1), [f"customer_ids: must hold 1 to {MAX_IDS} ids, got {MAX_IDS + 1}"]),
    ("a", ["customer_ids: must be a list of ids, got a string"]),
    (None, ["customer_ids: must be a list of ids, got null"]),
    (["a", "b", "c", 4], ["customer_ids[3]: must be a string like the list's first id, got an integer"]),
    ([1, "b"], ["customer_ids[1]: must be an integer like the list's first id, got a string"]),
    (["a", 2.0], ["customer_ids[1]: must be a string like the list's first id, got an integer"]),
    (["a", None, "", 2.5], [f"customer_ids[1]: {TYPE} null", "customer_ids[2]: must not be empty",
                            f"customer_ids[3]: {TYPE} a number with a fraction or exponent"]),
    (["a", "x" * (MAX_ID_BYTES + 1)], [f"customer_ids[1]: {LONG} {MAX_ID_BYTES + 1} bytes"]),
    ([True], [f"customer_ids[0]: {TYPE} a boolean"]),
    ([["a"]], [f"customer_ids[0]: {TYPE} a list"]),
])
def test_bad_lists_are_refused_naming_the_index(ids, expected):
    assert messages(CustomerRequest, {"customer_ids": ids}) == expected


def test_a_list_of_many_bad_ids_names_the_first_five():
    found = messages(CustomerRequest, {"customer_ids": [None] * 50})
    assert found == [f"customer_ids[{i}]: {TYPE} null" for i in range(5)]


@pytest.mark.parametrize("k", [0, MAX_K + 1, "12", 2.5, True])
def test_k_is_an_integer_from_1_to_100(k):
    assert messages(PurchaseRequest, {"customer_id": CUSTOMER, "k": k})[0].startswith("k:")


def test_a_body_with_many_problems_names_the_first_five():
    fields = {"customer_id": CUSTOMER, **{f"extra{i}": i for i in range(50)}}
    with pytest.raises(ValidationError) as info:
        CustomerRequest.model_validate(fields)
    errors = [{**e, "loc": ("body", *e["loc"])} for e in info.value.errors()]
    detail = asyncio.run(validation_error_handler(None, RequestValidationError(errors))).body.decode()
    assert json.loads(detail)["detail"].endswith("extra4: unexpected field; and 45 more")


def test_body_level_errors_read_as_sentences():
    empty = describe_error({"type": "missing", "loc": ("body",)})
    assert empty == "request body is empty: send a JSON object"
    assert describe_error({"type": "model_attributes_type", "loc": ("body",)}) == "body must be a JSON object"
    error = {"type": "json_invalid", "loc": ("body", 7), "ctx": {"error": "Expecting value"}}
    invalid = describe_error(error)
    assert invalid == "body is not valid JSON (Expecting value at character 7)"


def test_the_readme_states_the_request_k_default_the_registry_holds():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    stated = re.findall(r"`k` optional, default (\d+)", readme)
    assert stated, "README.md no longer states the default k of POST /predict/purchase"
    assert {int(k) for k in stated} == {TASKS["purchase"].k}
