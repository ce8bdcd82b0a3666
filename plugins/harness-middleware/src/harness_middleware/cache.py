"""``cache``: replay the stream of an identical earlier request from SQLite.

The key is the SHA-256 of :func:`harness_core.types.canonical_json` of the options (sorted keys,
without ``abort`` and ``metadata``), so equal requests share an entry. A hit replays the stored
chunk list (msgspec JSON) and calls ``call_next`` zero times. Only complete streams are stored:
those ending with ``finish`` of kind ``stop`` or ``tool-calls`` and made only of the seven
known chunk kinds. Entries older than ``ttl`` seconds are misses (and deleted). A hit is reported
to outer layers through the stream's :class:`~harness_core.record.StreamRecord` (``cached``),
so ``usage`` records it as a hit rather than as tokens spent.

Embedding calls (``llm_embed``, docs/embeddings.md) are cached in the same file (table
``embeddings``) with the same ``ttl``: the key is the SHA-256 of the canonical JSON of the
:class:`~harness_core.embedding.EmbedOptions` (sorted keys, defaults omitted: the inputs in
order, route, model, ``dimensions`` and ``input_type``, see :func:`embed_cache_key`), and the
entry holds the float32 buffer as one blob (native byte order: the cache is a local file) with
the dimensions, model, route, plugin key and reported input tokens. A hit returns the stored
vectors without calling ``call_next`` and tells an outer ``usage`` layer so
(:func:`~harness_core.record.embed_record`); errors are never stored.

Every database operation runs in a worker thread. A database fault is logged and treated as a
miss (or as not stored): a broken cache never breaks a generation.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from array import array
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, get_args

import anyio
import msgspec
import platformdirs

from harness_core import embed_record, record_of
from harness_core.middleware import (
    CallNext,
    EmbedCallNext,
    Embeddings,
    EmbedOptions,
    Finish,
    GenerateOptions,
    StreamChunk,
    TextDelta,
    TokenUsage,
    canonical_json,
    hookimpl,
)
from harness_middleware import _sqlite
from harness_middleware._stream import aclose

__all__ = ["CachePlugin", "CacheStore", "cache_key", "default_cache_path", "embed_cache_key"]

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY,     -- sha256 hex of the canonical JSON of the options
    created REAL NOT NULL,    -- unix time (seconds) the entry was stored
    chunks BLOB NOT NULL,     -- msgspec JSON array of the stream's chunks
    hits INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY,     -- sha256 hex of the canonical JSON of the embedding options
    created REAL NOT NULL,    -- unix time (seconds) the entry was stored
    route TEXT,               -- the route and plugin key that served it
    source TEXT,
    model TEXT,
    dimensions INTEGER NOT NULL,
    input_tokens INTEGER,     -- NULL: the provider reported no usage
    vectors BLOB NOT NULL,    -- the float32 buffer, row-major, native byte order
    hits INTEGER NOT NULL DEFAULT 0
);
"""

_KNOWN = get_args(StreamChunk)
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(list[StreamChunk])
_embed_encoder = msgspec.json.Encoder(order="sorted")  # EmbedOptions omit their defaults


def default_cache_path() -> Path:
    """The cache used when the config names none: ``<user cache dir>/harness/cache.sqlite``."""
    return platformdirs.user_cache_path("harness") / "cache.sqlite"


def cache_key(options: GenerateOptions) -> str:
    """The cache key of ``options``: hex SHA-256 of its canonical JSON."""
    return hashlib.sha256(canonical_json(options)).hexdigest()


