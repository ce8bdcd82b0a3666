"""``cache``: replay the stream of an identical earlier request from SQLite.

The key is the SHA-256 of :func:`harness_core.types.canonical_json` of the options (sorted keys,
without ``abort`` and ``metadata``), so equal requests share an entry. A hit replays the stored
chunk list (msgspec JSON) and calls ``call_next`` zero times. Only complete streams are stored:
those ending with ``finish`` of kind ``stop`` or ``tool-calls`` and made only of the seven
known chunk kinds. Entries older than ``ttl`` seconds are misses (and deleted). A hit is reported
to outer layers through the stream's :class:`~harness_middleware.notes.StreamNotes` (``cached``),
so ``usage`` records it as a hit rather than as tokens spent.

Every database operation runs in a worker thread. A database fault is logged and treated as a
miss (or as not stored): a broken cache never breaks a generation.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, get_args

import anyio
import msgspec
import platformdirs

from harness_core.hookspecs import CallNext, hookimpl
from harness_core.types import Finish, GenerateOptions, StreamChunk, TextDelta, canonical_json
from harness_middleware import _sqlite
from harness_middleware._stream import aclose
from harness_middleware.notes import notes_of

__all__ = ["CachePlugin", "CacheStore", "cache_key", "default_cache_path"]

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY,     -- sha256 hex of the canonical JSON of the options
    created REAL NOT NULL,    -- unix time (seconds) the entry was stored
    chunks BLOB NOT NULL,     -- msgspec JSON array of the stream's chunks
    hits INTEGER NOT NULL DEFAULT 0
);
"""

_KNOWN = get_args(StreamChunk)
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(list[StreamChunk])


def default_cache_path() -> Path:
    """The cache used when the config names none: ``<user cache dir>/harness/cache.sqlite``."""
    return platformdirs.user_cache_path("harness") / "cache.sqlite"


def cache_key(options: GenerateOptions) -> str:
    """The cache key of ``options``: hex SHA-256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(options)).hexdigest()


class CacheStore:
    """The SQLite cache at ``path``. Methods block: call them from a worker thread.

    ``ttl`` is in seconds (``None`` = entries never expire); ``clock`` returns unix seconds.
    """

    def __init__(self, path: Path, ttl: float | None = None, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.ttl = ttl
        self.clock = clock

    def _expired_before(self) -> float:
        return self.clock() - self.ttl if self.ttl is not None else float("-inf")

    def get(self, key: str) -> list[StreamChunk] | None:
        """The stored chunks for ``key`` (counting a hit), or ``None`` (missing or expired)."""

        def read(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute("SELECT created, chunks FROM cache WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            if row[0] < self._expired_before():
                conn.execute("DELETE FROM cache WHERE key = ?", (key,))
                return None
            conn.execute("UPDATE cache SET hits = hits + 1 WHERE key = ?", (key,))
            blob: bytes = row[1]
            return blob

        blob = _sqlite.run(self.path, _SCHEMA, read)
        return _decoder.decode(blob) if blob is not None else None

    def put(self, key: str, chunks: list[StreamChunk]) -> None:
        """Store ``chunks`` under ``key`` (replacing an older entry)."""
        blob = _encoder.encode(chunks)
        _sqlite.run(
            self.path,
            _SCHEMA,
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO cache (key, created, chunks, hits) VALUES (?, ?, ?, 0)",
                (key, self.clock(), blob),
            ),
        )

    def clear(self, *, expired_only: bool = False) -> int:
        """Delete every entry (or only the expired ones); return how many were deleted."""

        def delete(conn: sqlite3.Connection) -> int:
            if expired_only:
                return conn.execute("DELETE FROM cache WHERE created < ?", (self._expired_before(),)).rowcount
            return conn.execute("DELETE FROM cache").rowcount

        return _sqlite.run(self.path, _SCHEMA, delete)

    def stats(self) -> dict[str, Any]:
        """``{"path", "entries", "expired", "hits", "bytes"}`` (``bytes``: stored chunk JSON)."""

        def read(conn: sqlite3.Connection) -> dict[str, Any]:
            entries, expired, hits, size = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(created < ?), 0), COALESCE(SUM(hits), 0),"
                " COALESCE(SUM(LENGTH(chunks)), 0) FROM cache",
                (self._expired_before(),),
            ).fetchone()
            return {"path": str(self.path), "entries": entries, "expired": expired, "hits": hits, "bytes": size}

        return _sqlite.run(self.path, _SCHEMA, read)


class CachePlugin:
    """Middleware replaying identical requests from the SQLite cache (see module doc).

    Args:
        config: the validated :class:`CachePlugin.Config`.
        clock: unix-seconds clock for entry ages (tests inject one to test ``ttl``).
    """

    class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
        """``cache:`` in plugins.yaml.

        Fields:
            path: the SQLite file; default ``<user cache dir>/harness/cache.sqlite``.
            ttl: seconds an entry stays valid; ``null`` = forever.
        """

        path: str | None = None
        ttl: Annotated[float, msgspec.Meta(gt=0)] | None = 86400.0

        def __post_init__(self) -> None:
            """Check that ``path`` can be written, so ``config check`` reports it (``ValueError``)."""
            if self.path is not None:
                _sqlite.check_database_path(Path(self.path).expanduser(), "cache")

    def __init__(self, config: Config | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config if config is not None else self.Config()
        path = Path(self.config.path).expanduser() if self.config.path is not None else default_cache_path()
        self.store = CacheStore(_sqlite.check_database_path(path, "cache"), self.config.ttl, clock)

    async def _get(self, key: str) -> list[StreamChunk] | None:
        try:
            return await anyio.to_thread.run_sync(self.store.get, key)
        except (sqlite3.Error, msgspec.DecodeError):
            logger.exception("cache: lookup in %s failed; treating it as a miss", self.store.path)
            return None

    async def _put(self, key: str, chunks: list[StreamChunk]) -> None:
        try:
            await anyio.to_thread.run_sync(self.store.put, key, chunks)
        except sqlite3.Error:
            logger.exception("cache: storing in %s failed", self.store.path)

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Replay a stored stream for ``options``, or pass ``call_next(options)`` on and store it."""
        key = cache_key(options)
        cached = await self._get(key)
        if cached is not None:
            notes = notes_of(options)
            if notes is not None:
                notes.cached = True  # an outer usage/log layer records a hit, not tokens spent
            for chunk in cached:
                yield chunk
            return
        stream = call_next(options)
        recorded: list[StreamChunk] = []
        record = recorded.append
        storing = True  # until a chunk kind we cannot store goes by
        try:
            async for chunk in stream:
                if not storing:
                    pass
                elif type(chunk) is TextDelta:
                    record(chunk)  # the most frequent chunk
                elif not isinstance(chunk, _KNOWN):
                    storing = False  # pass it on, do not cache
                    recorded.clear()
                else:
                    record(chunk)
                    if isinstance(chunk, Finish) and chunk.reason.kind in ("stop", "tool-calls"):
                        await self._put(key, recorded)  # before the finish goes out: the caller may stop after it
                yield chunk
        finally:
            await aclose(stream)
