"""The body size limit, per route: the ingestion routes get ``--ingest-max-bytes``.

LitServe's ``MaxSizeMiddleware`` applies one ``max_payload_size`` to every route, and the server's
(16 KiB) is sized for prediction bodies. :class:`BodyLimit` takes its place: the prediction routes
keep LitServe's check unchanged, the ``/ingest`` routes are refused with a 413 naming the limit,
at once when ``Content-Length`` says so, else as soon as the body passes it.
"""

from __future__ import annotations

import json

from litserve.middlewares import MaxSizeMiddleware
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve.ingest.auth import INGEST_PREFIX


class BodyLimit:
    """``max_size`` for every path (as LitServe's middleware), ``ingest_max_size`` under ``/ingest``."""

    def __init__(self, app: ASGIApp, max_size: int, ingest_max_size: int) -> None:
        self.app = app
        self.default = MaxSizeMiddleware(app, max_size=max_size)
        self.ingest_max_size = ingest_max_size

    def _message(self) -> str:
        return (f"body larger than {self.ingest_max_size} bytes (--ingest-max-bytes): split the batch, or "
                "use the file drop (--ingest-dir) for bulk loads")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(INGEST_PREFIX + "/"):
            await self.default(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.ingest_max_size:
            body = json.dumps({"detail": self._message()}).encode()
            await send({"type": "http.response.start", "status": 413,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        total = 0

        async def counted() -> Message:
            nonlocal total
            message = await receive()
            total += len(message.get("body", b""))
            if total > self.ingest_max_size:
                raise HTTPException(413, self._message())
            return message

        await self.app(scope, counted, send)
