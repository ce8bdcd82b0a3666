"""``usage``: a ledger of every stream (tokens, status, latency, cost) in SQLite.

One row per stream, written when the stream ends however it ends: complete, ``finish{error}``,
``finish{aborted}``, a raised error, task cancellation or a consumer that stops reading early.
The write runs in a worker thread, shielded from cancellation and bounded by
``write_timeout`` seconds (accounting that awaits runs shielded with a short bound:
docs/stream-obligations.md#7-abort-and-cancellation).

A stream that ended without a ``usage`` chunk is recorded with NULL token counts (unknown,
never zero: a stream without usage is not free). Cost comes from :mod:`harness_middleware.pricing`
(the genai-prices table, or the ``prices`` overrides): USD, with the price source and the matched
price id; an unknown model or usage has cost NULL. A ``cache`` hit inside this layer is recorded
with ``cached = 1`` and cost 0: its token columns repeat the original generation's usage, which
:meth:`UsageLedger.summary` does not count as tokens spent. With ``fallback`` or ``balance`` inside
this layer, ``route``/``model`` are the ones that served the stream (the fallback target, the pool
member: :class:`~harness_core.record.StreamRecord`) and ``requested_route``/``requested_model``
the ones the caller asked for (the pool's name), so spend can be broken down by member
(:meth:`UsageLedger.summary` ``by=("requested", "member")``).

Route and model names are stored masked by the harness's secret masker (the ``use_redactor``
hook): a model name taken from the environment is a secret like every such value.

Embedding calls (``llm_embed``, docs/embeddings.md) are recorded too, one row per call with
``operation = 'embeddings'`` (streams: ``'chat'``, the OpenTelemetry GenAI operation names): the
input tokens the provider reported, ``output_tokens`` 0 (an embedding call produces none; both
NULL when no usage was reported), the route and model that served it, cost priced by the same
:class:`~harness_middleware.pricing.PriceBook` (the input tokens at the model's input rate, e.g.
genai-prices' ``text-embedding-3-small``), status ``complete``/``error`` (the error code)/
``aborted`` (cancelled), the latency, and ``cached = 1`` with cost 0 for a ``cache`` hit inside
this layer. ``finish_reason`` and ``first_chunk_ms`` are NULL: an embedding call has no chunks.

Older ledgers (without the ``price_source``, ``price_id``, ``cached``, ``operation``,
``requested_route`` and ``requested_model`` columns) are migrated in place on first use; their
rows are streams (``operation = 'chat'``) with no requested route (NULL).
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import msgspec
import platformdirs

from harness_core import StreamEnd, StreamRecord, observe, open_embed_record, open_record
from harness_core.middleware import (
    CallNext,
    EmbedCallNext,
    Embeddings,
    EmbedOptions,
    Finish,
    GenerateOptions,
    LlmError,
    SecretMasking,
    StreamChunk,
    TokenUsage,
    WriteFailureLog,
    hookimpl,
)
from harness_middleware import _sqlite
from harness_middleware._stream import aclose
from harness_middleware.pricing import Cost, PricingConfig

__all__ = ["UsageLedger", "UsagePlugin", "UsageRecord", "default_usage_path"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

Status = Literal["complete", "aborted", "error"]
Operation = Literal["chat", "embeddings"]
"""What a row records: a stream (``chat``) or an embedding call (``embeddings``), named as the
OpenTelemetry GenAI ``gen_ai.operation.name`` values."""
_GROUPS: dict[str, str] = {
    "day": "date(ts, 'unixepoch')",
    "requested": "requested_route",
    "route": "route",
    "model": "model",
    "member": "coalesce(route, '-') || '/' || coalesce(model, '-')",
    "operation": "operation",
}
"""``summary``'s grouping names → SQL (in this order). ``member``: the ``route/model`` that served
(a ``balance`` member, a ``fallback`` target, else the route asked for)."""

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
    first_chunk_ms REAL,             -- NULL when no chunk but the finish arrived
    cost REAL,                       -- USD; NULL when unknown (no price, or no usage)
    price_source TEXT,               -- 'genai-prices <version>', 'config' or 'cache'; NULL when unpriced
    price_id TEXT,                   -- the matched table row 'provider/model' or override key
    cached INTEGER NOT NULL DEFAULT 0, -- 1 = replayed by the cache middleware (nothing spent)
    operation TEXT NOT NULL DEFAULT 'chat', -- chat (a stream) | embeddings (an embedding call)
    requested_route TEXT,            -- the route asked for (a balance pool); route is the one that served
    requested_model TEXT
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
    "price_source",
    "price_id",
    "cached",
    "operation",
    "requested_route",
    "requested_model",
)

# Columns added after the first release, with their declarations: added to older ledgers.
_ADDED_COLUMNS = {
    "price_source": "TEXT",
    "price_id": "TEXT",
    "cached": "INTEGER NOT NULL DEFAULT 0",
    "operation": "TEXT NOT NULL DEFAULT 'chat'",
    "requested_route": "TEXT",
    "requested_model": "TEXT",
}


def default_usage_path() -> Path:
    """The ledger used when the config names none: ``<user data dir>/harness/usage.sqlite``."""
    return platformdirs.user_data_path("harness") / "usage.sqlite"


class UsageRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One ledger row. Times: ``ts`` unix seconds; ``latency_ms`` / ``first_chunk_ms`` milliseconds;
    ``cost`` USD; ``operation`` ``chat`` (a stream) or ``embeddings`` (an embedding call).

    ``route``/``model`` served the call; ``requested_route``/``requested_model`` were asked for
    (they differ when ``fallback`` or ``balance`` inside the ``usage`` layer chose another one).
    """

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
    price_source: str | None = None
    price_id: str | None = None
    cached: bool = False
    operation: Operation = "chat"
    requested_route: str | None = None
    requested_model: str | None = None


