"""A minimal synchronous Redis client (RESP2 over one TCP connection), enough for the stream log.

The project talks to Redis for one thing, the ingestion log (:mod:`models.store.log.redis_log`), with a
handful of commands; this keeps the serving install free of a client library. A connection is used
by one thread at a time (a lock guards it) and is re-opened once after a broken one.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any


class RespError(Exception):
    """An error reply from the server (``-ERR ...``)."""


@dataclass(frozen=True)
class RedisAddress:
    """Where the broker is: ``redis://[:password@]host[:port][/db][?stream=NAME]``."""

    host: str
    port: int = 6379
    db: int = 0
    password: str | None = None
    stream: str = "relserve:ingest"

    @classmethod
    def parse(cls, url: str) -> RedisAddress:
        """Raises ``ValueError`` naming what is wrong with ``url``."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "redis" or not parts.hostname:
            raise ValueError(f"expected redis://host[:port][/db][?stream=NAME], got {url!r}")
        path = parts.path.strip("/")
        if path and not path.isdigit():
            raise ValueError(f"the database of {url!r} must be a number, got {path!r}")
        query = urllib.parse.parse_qs(parts.query)
        stream = query.get("stream", [cls.stream])[-1]
        return cls(parts.hostname, parts.port or 6379, int(path or 0),
                   urllib.parse.unquote(parts.password) if parts.password else None, stream)

    def __str__(self) -> str:  # no password: this is what logs and errors show
        return f"redis://{self.host}:{self.port}/{self.db}?stream={self.stream}"


def _encode(args: tuple[Any, ...]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class RedisClient:
    """One connection to ``address``; :meth:`call` sends a command and returns its decoded reply
    (bytes for bulk strings, int, list, ``None``), raising :class:`RespError` on an error reply
    and ``OSError`` when the server cannot be reached."""

    def __init__(self, address: RedisAddress, timeout: float = 5.0) -> None:
        self.address = address
        self.timeout = timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._reader: Any = None

    def call(self, *args: Any) -> Any:
        with self._lock:
            try:
                return self._call(args)
            except (OSError, EOFError):
                self._close()
            return self._call(args)  # once more on a fresh connection

    def close(self) -> None:
        with self._lock:
            self._close()

    def _call(self, args: tuple[Any, ...]) -> Any:
        if self._sock is None:
            self._connect()
        self._sock.sendall(_encode(args))
        reply = self._read()
        if isinstance(reply, RespError):
            raise reply
        return reply

    def _connect(self) -> None:
        sock = socket.create_connection((self.address.host, self.address.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock, self._reader = sock, sock.makefile("rb")
        try:
            if self.address.password:
                self._call(("AUTH", self.address.password))
            if self.address.db:
                self._call(("SELECT", self.address.db))
        except BaseException:
            self._close()
            raise

    def _close(self) -> None:
        if self._sock is not None:
            for closable in (self._reader, self._sock):
                with contextlib.suppress(OSError):
                    closable.close()
        self._sock = self._reader = None

    def _read(self) -> Any:
        line = self._reader.readline()
        if not line.endswith(b"\r\n"):
            raise EOFError("connection closed by the Redis server")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            return RespError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self._reader.read(size + 2)
            if len(data) != size + 2:
                raise EOFError("connection closed by the Redis server")
            return data[:-2]
        if kind == b"*":
            size = int(rest)
            return None if size < 0 else [self._read() for _ in range(size)]
        raise OSError(f"unexpected reply from the Redis server: {line[:40]!r}")