def embed_cache_key(options: EmbedOptions) -> str:
    """The cache key of an embedding request: hex SHA-256 of its canonical JSON (sorted keys,
    defaults omitted), so equal inputs, route, model, dimensions and input type share an entry."""
    return hashlib.sha256(_embed_encoder.encode(options)).hexdigest()


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

    def get_embeddings(self, key: str) -> Embeddings | None:
        """The stored vectors for ``key`` (counting a hit), or ``None`` (missing or expired).

        Raises:
            ValueError: the stored blob is not a whole number of vectors (a damaged entry).
        """

        def read(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row = conn.execute(
                "SELECT created, route, source, model, dimensions, input_tokens, vectors FROM embeddings WHERE key = ?",
                (key,),
            ).fetchone()
            if row is None:
                return None
            if row[0] < self._expired_before():
                conn.execute("DELETE FROM embeddings WHERE key = ?", (key,))
                return None
            conn.execute("UPDATE embeddings SET hits = hits + 1 WHERE key = ?", (key,))
            return tuple(row[1:])

        found = _sqlite.run(self.path, _SCHEMA, read)
        if found is None:
            return None
        route, source, model, dimensions, tokens, blob = found
        data = array("f")
        data.frombytes(blob)
        usage = TokenUsage(input_tokens=tokens, output_tokens=None) if tokens is not None else None
        return Embeddings(data, dimensions, model=model, usage=usage, route=route, source=source)

    def put_embeddings(self, key: str, result: Embeddings) -> None:
        """Store ``result`` under ``key`` (replacing an older entry)."""
        tokens = result.usage.input_tokens if result.usage is not None else None
        row = (key, self.clock(), result.route, result.source, result.model, result.dimensions, tokens)
        _sqlite.run(
            self.path,
            _SCHEMA,
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO embeddings"
                " (key, created, route, source, model, dimensions, input_tokens, vectors, hits)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (*row, result.data.tobytes()),
            ),
        )

    def clear(self, *, expired_only: bool = False) -> int:
        """Delete every entry, streams and embeddings (or only the expired ones); return how many
        were deleted."""

        def delete(conn: sqlite3.Connection) -> int:
            deleted = 0
            for table in ("cache", "embeddings"):
                if expired_only:
                    sql = f"DELETE FROM {table} WHERE created < ?"
                    deleted += conn.execute(sql, (self._expired_before(),)).rowcount
                else:
                    deleted += conn.execute(f"DELETE FROM {table}").rowcount
            return deleted

        return _sqlite.run(self.path, _SCHEMA, delete)

    def stats(self) -> dict[str, Any]:
        """``{"path", "entries", "expired", "hits", "bytes", "embeddings"}``: entries, expired
        entries, hits and stored bytes (chunk JSON and vector blobs) of streams and embeddings
        together; ``embeddings`` how many of the entries are embedding calls."""

        def read(conn: sqlite3.Connection) -> dict[str, Any]:
            before = self._expired_before()
            entries, expired, hits, size = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(created < ?), 0), COALESCE(SUM(hits), 0),"
                " COALESCE(SUM(LENGTH(chunks)), 0) FROM cache",
                (before,),
            ).fetchone()
            vectors, vectors_expired, vector_hits, vector_size = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(created < ?), 0), COALESCE(SUM(hits), 0),"
                " COALESCE(SUM(LENGTH(vectors)), 0) FROM embeddings",
                (before,),
            ).fetchone()
            return {
                "path": str(self.path),
                "entries": entries + vectors,
                "expired": expired + vectors_expired,
                "hits": hits + vector_hits,
                "bytes": size + vector_size,
                "embeddings": vectors,
            }

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
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """Return the stored vectors for ``options`` (``call_next`` is not called), or
        ``await call_next(options)`` and store its result; errors pass through unstored."""
        key = embed_cache_key(options)
        try:
            cached = await anyio.to_thread.run_sync(self.store.get_embeddings, key)
        except (sqlite3.Error, ValueError):
            logger.exception("cache: embedding lookup in %s failed; treating it as a miss", self.store.path)
            cached = None
        if cached is not None:
            call = embed_record()
            if call is not None:
                call.cached = True  # an outer usage layer records a hit, not tokens spent
            return cached
        result = await call_next(options)
        try:
            await anyio.to_thread.run_sync(self.store.put_embeddings, key, result)
        except sqlite3.Error:
            logger.exception("cache: storing embeddings in %s failed", self.store.path)
        return result

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Replay a stored stream for ``options``, or pass ``call_next(options)`` on and store it."""
        key = cache_key(options)
        cached = await self._get(key)
        if cached is not None:
            seen = record_of(options)
            if seen is not None:
                seen.cached = True  # an outer usage/log layer records a hit, not tokens spent
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
