"""Every endpoint of a real server: happy paths, each 4xx, and batch neighbours kept apart."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from models.schema import ARTICLE, CUSTOMER
from serve.http.schemas import RESPONSES
from tests.integration.waits import batches

pytestmark = [pytest.mark.integration, pytest.mark.slow]

UNKNOWN_CUSTOMER = "f" * 64
UNKNOWN_ARTICLE = "0999999999"
ROUNDS = 10  # concurrent rounds tried until the batches mix good and bad requests (one or two do)


def customer(snapshot, i: int = 0) -> str:
    return snapshot.ids[CUSTOMER][i].decode()


def article(snapshot, i: int = 0) -> str:
    return snapshot.ids[ARTICLE][i].decode()


@pytest.mark.parametrize("task, model", list(RESPONSES.items()))
def test_answers_are_json_of_the_documented_response_model(post, snapshot, task, model):
    """The worker encodes answers itself (serve.http.encode): they must still be the OpenAPI shapes."""
    body = {"article_id": article(snapshot, 2)} if task == "sales" else {"customer_id": customer(snapshot, 2)}
    r = post(task, body)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    model.model_validate_json(r.content, strict=True)
    assert set(r.json()) == set(model.model_fields)


def test_health_is_200_once_ready(server):
    assert requests.get(server.url + "/health", timeout=60).status_code == 200


def test_churn_returns_a_probability(post, snapshot):
    cid = customer(snapshot, 3)
    r = post("churn", {"customer_id": cid})
    assert r.status_code == 200
    body = r.json()
    assert body["customer_id"] == cid and 0.0 <= body["churn_probability"] <= 1.0
    assert isinstance(body["active_last_7d"], bool)


def test_sales_returns_non_negative_sales_and_keeps_the_leading_zero(post, snapshot):
    aid = article(snapshot, 5)
    r = post("sales", {"article_id": aid})
    assert r.status_code == 200
    assert r.json()["article_id"] == aid and aid.startswith("0") and r.json()["sales_7d"] >= 0.0


@pytest.mark.parametrize("k", [1, 12, 100, None])
def test_purchase_returns_k_known_articles_by_descending_score(post, snapshot, k):
    body = {"customer_id": customer(snapshot, 7)} | ({} if k is None else {"k": k})
    r = post("purchase", body)
    assert r.status_code == 200
    articles = r.json()["articles"]
    expected = min(12 if k is None else k, len(snapshot.ids[ARTICLE]))
    assert len(articles) == expected
    scores = [a["score"] for a in articles]
    assert scores == sorted(scores, reverse=True)
    known = {a.decode() for a in snapshot.ids[ARTICLE]}
    assert all(a["article_id"] in known for a in articles)
    assert len({a["article_id"] for a in articles}) == expected


@pytest.mark.parametrize("task, body", [("churn", {"customer_id": UNKNOWN_CUSTOMER}),
                                        ("purchase", {"customer_id": UNKNOWN_CUSTOMER}),
                                        ("sales", {"article_id": UNKNOWN_ARTICLE})])
def test_unknown_ids_are_404_naming_the_id(post, task, body):
    r = post(task, body)
    assert r.status_code == 404 and next(iter(body.values())) in r.json()["detail"]


@pytest.mark.parametrize("task, body, field", [
    ("churn", {}, "customer_id"),
    ("churn", {"customer_id": ""}, "customer_id"),
    ("churn", {"customer_id": 4.2}, "customer_id"),
    ("churn", {"customer_id": UNKNOWN_CUSTOMER, "extra": 1}, "extra"),
    ("sales", {"article_id": "0" * 129}, "article_id"),
    ("sales", {"customer_id": UNKNOWN_CUSTOMER}, "article_id"),
    ("purchase", {"customer_id": UNKNOWN_CUSTOMER, "k": 0}, "k"),
    ("purchase", {"customer_id": UNKNOWN_CUSTOMER, "k": 101}, "k"),
    ("purchase", {"customer_id": UNKNOWN_CUSTOMER, "k": "12"}, "k"),
])
def test_malformed_fields_are_422_naming_the_field(post, task, body, field):
    r = post(task, body)
    assert r.status_code == 422 and isinstance(r.json()["detail"], str)
    assert r.json()["detail"].startswith(f"{field}:")


@pytest.mark.parametrize("kwargs, status, words", [
    ({"data": b"{not json", "headers": {"Content-Type": "application/json"}}, 422, "not valid JSON"),
    ({"data": b"", "headers": {"Content-Type": "application/json"}}, 422, "body is empty"),
    ({"data": b"[1, 2]", "headers": {"Content-Type": "application/json"}}, 422, "JSON object"),
    ({"data": b'{"customer_id": "x"}', "headers": {"Content-Type": "text/plain"}}, 415, "application/json"),
    ({"json": {"customer_id": "a" * 200_000}}, 413, "too large"),
])
def test_bad_bodies_get_a_clear_4xx_never_500(post, kwargs, status, words):
    r = post("churn", **kwargs)
    assert r.status_code == status and words in r.json()["detail"]


def test_get_on_a_prediction_route_is_405(server):
    assert requests.get(server.url + "/predict/churn", timeout=60).status_code == 405


def test_bad_requests_never_fail_their_batch_neighbours(server, snapshot):
    good = [{"customer_id": customer(snapshot, i)} for i in range(12)]
    bad = [{"customer_id": UNKNOWN_CUSTOMER}, {"customer_id": ["nope"]}, {"customer_id": UNKNOWN_CUSTOMER}]
    bodies = good[:4] + bad[:1] + good[4:8] + bad[1:] + good[8:]
    queued = len(good) + 2  # the 422 is refused before it is queued; the unknown ids reach a batch

    def send(body):
        return requests.post(server.url + "/predict/churn", json=body, timeout=60)

    for _ in range(ROUNDS):  # until a round shows each unknown id in a batch with known ones
        before = batches(server, "churn")
        with ThreadPoolExecutor(len(bodies)) as pool:
            statuses = [r.status_code for r in pool.map(send, bodies)]
        assert statuses == [200] * 4 + [404] + [200] * 4 + [422, 404] + [200] * 4
        count, requests_batched = (a - b for a, b in zip(batches(server, "churn"), before, strict=True))
        # A batch of unknown ids alone runs nothing and is not counted: all of them counted means
        # each 404 was answered from a batch whose known ids were answered 200.
        if requests_batched == queued and count < queued:
            return
    pytest.fail(f"no round of {ROUNDS} put each unknown id in a batch with known ones")


def test_openapi_documents_bodies_and_error_answers(server):
    spec = requests.get(server.url + "/openapi.json", timeout=60).json()
    purchase = spec["paths"]["/predict/purchase"]["post"]
    body_schema = purchase["requestBody"]["content"]["application/json"]["schema"]
    assert body_schema["$ref"].endswith("PurchaseRequest")
    assert {"200", "404", "413", "415", "422", "503", "504"} <= set(purchase["responses"])
    assert "/metrics" not in spec["paths"]
