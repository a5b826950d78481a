"""serve.http.queries: a batch's ids line up in request order and their answers go back to each request."""

from __future__ import annotations

from serve.http.queries import ListQuery, Query, line_up, split_back


def test_single_ids_line_up_as_they_are():
    queries = [Query("a", 3), Query("b", 5)]
    assert line_up(queries) == (["a", "b"], [3, 5])
    assert split_back(queries, [{"x": 1}, None]) == [{"x": 1}, None]


def test_lists_line_up_between_single_ids_and_get_their_own_share_back():
    queries = [Query("a", 1), ListQuery(("b", "c", "b"), 7), Query("d", 2), ListQuery(("e",), 4)]
    ids, ks = line_up(queries)
    assert ids == ["a", "b", "c", "b", "d", "e"] and ks == [1, 7, 7, 7, 2, 4]
    answers = [{"id": i} if i != "c" else None for i in ids]
    assert split_back(queries, answers) == [
        {"id": "a"}, [{"id": "b"}, None, {"id": "b"}], {"id": "d"}, [{"id": "e"}]]
