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
"""

from __future__ import annotations

from models.store.log.format import READ_LIMIT, LogConflict, LogError, decode_batch, encode_batch, numbered
from models.store.log.resp import RedisAddress, RedisClient, RespError
from models.store.records import IngestBatch

# KEYS: stream, counter. ARGV: expected last sequence, payload. Returns {1, sequence} or {0, last}.
APPEND_SCRIPT = """
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last ~= tonumber(ARGV[1]) then return {0, last} end
local sequence = last + 1
redis.call('XADD', KEYS[1], sequence .. '-0', 'b', ARGV[2])
redis.call('SET', KEYS[2], sequence)
return {1, sequence}
"""


class RedisLog:
    """A :class:`models.store.log.format.Log` on the stream of ``address`` (see the module docstring).

    Raises:
        LogError: from any method, when Redis cannot be reached or answers an error.
    """

    def __init__(self, address: RedisAddress | str, timeout: float = 5.0) -> None:
        self.address = RedisAddress.parse(address) if isinstance(address, str) else address
        self.client = RedisClient(self.address, timeout)
        self.stream_key = f"{{{self.address.stream}}}:log"
        self.counter_key = f"{{{self.address.stream}}}:sequence"
        self._script_sha: bytes | None = None

    def append(self, batch: IngestBatch, expected: int) -> int:
        payload = encode_batch(numbered(batch, 0))  # the script numbers it: the entry id is the sequence
        ok, sequence = self._run_append(expected, payload)
        if not ok:
            raise LogConflict(expected, int(sequence))
        return int(sequence)

    def read(self, after: int, limit: int = READ_LIMIT) -> list[IngestBatch]:
        entries = self._call("XRANGE", self.stream_key, f"{after + 1}-0", "+", "COUNT", limit)
        if entries and int(entries[0][0].split(b"-")[0]) != after + 1:
            raise LogError(f"{self.address}: batches up to {int(entries[0][0].split(b'-')[0]) - 1} were "
                           f"trimmed; cannot read after {after}")
        batches = []
        for entry_id, fields in entries:
            values = dict(zip(fields[::2], fields[1::2], strict=True))
            batches.append(decode_batch(values[b"b"], int(entry_id.split(b"-")[0])))
        return batches

    def last_sequence(self) -> int:
        return int(self._call("GET", self.counter_key) or 0)

    def oldest(self) -> int:
        """Sequence of the oldest entry held (the next one when the stream is empty)."""
        first = self._call("XRANGE", self.stream_key, "-", "+", "COUNT", 1)
        return int(first[0][0].split(b"-")[0]) if first else self.last_sequence() + 1

    def prune(self, through: int) -> None:
        """Drop the entries up to ``through`` (after a compaction folded them into a snapshot)."""
        self._call("XTRIM", self.stream_key, "MINID", f"{through + 1}-0")

    def durability_warning(self) -> str | None:
        """Why acknowledged batches could be lost if Redis crashes, or ``None`` (also when the
        server does not let us read its configuration)."""
        try:
            settings = {}
            for name in ("appendonly", "appendfsync"):
                reply = self._call("CONFIG", "GET", name)
                settings[name] = reply[1].decode() if reply else ""
        except LogError:
            return None
        if settings == {"appendonly": "yes", "appendfsync": "always"}:
            return None
        return (f"{self.address} runs with appendonly {settings['appendonly'] or '?'} and appendfsync "
                f"{settings['appendfsync'] or '?'}: batches acknowledged just before a crash of Redis may be "
                "lost (set appendonly yes, appendfsync always)")

    def close(self) -> None:
        self.client.close()

    def _run_append(self, expected: int, payload: bytes) -> list:
        if self._script_sha is None:
            self._script_sha = self._call("SCRIPT", "LOAD", APPEND_SCRIPT)
        try:
            return self.client.call("EVALSHA", self._script_sha, 2, self.stream_key, self.counter_key,
                                    expected, payload)
        except RespError as e:
            if not str(e).startswith("NOSCRIPT"):  # a restarted Redis forgot the script
                raise LogError(f"{self.address}: {e}") from e
        except OSError as e:
            raise LogError(f"{self.address} unreachable: {e}") from e
        return self._call("EVAL", APPEND_SCRIPT, 2, self.stream_key, self.counter_key, expected, payload)

    def _call(self, *args: object) -> object:
        try:
            return self.client.call(*args)
        except RespError as e:
            raise LogError(f"{self.address}: {e}") from e
        except OSError as e:
            raise LogError(f"{self.address} unreachable: {e}") from e
