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
