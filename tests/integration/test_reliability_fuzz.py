"""Bad HTTP input by property: generated bodies get exactly the status the request schema implies.

Hypothesis draws near-valid bodies (known, unknown and mutated ids, every kind of ``k``, extra
fields), arbitrary JSON values, raw bytes and content types. A small oracle written from the
API contract, independent of the server's code, says what each should get: 200 with a valid
answer, 404 for an id the snapshot does not hold (any string or integer of at most 128 UTF-8
bytes is an id), 415 for a non-JSON content type, else 422. Examples
are derandomized, so CI runs the same requests every time.
"""

from __future__ import annotations

import email.message
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.schema import ARTICLE, CUSTOMER

pytestmark = [pytest.mark.integration, pytest.mark.slow]

JSON = {"Content-Type": "application/json"}
TASKS = ("churn", "sales", "purchase")
ID_FIELD = {"churn": "customer_id", "sales": "article_id", "purchase": "customer_id"}
FIELDS = {"churn": {"customer_id"}, "sales": {"article_id"}, "purchase": {"customer_id", "k"}}
MAX_ID_BYTES, MAX_K, DEFAULT_K = 128, 100, 12
FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(max_size=12))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
K_VALUES = (st.integers(-3, MAX_K + 3) | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
            | st.booleans() | st.none() | st.text(max_size=4) | st.lists(st.integers(1, 5), max_size=2))


def id_of(value: Any) -> str | None:
    """The id a JSON value stands for: a string as is, an integer as its digits; ``None`` if it is
    none (another type, empty, more than 128 bytes in UTF-8, a lone surrogate)."""
    if type(value) is int:  # a bool is not an id
        value = str(value)
    if not isinstance(value, str):
        return None
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return None
    return value if 0 < size <= MAX_ID_BYTES else None


def expected_status(task: str, body: Any, known: dict[str, set[str]]) -> int:
    """What the API contract says a JSON ``body`` sent to ``task`` gets."""
    id_field = ID_FIELD[task]
    if not isinstance(body, dict) or set(body) - FIELDS[task] or id_field not in body:
        return 422
    entity_id = id_of(body[id_field])
    if entity_id is None:
        return 422
    k = body.get("k", DEFAULT_K)
    if type(k) is not int or not 1 <= k <= MAX_K:  # bools and integral floats are not counts
        return 422
    return 200 if entity_id in known[id_field] else 404


def mutate(value: str, position: int, character: str) -> str:
    position %= len(value)
    return value[:position] + character + value[position + 1:]


def id_values(ids: list[str], alphabet: str, length: int) -> st.SearchStrategy:
    known = st.sampled_from(ids)
    return st.one_of(
        known, known,
        st.text(alphabet, min_size=length, max_size=length),  # well-formed, almost surely unknown
        st.builds(mutate, known, st.integers(0, length - 1), st.characters()),
        st.builds(mutate, known, st.integers(0, length - 1), st.sampled_from(alphabet.upper() + " \x00\n")),
        st.text(alphabet, max_size=2 * length),
        st.text(min_size=MAX_ID_BYTES - 8, max_size=MAX_ID_BYTES + 8),  # either side of the byte limit
        st.integers(0, 10**12) | st.integers(),  # an integer is its digits: unknown ones here
        SCALARS,
    )


def near_valid_bodies(known: dict[str, list[str]]) -> st.SearchStrategy:
    fields = {"customer_id": id_values(known["customer_id"], "0123456789abcdef", 64),
              "article_id": id_values(known["article_id"], "0123456789", 10), "k": K_VALUES}
    base = st.fixed_dictionaries({}, optional=fields)
    extra = st.just({}) | st.dictionaries(st.text(max_size=8), SCALARS, max_size=2)
    return st.builds(lambda extra, base: {**extra, **base}, extra, base)


@pytest.fixture(scope="module")
def known(snapshot) -> dict[str, list[str]]:
    return {"customer_id": [i.decode() for i in snapshot.ids[CUSTOMER]],
            "article_id": [i.decode() for i in snapshot.ids[ARTICLE]]}


def check_answer(task: str, body: dict, response, known_sets: dict[str, set[str]]) -> None:
    """A 200 echoes the id and holds a value of the right range; an error is one short sentence."""
    answer = response.json()
    if response.status_code != 200:
        assert isinstance(answer["detail"], str) and 0 < len(answer["detail"]) <= 1000
        assert answer["detail"].isprintable()
        return
    id_field = ID_FIELD[task]
    assert answer[id_field] == id_of(body[id_field])
    if task == "churn":
        assert 0.0 <= answer["churn_probability"] <= 1.0
    elif task == "sales":
        assert answer["sales_7d"] >= 0.0
    else:
        articles = answer["articles"]
        assert len(articles) == min(body.get("k", DEFAULT_K), len(known_sets["article_id"]))
        assert {a["article_id"] for a in articles} <= known_sets["article_id"]
        assert [a["score"] for a in articles] == sorted((a["score"] for a in articles), reverse=True)


@FUZZ
@given(data=st.data())
def test_generated_json_bodies_get_the_status_the_schema_implies(post, known, data):
    known_sets = {field: set(ids) for field, ids in known.items()}
    task = data.draw(st.sampled_from(TASKS), label="task")
    body = data.draw(near_valid_bodies(known) | JSON_VALUES, label="body")
    response = post(task, data=json.dumps(body).encode(), headers=JSON)
    assert response.status_code == expected_status(task, body, known_sets), response.text[:300]
    check_answer(task, body, response, known_sets)


@FUZZ
@given(task=st.sampled_from(TASKS), raw=st.binary(max_size=300))
def test_arbitrary_bytes_are_parsed_or_refused_never_a_5xx(post, known, task, raw):
    known_sets = {field: set(ids) for field, ids in known.items()}
    try:
        body = json.loads(raw)
        expected = expected_status(task, body, known_sets)
    except (ValueError, RecursionError):  # what Python's parser (and so FastAPI) refuses
        body, expected = None, 422
    response = post(task, data=raw, headers=JSON)
    assert response.status_code == expected, response.text[:300]
    check_answer(task, body, response, known_sets)


def fastapi_reads_json(content_type: str) -> bool:
    """FastAPI's rule for a JSON body: RFC 2045 type ``application/json`` or ``application/*+json``."""
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    is_json = subtype == "json" or subtype.endswith("+json")
    return message.get_content_maintype() == "application" and is_json


CONTENT_TYPES = st.sampled_from([
    "application/json", "APPLICATION/JSON", "application/json; charset=utf-8", "application/problem+json",
    "application/x/y+json", "application/jsonp", "application/json-seq", "text/json", "application/ +json",
    "application", "/json", ";application/json", "application/json;;", "",
]) | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40).map(str.lstrip)


@settings(FUZZ, max_examples=60)
@given(content_type=CONTENT_TYPES)
def test_exactly_the_content_types_fastapi_reads_as_json_are_admitted(post, known, content_type):
    # 415 for the others: FastAPI would take such a body as bytes and fail it with a puzzling 422.
    body = {"article_id": known["article_id"][0]}
    response = post("sales", data=json.dumps(body).encode(), headers={"Content-Type": content_type})
    assert response.status_code == (200 if fastapi_reads_json(content_type) else 415), response.text[:300]
