"""``usage``: a ledger of every stream (tokens, status, latency, cost) in SQLite.

One row per stream, written when the stream ends however it ends: complete, ``finish{error}``,
``finish{aborted}``, a raised error, task cancellation or a consumer that stops reading early.
The write runs in a worker thread, shielded from cancellation and bounded by
``write_timeout`` seconds (accounting that awaits runs shielded with a short bound:
docs/stream-obligations.md#7-abort-and-cancellation).

A stream that ended without a ``usage`` chunk is recorded with NULL token counts (unknown,
never zero: docs/hooks.md "a stream without usage is not free"). Cost follows the token semantics of
docs/vocabulary.md: ``input_tokens`` includes cache reads and writes, which are priced at their own rates.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import msgspec
import platformdirs

from harness_core.errors import LlmError
from harness_core.hookspecs import CallNext, hookimpl
from harness_core.types import Finish, GenerateOptions, StreamChunk, TokenUsage, Usage
from harness_middleware import _sqlite
from harness_middleware._stream import aclose

__all__ = ["Price", "UsageLedger", "UsagePlugin", "UsageRecord", "cost_of", "default_usage_path"]

logger = logging.getLogger(__name__)

Status = Literal["complete", "aborted", "error"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,                -- unix time (seconds, UTC) the stream started
    route TEXT,
    model TEXT,
    input_tokens INTEGER,            -- NULL = not reported (unknown), never a guessed 0
    output_tokens INTEGER,
    cache_read_tokens INTEGER,
    cache_write_tokens INTEGER,
    reasoning_tokens INTEGER,
    status TEXT NOT NULL,            -- complete | aborted | error
    error_code TEXT,
    finish_reason TEXT,              -- finish.kind, NULL when the stream had no finish
    latency_ms REAL NOT NULL,
    first_chunk_ms REAL,             -- NULL when no chunk arrived
    cost REAL                        -- NULL when unknown (no price, or no usage)
);
CREATE INDEX IF NOT EXISTS usage_ts ON usage (ts);
"""

_COLUMNS = (
    "ts",
    "route",
    "model",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "status",
    "error_code",
    "finish_reason",
    "latency_ms",
    "first_chunk_ms",
    "cost",
)


def default_usage_path() -> Path:
    """The ledger used when the config names none: ``<user data dir>/harness/usage.sqlite``."""
    return platformdirs.user_data_path("harness") / "usage.sqlite"


