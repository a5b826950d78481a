"""Who may write and who may read: bearer keys from the environment, checked in constant time.

* ``RELSERVE_WRITE_KEY`` (or a file named by ``RELSERVE_WRITE_KEY_FILE``): required by every
  ``/ingest`` route; a server with ``--state-dir`` refuses to start without it.
* ``RELSERVE_READ_KEY`` (or ``RELSERVE_READ_KEY_FILE``), optional: when set, the prediction routes
  require it (or the write key, which may also read). ``/health`` and ``/metrics`` stay open.

Clients send ``Authorization: Bearer <key>``. No or a malformed header: 401 with
``WWW-Authenticate: Bearer``; a key that is not valid here: 403 (the read key on a write route
included). The answers have the usual ``{"detail": ...}`` body. Keys are compared with
:func:`hmac.compare_digest`, and checked before the body is read.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import Counter
from starlette.types import ASGIApp, Receive, Scope, Send

WRITE_KEY_ENV = "RELSERVE_WRITE_KEY"
READ_KEY_ENV = "RELSERVE_READ_KEY"
INGEST_PREFIX = "/ingest"
_BEARER = b"bearer "


class CredentialError(ValueError):
    """A key is configured but unusable (empty, or its file cannot be read)."""


def _key(env: Mapping[str, str], name: str) -> bytes | None:
    value, file = env.get(name), env.get(f"{name}_FILE")
    if value is not None and file is not None:
        raise CredentialError(f"set {name} or {name}_FILE, not both")
    if file is not None:
        try:
            value = Path(file).read_text().strip()
        except OSError as e:
            raise CredentialError(f"{name}_FILE {file}: {e.strerror}") from e
    if value is None:
        return None
    if not value.strip() or not value.isascii() or not value.isprintable() or " " in value:
        raise CredentialError(f"{name} must be non-empty printable ASCII without spaces")
    return value.encode()


@dataclass(frozen=True)
class Credentials:
    """The configured keys (``None``: not configured)."""

    write: bytes | None = None
    read: bytes | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Credentials:
        """Raises :class:`CredentialError` for a key that is set but unusable."""
        env = os.environ if env is None else env
        return cls(_key(env, WRITE_KEY_ENV), _key(env, READ_KEY_ENV))

    def refusal(self, authorization: bytes | None, scope: str) -> tuple[int, str] | None:
        """``None`` if a request with this ``Authorization`` header may use a ``scope`` ("read" or
        "write") route, else ``(status, detail)``."""
        if scope == "read" and self.read is None:
            return None
        if authorization is None or authorization[:len(_BEARER)].lower() != _BEARER:
            return 401, "missing credentials: send Authorization: Bearer <key>"
        token = authorization[len(_BEARER):].strip()
        # Both comparisons always run: the time taken does not tell which key was close.
        is_write = self.write is not None and hmac.compare_digest(token, self.write)
        is_read = self.read is not None and hmac.compare_digest(token, self.read)
        if is_write or (scope == "read" and is_read):
            return None
        if is_read:
            return 403, "this key may read but not write: ingestion needs the write key"
        return 403, "invalid credentials"


class KeyAuth:
    """ASGI middleware applying :meth:`Credentials.refusal` to the write routes (every path under
    ``/ingest`` when ``guard_writes``) and the prediction routes (``read_paths``)."""

    def __init__(self, app: ASGIApp, credentials: Credentials, read_paths: frozenset[str],
                 guard_writes: bool) -> None:
        self.app = app
        self.credentials = credentials
        self.read_paths = read_paths
        self.guard_writes = guard_writes
        self._failures: Counter | None = None

    def scope_of(self, path: str) -> str | None:
        if self.guard_writes and (path == INGEST_PREFIX or path.startswith(INGEST_PREFIX + "/")):
            return "write"
        return "read" if path in self.read_paths else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        needed = self.scope_of(scope.get("path", "")) if scope["type"] == "http" else None
        if needed is not None:
            header = next((value for name, value in scope["headers"] if name == b"authorization"), None)
            refusal = self.credentials.refusal(header, needed)
            if refusal is not None:
                await self._refuse(send, needed, *refusal)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, needed: str, status: int, detail: str) -> None:
        if self._failures is None:  # built in the API server process, after the fork
            self._failures = Counter("relserve_auth_failures", "Requests refused for missing or invalid "
                                     "credentials.", ["scope", "status"], registry=None)
        self._failures.labels(needed, str(status)).inc()
        body = json.dumps({"detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="relserve"'))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
