"""serve.http.encode: answers become JSON bytes in the worker, and a non-finite value fails one request."""

from __future__ import annotations

import json

from serve.http.encode import json_list_response, json_response
from serve.http.schemas import LIST_RESPONSES, RESPONSES


def test_an_answer_is_compact_json_of_its_response_model():
    articles = [{"article_id": "0108775015", "score": 0.25}]
    answer = {"customer_id": "a" * 64, "articles": articles, "history": 3}
    response = json_response(answer, {"X-Model-Version": "2"})
    assert response.status_code == 200 and response.media_type == "application/json"
    assert json.loads(response.body) == answer and response.headers["x-model-version"] == "2"
    RESPONSES["purchase"].model_validate_json(response.body, strict=True)


def test_a_non_finite_value_is_a_500_naming_the_problem():
    response = json_response({"article_id": "0108775015", "sales_7d": float("nan")})
    assert response.status_code == 500
    assert json.loads(response.body) == {"detail": "the model produced a non-finite value"}


def test_a_list_is_answered_in_order_with_unknown_ids_as_error_items():
    known = {"article_id": "0108775015", "sales_7d": 1.5, "history": 2}
    response = json_list_response([known, None, known], ("0108775015", "nope", "0108775015"), "article_id",
                                  {"X-Model-Version": "3"})
    assert response.status_code == 200 and response.headers["x-model-version"] == "3"
    unknown = {"article_id": "nope", "error": "unknown article_id"}
    assert json.loads(response.body) == {"answers": [known, unknown, known]}
    LIST_RESPONSES["sales"].model_validate_json(response.body, strict=True)


def test_a_non_finite_value_in_a_list_fails_its_item_only():
    good = {"article_id": "a", "sales_7d": 1.0, "history": 0}
    bad = {"article_id": "b", "sales_7d": float("inf"), "history": 0}
    response = json_list_response([good, bad], ("a", "b"), "article_id")
    assert response.status_code == 200
    assert json.loads(response.body)["answers"] == [
        good, {"article_id": "b", "error": "the model produced a non-finite value"}]