def _migrate(conn: sqlite3.Connection) -> None:
    """Add the columns an older ledger lacks (``ALTER TABLE … ADD COLUMN``; rows keep their data)."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(usage)")}
    for name, declaration in _ADDED_COLUMNS.items():
        if name not in present:
            conn.execute(f"ALTER TABLE usage ADD COLUMN {name} {declaration}")


class UsageLedger:
    """The SQLite ledger at ``path``. Methods are blocking: call them from a worker thread.

    Raises :class:`sqlite3.Error` on database faults (every method).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._migrated = False

    def _run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation`` on the ledger, migrating an older schema first (once per instance)."""

        def migrated(conn: sqlite3.Connection) -> T:
            if not self._migrated:
                _migrate(conn)
                self._migrated = True
            return operation(conn)

        return _sqlite.run(self.path, _SCHEMA, migrated)

    def insert(self, record: UsageRecord) -> None:
        """Append ``record``."""
        values = tuple(getattr(record, name) for name in _COLUMNS)
        sql = f"INSERT INTO usage ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)})"
        self._run(lambda conn: conn.execute(sql, values))

    def rows(self) -> list[dict[str, Any]]:
        """Every row, oldest first, as dicts keyed by column name."""

        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            cursor = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM usage ORDER BY id")
            return [dict(zip(_COLUMNS, row, strict=True)) for row in cursor]

        return self._run(read)

    def summary(
        self, since: float | None = None, by: Sequence[str] = ("day", "route", "model")
    ) -> list[dict[str, Any]]:
        """Totals per group of rows with ``ts >= since`` (all when ``None``), sorted by group.

        ``by`` picks the grouping columns among ``day`` (UTC date), ``requested`` (the route asked
        for: a pool's name; ``None`` for rows of older ledgers), ``route`` and ``model`` (those that
        served), ``member`` (``route/model`` that served: the pool member or fallback target) and
        ``operation`` (``chat`` or ``embeddings``), in that order; empty = one total row. Each dict
        holds the ``by`` keys and ``requests``, ``input_tokens, output_tokens, cache_read_tokens,
        cache_write_tokens, reasoning_tokens`` (sums of the known counts of streams and embedding
        calls that reached a provider: cache hits excluded),
        ``unknown_usage`` (such streams without usage), ``cached`` (cache hits), ``errors``,
        ``aborted``, ``cost`` (USD, sum of the known costs, ``None`` when none is known; when some
        rows are unpriced, the cache hits' zero costs do not count as known, so a group whose only
        priced rows are cache hits shows no cost rather than 0) and ``unpriced`` (rows without a cost).

        Raises:
            ValueError: a ``by`` name that is not one of :data:`_GROUPS`.
        """
        unknown = [name for name in by if name not in _GROUPS]
        if unknown:
            raise ValueError(f"cannot group usage by {unknown[0]!r}; choose among {', '.join(_GROUPS)}")
        keys = [name for name in _GROUPS if name in by]
        spent = [
            f"SUM(CASE WHEN cached THEN NULL ELSE {column} END) AS {column}"
            for column in (
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
                "reasoning_tokens",
            )
        ]
        group = f"GROUP BY {', '.join(keys)} ORDER BY {', '.join(keys)}" if keys else ""
        sql = f"""
            SELECT {"".join(f"{_GROUPS[key]} AS {key}, " for key in keys)}COUNT(*) AS requests, {", ".join(spent)},
                   SUM(input_tokens IS NULL AND NOT cached) AS unknown_usage, SUM(cached) AS cached,
                   SUM(status = 'error') AS errors, SUM(status = 'aborted') AS aborted,
                   CASE WHEN SUM(cost IS NULL) THEN SUM(CASE WHEN cached THEN NULL ELSE cost END)
                        ELSE SUM(cost) END AS cost, SUM(cost IS NULL) AS unpriced
            FROM usage WHERE ts >= ? {group}
        """

        def read(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            cursor = conn.execute(sql, (since if since is not None else float("-inf"),))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor if row[len(keys)]]

        return self._run(read)


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


class UsagePlugin(SecretMasking):
    """Middleware recording every stream in the SQLite ledger (see module doc); route and model
    are masked with the harness's secret masker (:class:`~harness_core.SecretMasking`)."""

    class Config(PricingConfig, forbid_unknown_fields=True, kw_only=True):
        """``usage:`` in plugins.yaml: the pricing fields of :class:`PricingConfig`, and

        Fields:
            path: the SQLite file; default ``<user data dir>/harness/usage.sqlite``.
            write_timeout: seconds a ledger write may take before it is given up (logged).
        """

        path: str | None = None
        write_timeout: Annotated[float, msgspec.Meta(gt=0)] = 5.0

        def __post_init__(self) -> None:
            """Check that ``path`` can be written, so ``config check`` reports it (``ValueError``)."""
            if self.path is not None:
                _sqlite.check_database_path(Path(self.path).expanduser(), "usage")

    def __init__(self, config: Config | None = None) -> None:
        self.config = config if config is not None else self.Config()
        path = Path(self.config.path).expanduser() if self.config.path is not None else default_usage_path()
        self.ledger = UsageLedger(_sqlite.check_database_path(path, "usage"))
        self._failures = WriteFailureLog(logger, f"usage: recording the stream in {path}")
        self.prices = self.config.price_book()

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Pass ``call_next(options)`` on unchanged and record the stream when it ends."""
        ts = time.time()
        options, record = open_record(options)

        async def on_end(end: StreamEnd) -> None:
            status, code, reason = _outcome(end.finish, end.raised)
            route, model = record.served()
            usage = end.usage
            cost = await self._cost(route, model, usage, ts) if not record.cached else None
            row = UsageRecord(
                ts=ts,
                route=self.mask_text(route),
                model=self.mask_text(model),
                input_tokens=usage.input_tokens if usage else None,
                output_tokens=usage.output_tokens if usage else None,
                cache_read_tokens=usage.cache_read_tokens if usage else None,
                cache_write_tokens=usage.cache_write_tokens if usage else None,
                reasoning_tokens=usage.reasoning_tokens if usage else None,
                status=status,
                error_code=code,
                finish_reason=reason,
                latency_ms=(end.ended - end.started) * 1000,
                first_chunk_ms=(end.first_chunk - end.started) * 1000 if end.first_chunk is not None else None,
                cost=0.0 if record.cached else float(cost.total) if cost is not None else None,
                price_source="cache" if record.cached else cost.source if cost is not None else None,
                price_id=cost.price_id if cost is not None else None,
                cached=record.cached,
                requested_route=self.mask_text(record.requested_route),
                requested_model=self.mask_text(record.requested_model),
            )
            await self._write(row)

        stream = observe(call_next(options), on_end)
        try:
            async for chunk in stream:
                yield chunk
        finally:
            await aclose(stream)

    async def _cost(self, route: str | None, model: str | None, usage: TokenUsage | None, ts: float) -> Cost | None:
        """The cost of the stream, priced in a worker thread (the first lookup loads the table)."""
        moment = datetime.fromtimestamp(ts, tz=UTC)
        cost: Cost | None = None
        with anyio.CancelScope(shield=True):
            cost = await anyio.to_thread.run_sync(lambda: self.prices.cost(route, model, usage, at=moment))
        return cost

    async def _write(self, record: UsageRecord) -> None:
        """Insert ``record`` in a worker thread, shielded and bounded (:func:`_sqlite.record`)."""
        write = functools.partial(self.ledger.insert, record)
        await _sqlite.record(write, bound=self.config.write_timeout, failures=self._failures)

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """Return ``await call_next(options)`` unchanged and record the call (an ``embeddings``
        row, see module doc) however it ends; errors and cancellation are re-raised."""
        ts = time.time()
        started = anyio.current_time()
        result: Embeddings | None = None
        raised: BaseException | None = None
        with open_embed_record(options) as record:
            try:
                result = await call_next(options)
                return result
            except BaseException as exc:
                raised = exc
                raise
            finally:
                await self._record_embedding(options, record, result, raised, ts, anyio.current_time() - started)

    async def _record_embedding(
        self,
        options: EmbedOptions,
        record: StreamRecord,
        result: Embeddings | None,
        raised: BaseException | None,
        ts: float,
        seconds: float,
    ) -> None:
        """Write the ledger row of one embedding call (``seconds``: its latency)."""
        if result is not None:
            status: Status = "complete"
            code: str | None = None
            route, model = result.route, result.model
        else:
            status, code, _ = _outcome(None, raised)
            route = record.served_route or options.route
            model = record.served_model or options.model
        tokens = result.usage.input_tokens if result is not None and result.usage is not None else None
        usage = TokenUsage(input_tokens=tokens, output_tokens=0) if tokens is not None else None
        cost = await self._cost(route, model, usage, ts) if not record.cached else None
        row = UsageRecord(
            ts=ts,
            route=self.mask_text(route),
            model=self.mask_text(model),
            input_tokens=tokens,
            output_tokens=0 if tokens is not None else None,
            cache_read_tokens=None,
            cache_write_tokens=None,
            reasoning_tokens=None,
            status=status,
            error_code=code,
            finish_reason=None,
            latency_ms=seconds * 1000,
            first_chunk_ms=None,
            cost=0.0 if record.cached else float(cost.total) if cost is not None else None,
            price_source="cache" if record.cached else cost.source if cost is not None else None,
            price_id=cost.price_id if cost is not None else None,
            cached=record.cached,
            operation="embeddings",
            requested_route=self.mask_text(options.route),
            requested_model=self.mask_text(options.model),
        )
        await self._write(row)