class Price(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Prices in currency units per million tokens.

    ``input`` applies to prompt tokens that are neither cache reads nor cache writes;
    ``cache_read`` / ``cache_write`` default to ``input`` when not given.
    """

    input: Annotated[float, msgspec.Meta(ge=0)]
    output: Annotated[float, msgspec.Meta(ge=0)]
    cache_read: Annotated[float, msgspec.Meta(ge=0)] | None = None
    cache_write: Annotated[float, msgspec.Meta(ge=0)] | None = None


def cost_of(usage: TokenUsage | None, price: Price | None) -> float | None:
    """The cost of ``usage`` at ``price``; ``None`` when either, or a main count, is unknown.

    docs/vocabulary.md semantics: cache read/write tokens are subsets of ``input_tokens`` and reasoning
    tokens a subset of ``output_tokens`` (so they are not charged twice).
    """
    if usage is None or price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    cache_read = usage.cache_read_tokens or 0
    cache_write = usage.cache_write_tokens or 0
    plain_input = max(0, usage.input_tokens - cache_read - cache_write)
    read_price = price.input if price.cache_read is None else price.cache_read
    write_price = price.input if price.cache_write is None else price.cache_write
    total = (
        plain_input * price.input
        + cache_read * read_price
        + cache_write * write_price
        + usage.output_tokens * price.output
    )
    return total / 1_000_000


class UsageRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One ledger row. Times: ``ts`` unix seconds; ``latency_ms`` / ``first_chunk_ms`` milliseconds."""

    ts: float
    route: str | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    status: Status
    error_code: str | None
    finish_reason: str | None
    latency_ms: float
    first_chunk_ms: float | None
    cost: float | None


class UsageLedger:
    """The SQLite ledger at ``path``. Methods are blocking: call them from a worker thread."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def insert(self, record: UsageRecord) -> None:
        """Append ``record``. Raises :class:`sqlite3.Error` on database faults."""
        values = tuple(getattr(record, name) for name in _COLUMNS)
        sql = f"INSERT INTO usage ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})"
        _sqlite.run(self.path, _SCHEMA, lambda conn: conn.execute(sql, values))

    def rows(self) -> list[dict[str, Any]]:
        """Every row, oldest first, as dicts keyed by column name."""

        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            cursor = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM usage ORDER BY id")
            return [dict(zip(_COLUMNS, row, strict=True)) for row in cursor]

        return _sqlite.run(self.path, _SCHEMA, read)

    def summary(self, since: float | None = None) -> list[dict[str, Any]]:
        """Totals per (UTC day, route, model) for rows with ``ts >= since`` (all when ``None``).

        Each dict: ``day, route, model, requests, input_tokens, output_tokens,
        cache_read_tokens, cache_write_tokens, reasoning_tokens`` (sums of the known counts),
        ``unknown_usage`` (rows without usage), ``errors``, ``aborted``, ``cost`` (sum of known
        costs, ``None`` when none is known) and ``unpriced`` (rows without a cost).
        """
        sql = """
            SELECT date(ts, 'unixepoch') AS day, route, model, COUNT(*) AS requests,
                   SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
                   SUM(cache_read_tokens) AS cache_read_tokens, SUM(cache_write_tokens) AS cache_write_tokens,
                   SUM(reasoning_tokens) AS reasoning_tokens, SUM(input_tokens IS NULL) AS unknown_usage,
                   SUM(status = 'error') AS errors, SUM(status = 'aborted') AS aborted,
                   SUM(cost) AS cost, SUM(cost IS NULL) AS unpriced
            FROM usage WHERE ts >= ? GROUP BY day, route, model ORDER BY day, route, model
        """

        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            cursor = conn.execute(sql, (since if since is not None else float("-inf"),))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor]

        return _sqlite.run(self.path, _SCHEMA, read)


def _outcome(finish: Finish | None, raised: BaseException | None) -> tuple[Status, str | None, str | None]:
    """(status, error code, finish reason) of a stream that ended with ``finish`` / ``raised``."""
    if finish is not None:
        kind = finish.reason.kind
        if kind == "error":
            failure = finish.reason.failure
            return "error", failure.code if failure is not None else None, kind
        if kind == "aborted":
            return "aborted", "ABORTED", kind
        return "complete", None, kind
    if isinstance(raised, LlmError):
        return "error", raised.code, None
    if raised is None:
        return "error", "PROTOCOL", None  # the inner stream ended without its finish
    if isinstance(raised, GeneratorExit | anyio.get_cancelled_exc_class()):
        return "aborted", None, None  # cancelled, or the consumer stopped reading
    return "error", "INTERNAL", None


class UsagePlugin:
    """Middleware recording every stream in the SQLite ledger (see module doc)."""

    class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
        """``usage:`` in plugins.yaml.

        Fields:
            path: the SQLite file; default ``<user data dir>/harness/usage.sqlite``.
            prices: prices per million tokens keyed ``"route/model"``, ``"route/*"`` or
                ``"*/model"`` (the first that matches, in that order).
            write_timeout: seconds a ledger write may take before it is given up (logged).
        """

        path: str | None = None
        prices: dict[str, Price] = msgspec.field(default_factory=dict)
        write_timeout: Annotated[float, msgspec.Meta(gt=0)] = 5.0

    def __init__(self, config: Config | None = None) -> None:
        self.config = config if config is not None else self.Config()
        path = Path(self.config.path).expanduser() if self.config.path is not None else default_usage_path()
        self.ledger = UsageLedger(_sqlite.check_database_path(path, "usage"))

    def price_for(self, route: str | None, model: str | None) -> Price | None:
        """The configured price of ``route``/``model`` (see ``Config.prices``), or ``None``."""
        prices: Mapping[str, Price] = self.config.prices
        for key in (f"{route}/{model}", f"{route}/*", f"*/{model}"):
            if key in prices:
                return prices[key]
        return None

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Pass ``call_next(options)`` on unchanged and record the stream when it ends."""
        ts = time.time()
        started = anyio.current_time()
        first_at: float | None = None
        usage: TokenUsage | None = None
        finish: Finish | None = None
        raised: BaseException | None = None
        stream = call_next(options)
        try:
            async for chunk in stream:
                if first_at is None:
                    first_at = anyio.current_time()
                if isinstance(chunk, Usage):
                    usage = chunk.usage
                elif isinstance(chunk, Finish):
                    finish = chunk
                yield chunk
        except BaseException as exc:
            raised = exc
            raise
        finally:
            try:
                await aclose(stream)
            finally:
                ended = anyio.current_time()
                status, code, reason = _outcome(finish, raised)
                record = UsageRecord(
                    ts=ts,
                    route=options.provider,
                    model=options.model,
                    input_tokens=usage.input_tokens if usage else None,
                    output_tokens=usage.output_tokens if usage else None,
                    cache_read_tokens=usage.cache_read_tokens if usage else None,
                    cache_write_tokens=usage.cache_write_tokens if usage else None,
                    reasoning_tokens=usage.reasoning_tokens if usage else None,
                    status=status,
                    error_code=code,
                    finish_reason=reason,
                    latency_ms=(ended - started) * 1000,
                    first_chunk_ms=(first_at - started) * 1000 if first_at is not None else None,
                    cost=cost_of(usage, self.price_for(options.provider, options.model)),
                )
                await self._write(record)

    async def _write(self, record: UsageRecord) -> None:
        """Insert ``record`` in a worker thread, shielded from cancellation, bounded in time.

        A database fault or a write that outlasts ``write_timeout`` is logged, not raised: the
        caller's stream has already ended and must not fail because of its accounting.
        """
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.config.write_timeout) as bound:
            try:
                await anyio.to_thread.run_sync(self.ledger.insert, record, abandon_on_cancel=True)
            except sqlite3.Error:
                logger.exception("usage: could not record the stream in %s", self.ledger.path)
        if bound.cancelled_caught:
            logger.error("usage: recording the stream in %s took over %ss", self.ledger.path, self.config.write_timeout)
