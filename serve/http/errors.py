"""One error shape for every 4xx/5xx answer: ``{"detail": "<what is wrong, naming the field>"}``.

FastAPI's own 422 body is a list of pydantic errors; a client reading ``detail`` as a string for
404/413/503/504 would trip on it, and its messages for an empty or non-object body are cryptic.
:func:`validation_error_handler` flattens them into one short sentence, and
:func:`http_error_handler` explains the bodies FastAPI cannot parse at all (not UTF-8, nested too
deeply, a number too long), which it would answer with a bare 400. Messages quote what the client
sent only in ``ascii()`` form and cut short, so a hostile body cannot put control characters or
kilobytes of text into the answer or the logs. :data:`ERROR_RESPONSES` documents every error
answer of the prediction routes in OpenAPI.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from serve.http.schemas import ErrorBody

MAX_PROBLEMS = 5  # a body with 4000 unknown fields gets 5 sentences, not 4000
MAX_QUOTED = 24
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


def quote(value: Any) -> str:
    """A client value for a message: plain field names as is, anything else ``ascii()``-quoted and cut."""
    text = str(value)
    if isinstance(value, str) and _PLAIN_NAME.match(text):
        return text
    shown = ascii(text[:MAX_QUOTED])
    return shown if len(text) <= MAX_QUOTED else f"{shown[:-1]}...{shown[-1]} ({len(text)} characters)"


def _field(loc: tuple[Any, ...]) -> str | None:
    """The field path of a body error (``customer_ids[3]``, ``a.b``), ``None`` for the body itself."""
    parts = loc[1:] if loc[:1] == ("body",) else loc
    if not parts:
        return None
    return "".join(f"[{part}]" if isinstance(part, int) else f"{'.' if i else ''}{quote(part)}"
                   for i, part in enumerate(parts))


def describe_error(error: dict[str, Any]) -> str:
    """One pydantic / FastAPI validation error as a short sentence naming the field."""
    kind, loc = error.get("type", ""), tuple(error.get("loc", ()))
    if kind == "json_invalid":
        reason = error.get("ctx", {}).get("error", "malformed")
        return f"body is not valid JSON ({reason} at character {loc[-1] if len(loc) > 1 else 0})"
    field = _field(loc)
    if field is None:
        if kind == "missing":
            return "request body is empty: send a JSON object"
        if kind == "id_fields":  # serve.http.schemas.IdsRequest: the message names the fields
            return str(error.get("msg"))
        return "body must be a JSON object"
    if kind == "missing":
        return f"{field}: field required"
    if kind == "extra_forbidden":
        return f"{field}: unexpected field"
    return f"{field}: {error.get('msg', 'invalid value')}"


async def validation_error_handler(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with every problem of the body in one ``detail`` string."""
    problems = list(dict.fromkeys(describe_error(e) for e in exc.errors())) or ["invalid request"]
    more = len(problems) - MAX_PROBLEMS
    detail = "; ".join(problems[:MAX_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")
    return JSONResponse({"detail": detail}, status_code=422)


def _unparsable_body(cause: BaseException | None) -> str | None:
    """Why FastAPI could not parse a body, for the exceptions it turns into a bare 400."""
    if isinstance(cause, UnicodeDecodeError):
        return f"body is not valid JSON (not UTF-8: byte {cause.start} is {cause.object[cause.start]:#04x})"
    if isinstance(cause, RecursionError):
        return "body is not valid JSON (nested too deeply)"
    if isinstance(cause, ValueError):  # e.g. Python's 4300-digit limit on integers
        reason = "a number has too many digits" if "digits" in str(cause) else quote(str(cause))
        return f"body is not valid JSON ({reason})"
    return None


async def http_error_handler(request: Request, exc: HTTPException) -> Response:
    """FastAPI's handler, except that a body it could not parse gets a 422 saying why."""
    reason = _unparsable_body(exc.__cause__) if exc.status_code == 400 else None
    if reason is not None:
        return JSONResponse({"detail": reason}, status_code=422)
    return await http_exception_handler(request, exc)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (404, "Unknown id (the detail names it); a list answers an unknown id in its item instead."),
        (413, "Body larger than the server's --max-payload-bytes."),
        (415, "Body is not sent as application/json."),
        (422, "Malformed body (the detail names the field)."),
        (503, "Overloaded (retry after Retry-After seconds) or shutting down."),
        (504, "No answer in time (queue wait past --request-timeout, or a lost request)."),
    )
}
