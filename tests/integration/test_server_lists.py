"""Lists of ids per request on the shared compiled server: each answer is the one-id answer, in order.

The server runs ``--max-batch-size 8`` (conftest), so a list of 20 ids is cut into several forwards
and its tail shares a forward with the next request; none of it may compile a new graph.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from models.registry import TASKS
from serve.bench.metrics_read import scrape, value
from serve.id_fields import MAX_IDS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

UNKNOWN = {"customer_id": "f" * 64, "article_id": "0999999999"}
SIZE = 20


def known_ids(snapshot, task: str, count: int, offset: int = 0) -> list[str]:
    ids = snapshot.ids[TASKS[task].entity_type]
    step = max(1, len(ids) // count)
    return [ids[(offset + i * step) % len(ids)].decode() for i in range(count)]


def assert_same_answer(listed: dict, single: dict) -> None:
    """Equal up to float rounding: the two ran in different batches, padded to different buckets."""
    assert listed.keys() == single.keys()
    for name, expected in single.items():
        if name == "articles":
            assert [a["article_id"] for a in listed[name]] == [a["article_id"] for a in expected]
            assert [a["score"] for a in listed[name]] == pytest.approx([a["score"] for a in expected],
                                                                       rel=1e-5, abs=1e-6)
        elif isinstance(expected, float):
            assert listed[name] == pytest.approx(expected, rel=1e-5, abs=1e-6)
        else:
            assert listed[name] == expected


@pytest.mark.parametrize("task", list(TASKS))
def test_every_answer_in_a_list_is_the_one_id_answer(post, server, snapshot, task):
    spec = TASKS[task]
    ids = known_ids(snapshot, task, SIZE - 3)
    ids = [ids[0], UNKNOWN[spec.id_field], *ids[1:], ids[0], ids[1]]  # an unknown id and repeats
    extra = {"k": 5} if spec.ranks else {}
    before = scrape(server.url)
    with ThreadPoolExecutor(4) as pool:  # several lists at once: they share the worker's batches
        lists = list(pool.map(lambda _: post(task, {f"{spec.id_field}s": ids, **extra}), range(4)))
    singles = [post(task, {spec.id_field: i, **extra}) for i in ids]
    for response in lists:
        assert response.status_code == 200 and response.headers["x-model-version"] == "1", response.text
        answers = response.json()["answers"]
        assert [a[spec.id_field] for a in answers] == ids
        for answer, single in zip(answers, singles, strict=True):
            if single.status_code == 404:
                assert answer == {spec.id_field: UNKNOWN[spec.id_field], "error": f"unknown {spec.id_field}"}
            else:
                assert single.status_code == 200
                assert_same_answer(answer, single.json())
                if spec.ranks:
                    assert len(answer[spec.value_field]) == 5
    assert lists[0].json() == lists[1].json()
    after = scrape(server.url)
    assert value(after, "relserve_recompiles_total", task=task) == 0
    forwards = (value(after, "relserve_batch_size_count", task=task)
                - value(before, "relserve_batch_size_count", task=task))
    assert forwards >= 4 * SIZE / 8  # every list cut into forwards of at most --max-batch-size ids


def test_a_list_of_the_most_ids_fits_the_default_payload_limit(post, snapshot):
    unknown = [f"{i:064x}" for i in range(MAX_IDS - 1)]  # 64-character ids, the H&M customers'
    ids = [known_ids(snapshot, "churn", 1)[0], *unknown]
    body = json.dumps({"customer_ids": ids, "k": 100}).encode()
    response = post("purchase", data=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 200, response.text[:300]
    answers = response.json()["answers"]
    assert len(answers) == MAX_IDS and len(answers[0]["articles"]) > 0
    assert answers[1:] == [{"customer_id": i, "error": "unknown customer_id"} for i in unknown]


@pytest.mark.parametrize("task, body, detail", [
    ("churn", {"customer_ids": []}, f"customer_ids: must hold 1 to {MAX_IDS} ids, got 0"),
    ("sales", {"article_ids": ["0108775015"] * (MAX_IDS + 1)},
     f"article_ids: must hold 1 to {MAX_IDS} ids, got {MAX_IDS + 1}"),
    ("churn", {"customer_ids": ["a", "b", "c", 4]},
     "customer_ids[3]: must be a string like the list's first id, got an integer"),
    ("purchase", {"customer_ids": ["a", None], "k": 5},
     "customer_ids[1]: must be a string or an integer, got null"),
    ("sales", {"article_ids": ["a", ""]}, "article_ids[1]: must not be empty"),
    ("sales", {"article_ids": "0108775015"}, "article_ids: must be a list of ids, got a string"),
    ("churn", {"customer_id": "a", "customer_ids": ["a"]}, "send customer_id or customer_ids, not both"),
    ("purchase", {"k": 5}, "customer_id: field required (or customer_ids: a list of ids)"),
    ("purchase", {"customer_ids": ["a"], "k": 0}, "k: "),
])
def test_a_bad_list_is_refused_naming_the_index(post, task, body, detail):
    response = post(task, body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith(detail), response.json()
