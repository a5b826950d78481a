"""One error shape for every 4xx/5xx answer: ``{"detail": "<what is wrong, naming the field>"}``.

FastAPI's own 422 body is a list of pydantic errors; a client reading ``detail`` as a string for
404/413/503/504 would trip on it, and its messages for an empty or non-object body are cryptic.
:func:`validation_error_handler` flattens them into one sentence, and :data:`ERROR_RESPONSES`
documents every error answer of the prediction routes in OpenAPI.
"""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

from serve.schemas import ErrorBody


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc if part != "body")


def describe_error(error: dict[str, Any]) -> str:
    """One pydantic / FastAPI validation error as a short sentence naming the field."""
    kind, loc = error.get("type", ""), tuple(error.get("loc", ()))
    field = _field(loc)
    if kind == "json_invalid":
        reason = error.get("ctx", {}).get("error", "malformed")
        return f"body is not valid JSON ({reason} at character {loc[-1] if len(loc) > 1 else 0})"
    if not field:
        if kind == "missing":
            return "request body is empty: send a JSON object"
        return "body must be a JSON object"
    if kind == "missing":
        return f"{field}: field required"
    if kind == "extra_forbidden":
        return f"{field}: unexpected field"
    return f"{field}: {error.get('msg', 'invalid value')}"


async def validation_error_handler(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with every problem of the body in one ``detail`` string."""
    detail = "; ".join(dict.fromkeys(describe_error(e) for e in exc.errors())) or "invalid request"
    return JSONResponse({"detail": detail}, status_code=422)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (404, "Unknown id (the detail names it)."),
        (413, "Body larger than the server's --max-payload-bytes."),
        (415, "Body is not sent as application/json."),
        (422, "Malformed body (the detail names the field)."),
        (503, "Overloaded (retry after Retry-After seconds) or shutting down."),
        (504, "No answer in time (queue wait past --request-timeout, or a lost request)."),
    )
}
