"""The ingestion log on a Redis stream, shared by every replica (``--ingest-log redis://...``).

One stream holds the batches, entry id ``<sequence>-0``, field ``b`` the batch as JSON; a counter
beside it holds the last sequence. Appending is one Lua script, so the compare-and-append of
:class:`models.store.log.format.Log` is atomic across every writer of every replica: each replica's API
servers validate against the same ordered log and each replica's workers apply the same batches in
the same order, so replicas started from the same snapshot answer alike.

Both keys carry the hash tag ``{NAME}`` (``NAME`` from ``?stream=``, default ``relserve:ingest``), so
they live in one slot of a Redis Cluster. Durability is the broker's: an append is acknowledged
once Redis has executed it, which survives a crash of Redis only with ``appendonly yes`` and
``appendfsync always`` (:meth:`RedisLog.durability_warning` says when the server is configured
otherwise).

The connection is redis-py's (the ``redis`` extra: ``pip install 'relserve[redis]'``), so the URL
is read as redis-py documents it: ``rediss://`` for TLS (with its ``ssl_*`` query options), an ACL
user and password (``redis://USER:PASSWORD@host``), a database number; ``?stream=`` is this log's
own. A call that fails on the connection (dropped, timed out) is retried on a new one, with backoff;
an append retried after its reply was lost meets the counter it moved and answers
:class:`LogConflict`, which the writer resolves by the batch's idempotency key.
"""

from __future__ import annotations

import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from models.store.log.format import READ_LIMIT, LogConflict, LogError, decode_batch, encode_batch, numbered
from models.store.records import IngestBatch

DEFAULT_STREAM = "relserve:ingest"
SCHEMES = ("redis", "rediss")
RETRIES = 3

# KEYS: stream, counter. ARGV: expected last sequence, payload. Returns {1, sequence} or {0, last}.
APPEND_SCRIPT = """
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last ~= tonumber(ARGV[1]) then return {0, last} end
local sequence = last + 1
redis.call('XADD', KEYS[1], sequence .. '-0', 'b', ARGV[2])
redis.call('SET', KEYS[2], sequence)
return {1, sequence}
"""


@dataclass(frozen=True)
class RedisAddress:
    """Where the log is: redis-py's connection URL, and the stream's name (``?stream=``)."""

    url: str
    stream: str = DEFAULT_STREAM

    @classmethod
    def parse(cls, url: str) -> RedisAddress:
        """Raises ``ValueError`` naming what is wrong with ``url``."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise ValueError(f"expected redis[s]://[[user]:password@]host[:port][/db][?stream=NAME], got "
                             f"{cls(url)}")
        path = parts.path.strip("/")
        if path and not path.isdigit():
            raise ValueError(f"the database of {cls(url)} must be a number, got {path!r}")
        query = urllib.parse.parse_qsl(parts.query)
        streams = [value for name, value in query if name == "stream"]
        rest = urllib.parse.urlencode([(name, value) for name, value in query if name != "stream"])
        stream = streams[-1] if streams else cls.stream
        return cls(urllib.parse.urlunsplit(parts._replace(query=rest)), stream)

    def __str__(self) -> str:  # no user or password: this is what logs and errors show
        parts = urllib.parse.urlsplit(self.url)
        host = parts.hostname or "?"
        try:
            port = parts.port or 6379
        except ValueError:
            port = "?"
        return f"{parts.scheme}://{host}:{port}/{parts.path.strip('/') or 0}?stream={self.stream}"


class RedisLog:
    """A :class:`models.store.log.format.Log` on the stream of ``address`` (see the module docstring).

    Args:
        address: a ``redis://`` or ``rediss://`` URL, or its parsed form.
        timeout: seconds for connecting and for each reply.

    Raises:
        LogError: from any method, when Redis cannot be reached or answers an error; on creation,
            when redis-py is not installed.
    """

    def __init__(self, address: RedisAddress | str, timeout: float = 5.0) -> None:
        self.address = RedisAddress.parse(address) if isinstance(address, str) else address
        try:
            import redis
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry
        except ImportError:
            raise LogError(f"{self.address}: the Redis log needs redis-py: "
                           "pip install 'relserve[redis]'") from None
        self._errors = redis.RedisError
        self.client = redis.Redis.from_url(
            self.address.url, socket_timeout=timeout, socket_connect_timeout=timeout,
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), RETRIES),
            retry_on_error=[redis.ConnectionError, redis.TimeoutError], health_check_interval=30)
        self.stream_key = f"{{{self.address.stream}}}:log"
        self.counter_key = f"{{{self.address.stream}}}:sequence"
        self._append = self.client.register_script(APPEND_SCRIPT)  # EVALSHA, reloaded after NOSCRIPT

    def append(self, batch: IngestBatch, expected: int) -> int:
        payload = encode_batch(numbered(batch, 0))  # the script numbers it: the entry id is the sequence
        ok, sequence = self._call(self._append, keys=[self.stream_key, self.counter_key],
                                  args=[expected, payload])
        if not ok:
            raise LogConflict(expected, int(sequence))
        return int(sequence)

    def read(self, after: int, limit: int = READ_LIMIT) -> list[IngestBatch]:
        entries = self._call(self.client.xrange, self.stream_key, f"{after + 1}-0", "+", count=limit)
        if entries and _sequence(entries[0][0]) != after + 1:
            raise LogError(f"{self.address}: batches up to {_sequence(entries[0][0]) - 1} were trimmed; "
                           f"cannot read after {after}")
        return [decode_batch(fields[b"b"], _sequence(entry_id)) for entry_id, fields in entries]

    def last_sequence(self) -> int:
        return int(self._call(self.client.get, self.counter_key) or 0)

    def oldest(self) -> int:
        """Sequence of the oldest entry held (the next one when the stream is empty)."""
        first = self._call(self.client.xrange, self.stream_key, "-", "+", count=1)
        return _sequence(first[0][0]) if first else self.last_sequence() + 1

    def prune(self, through: int) -> None:
        """Drop the entries up to ``through`` (after a compaction folded them into a snapshot)."""
        self._call(self.client.xtrim, self.stream_key, minid=f"{through + 1}-0", approximate=False)

    def durability_warning(self) -> str | None:
        """Why acknowledged batches could be lost if Redis crashes, or ``None`` (also when the
        server does not let us read its configuration)."""
        try:
            settings = {}
            for name in ("appendonly", "appendfsync"):
                reply = {_text(k): _text(v) for k, v in self._call(self.client.config_get, name).items()}
                settings[name] = reply.get(name, "")
        except LogError:
            return None
        if settings == {"appendonly": "yes", "appendfsync": "always"}:
            return None
        return (f"{self.address} runs with appendonly {settings['appendonly'] or '?'} and appendfsync "
                f"{settings['appendfsync'] or '?'}: batches acknowledged just before a crash of Redis may be "
                "lost (set appendonly yes, appendfsync always)")

    wakes_on_append = False  # replicas on other machines append too: readers look again and again

    def wait(self, timeout: float) -> None:
        """Sleep ``timeout`` seconds (appends ring no bell here)."""
        time.sleep(timeout)

    def close(self) -> None:
        self.client.close()

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except (self._errors, OSError) as e:
            problem = "unreachable" if _is_connection(e) else "error"
            raise LogError(f"{self.address} {problem}: {e}") from e


def _sequence(entry_id: bytes | str) -> int:
    return int(_text(entry_id).split("-")[0])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _is_connection(error: Exception) -> bool:
    import redis

    return isinstance(error, redis.ConnectionError | redis.TimeoutError | OSError)
