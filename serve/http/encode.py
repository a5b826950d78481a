"""Answers encoded to JSON bytes in the inference worker, so the API server only forwards them.

An answer returned as a plain dict is validated against the route's response model and
JSON-encoded by FastAPI in the API server, once per request, in the one process every request
passes through (for a purchase answer of 12 articles that is most of the API server's time per
request). The worker builds the answers itself from the model's outputs, so it encodes them in
the batch loop instead; the response models stay the routes' documented (OpenAPI) shapes, and
tests/integration/test_server_endpoints.py checks real answers against them.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse, Response


def json_response(answer: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    """``answer`` as a ``200 application/json`` response; a 500 naming the problem if it is not finite.

    JSON has no NaN or infinity (FastAPI refuses them too): a non-finite model output fails this
    one request, not the batch it was computed in. ``headers`` go on either answer (the API
    server returns the worker's response object as it is, headers included).
    """
    try:
        body = json.dumps(answer, allow_nan=False, separators=(",", ":")).encode()
    except ValueError:
        return JSONResponse({"detail": "the model produced a non-finite value"}, status_code=500,
                            headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def json_list_response(answers: list[dict[str, Any] | None], ids: tuple[str, ...], id_field: str,
                       headers: dict[str, str] | None = None) -> Response:
    """A list's answers as ``200 {"answers": [...]}``, one item per id in order.

    Args:
        answers: per id, its answer (``None``: an unknown id, answered ``{id_field: id, "error":
            "unknown <id_field>"}``).
        ids: the ids as sent (text).
        id_field: the task's one-id field (``customer_id``).
        headers: as for :func:`json_response`.

    An item whose value is not finite is answered with an ``error`` saying so instead; the rest
    of the list stands.
    """
    unknown = f"unknown {id_field}"
    items = [answer if answer is not None else {id_field: i, "error": unknown}
             for i, answer in zip(ids, answers, strict=True)]
    try:
        body = json.dumps({"answers": items}, allow_nan=False, separators=(",", ":")).encode()
    except ValueError:
        items = [_finite(item, id_field) for item in items]
        body = json.dumps({"answers": items}, allow_nan=False, separators=(",", ":")).encode()
    return Response(body, media_type="application/json", headers=headers)


def _finite(item: dict[str, Any], id_field: str) -> dict[str, Any]:
    try:
        json.dumps(item, allow_nan=False)
    except ValueError:
        return {id_field: item[id_field], "error": "the model produced a non-finite value"}
    return item
