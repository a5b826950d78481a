"""serve.encode: answers become JSON bytes in the worker, and a non-finite value fails one request."""

from __future__ import annotations

import json

from serve.encode import json_response
from serve.schemas import RESPONSES


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
