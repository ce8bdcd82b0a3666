"""The console's request records: one row per generation, in the gateway's state store.

Each row holds what the Spend, Traffic and inspector pages show: who asked (key), what was asked
and what served it (route and model, after any fallback), tokens by kind, cost, time to first
token, latency, status and error, and a JSON ``detail`` (the masked messages, the chunk timeline
and the tool calls; see :mod:`harness_gateway.console.timeline`).

Written behind: :meth:`RecordStore.insert` queues the row, and the process's one writer task
(:attr:`RecordStore.writer`, a :class:`~harness_gateway.writebehind.WriteBehind` the gateway's
lifespan runs) writes every row queued meanwhile in one transaction; the readers first wait for
the rows this process queued before their call (a page read right after a request shows it).

Bounded: ``detail`` is at most :data:`DETAIL_LIMIT` characters (the timeline is then cut and said
so), and the newest ``keep`` rows are kept: the older ones are deleted by the first write of the
process and then once every :attr:`RecordStore.prune_every` rows written (``keep // 100``, at least
1), in the same transaction, so up to ``keep + prune_every - 1`` rows exist between two prunes
(per gateway process writing). The deletion walks ``keep`` index entries; once per
``keep // 100`` rows that is ~100 per row whatever ``keep`` is. The
tables (and ``console_sessions``, :mod:`harness_gateway.console.sessions`) are created by their own
versioned migrations (``console_schema``), in SQLite and
PostgreSQL alike (the statements use types and SQL both accept).
"""

from __future__ import annotations

import json
from typing import Any, Final, Protocol

import msgspec

from harness_gateway.store import SqlStore, Tx
from harness_gateway.writebehind import BATCH_MAX, QUEUE_BYTES_MAX, QUEUE_MAX, WriteBehind

__all__ = ["COLUMNS", "DETAIL_LIMIT", "MIGRATIONS", "RecordStore", "Records", "bounded_detail"]

_Values = tuple[Any, ...]
"""One record as its ``INSERT`` binds it: the :data:`COLUMNS` values (``attempts`` as JSON), then ``detail``."""

DETAIL_LIMIT: Final = 256 * 1024
"""Largest ``detail`` JSON stored per request (characters)."""

COLUMNS: Final = (
    "id",
    "request_id",
    "dialect",
    "key_id",
    "key_name",
    "route",
    "model",
    "served_route",
    "served_model",
    "started_at",
    "status",
    "first_token_ms",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cost",
    "error_code",
    "error_message",
    "attempts",
)
"""The summary columns, in order (``attempts`` is a JSON list; ``detail`` is read on its own)."""

MIGRATIONS: Final = (
    (
        1,
        """
        CREATE TABLE console_requests (
            id TEXT PRIMARY KEY,            -- the ledger row id (gateway_ledger.id)
            request_id TEXT NOT NULL,
            dialect TEXT NOT NULL,          -- openai | anthropic
            key_id TEXT,
            key_name TEXT,
            route TEXT NOT NULL,
            model TEXT NOT NULL,
            served_route TEXT,
            served_model TEXT,
            started_at DOUBLE PRECISION NOT NULL,  -- unix seconds
            status TEXT NOT NULL,           -- complete | aborted | error
            first_token_ms DOUBLE PRECISION,
            latency_ms DOUBLE PRECISION NOT NULL,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cache_read_tokens BIGINT,
            cache_write_tokens BIGINT,
            reasoning_tokens BIGINT,
            cost DOUBLE PRECISION NOT NULL, -- USD
            error_code TEXT,
            error_message TEXT,
            attempts TEXT NOT NULL,         -- JSON list of "route/model: reason"
            detail TEXT NOT NULL            -- JSON: messages, timeline, tool calls (bounded)
        );
        CREATE INDEX console_requests_started ON console_requests (started_at)
        """,
    ),
    (
        2,
        """
        CREATE TABLE console_sessions (
            digest TEXT PRIMARY KEY,        -- SHA-256 hex of a live session cookie
            expires_at DOUBLE PRECISION NOT NULL  -- unix seconds
        )
        """,
    ),
    (
        3,
        # the console's look-up of a request by its x-request-id (recent(..., request_id=...))
        "CREATE INDEX console_requests_request_id ON console_requests (request_id)",
    ),
)
"""``(version, script)`` migrations of the console's tables, applied once each, in order."""


class Records(Protocol):
    """What the console's pages read: summary rows (every name of :data:`COLUMNS`) and details."""

    keep: int
    """How many of the newest requests can be inspected."""

    async def since(self, since: float) -> list[dict[str, Any]]:
        """Rows of requests started at ``since`` (unix seconds) or later, oldest first."""

    async def recent(self, limit: int, **match: str) -> list[dict[str, Any]]:
        """The newest ``limit`` rows, newest first, whose columns equal ``match`` (e.g. ``status``,
        ``route``, ``request_id``)."""

    async def get(self, ticket: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """``(row, detail)`` of one request, or ``None``."""


class RecordStore:
    """Request records in ``store`` (the gateway's SQLite or PostgreSQL state store).

    Args:
        store: the gateway's state store (its transactions and 503 errors are used as they are).
        keep: how many newest rows are kept (see the module: up to ``keep + keep // 100`` exist
            between two prunes).
        limit: most records waiting for the writer (:data:`~harness_gateway.writebehind.QUEUE_MAX`);
            beyond, records are dropped, counted and logged.
        limit_bytes: most characters of details waiting for the writer
            (:data:`~harness_gateway.writebehind.QUEUE_BYTES_MAX`: a stalled database holds at most
            that much memory of records, not ``limit`` x :data:`DETAIL_LIMIT`); beyond, as ``limit``.

    The readers raise :class:`~harness_gateway.errors.GatewayError` (503) when the database
    fails; so does :meth:`insert` when no writer task runs (it then writes at once).
    """

    def __init__(
        self, store: SqlStore, *, keep: int = 10_000, limit: int = QUEUE_MAX, limit_bytes: int = QUEUE_BYTES_MAX
    ) -> None:
        self.store = store
        self.keep = keep
        self.prune_every = max(1, keep // 100)
        """Rows written between two deletions of the rows beyond the newest :attr:`keep`."""
        self.writer: WriteBehind[_Values] = WriteBehind(
            self._write,
            what="console request records",
            batch_max=BATCH_MAX,
            limit=limit,
            size=_detail_size,
            limit_bytes=limit_bytes,
        )
        """Queues the records and writes them in batches (its :meth:`~WriteBehind.run` is the
        process's one writer task, started by the gateway's lifespan; the shutdown flushes it)."""
        self._unpruned = self.prune_every  # rows written since the last prune: the first write prunes
        self._migrated = False

    async def migrate(self) -> int:
        """Create or upgrade the console's tables; the schema version in place."""
        if self._migrated:
            return MIGRATIONS[-1][0]

        version = await self.store.apply_migrations("console_schema", MIGRATIONS)
        self._migrated = True
        return version

    async def insert(self, row: dict[str, Any], detail: dict[str, Any]) -> None:
        """Store one request: ``row`` has every name of :data:`COLUMNS` (``attempts`` a list),
        ``detail`` is JSON-able (cut to :data:`DETAIL_LIMIT` by dropping timeline entries).

        Queued for :attr:`writer` while its task runs (returns at once; a database fault is then
        the writer's to count and log, never the caller's); written at once otherwise.

        Raises:
            TypeError: ``row`` or ``detail`` is not JSON-able (raised here, before queueing).
            GatewayError: 503 when the database fails and no writer task runs.
        """
        text = bounded_detail(detail)
        values = (*(_json(row[name]) if name == "attempts" else row[name] for name in COLUMNS), text)
        if self.writer.running:
            self.writer.put(values)
        else:
            await self._write([values])

    async def _write(self, batch: list[_Values]) -> None:
        """Insert ``batch`` in one transaction (one ``INSERT`` per :data:`_ROWS_PER_INSERT`
        rows), which also prunes when :attr:`prune_every` rows were written since the last prune."""
        await self.migrate()
        written = self._unpruned + len(batch)
        prune = written >= self.prune_every

        async def work(tx: Tx) -> None:
            for start in range(0, len(batch), _ROWS_PER_INSERT):
                part = batch[start : start + _ROWS_PER_INSERT]
                await tx.run(_insert_sql(len(part)), *(value for values in part for value in values))
            if prune:
                await tx.run(
                    "DELETE FROM console_requests WHERE started_at <"
                    " (SELECT started_at FROM console_requests ORDER BY started_at DESC LIMIT 1 OFFSET ?)",
                    self.keep - 1,
                )

        await self.store.transaction(work)
        self._unpruned = 0 if prune else written

    async def since(self, since: float) -> list[dict[str, Any]]:
        """Summary rows (every name of :data:`COLUMNS`) of requests started at ``since`` (unix
        seconds) or later, oldest first (the records this process queued before included)."""
        await self.writer.written()
        await self.migrate()
        rows = await self.store.transaction(
            lambda tx: tx.all(
                f"SELECT {', '.join(COLUMNS)} FROM console_requests WHERE started_at >= ? ORDER BY started_at, id",
                since,
            ),
            write=False,
        )
        return [_summary(row) for row in rows]

    async def recent(self, limit: int, **match: str) -> list[dict[str, Any]]:
        """The newest ``limit`` summary rows, newest first, whose columns equal ``match`` (the
        records this process queued before included).

        Raises:
            ValueError: a ``match`` name that is not a column.
        """
        unknown = sorted(set(match) - set(COLUMNS))
        if unknown:
            raise ValueError(f"cannot filter requests by {unknown[0]!r}")
        await self.writer.written()
        await self.migrate()
        where = " AND ".join(f"{name} = ?" for name in match)
        sql = f"SELECT {', '.join(COLUMNS)} FROM console_requests{' WHERE ' + where if where else ''}"
        rows = await self.store.transaction(
            lambda tx: tx.all(sql + " ORDER BY started_at DESC, id LIMIT ?", *match.values(), limit), write=False
        )
        return [_summary(row) for row in rows]

    async def get(self, ticket: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """``(summary row, detail)`` of request ``ticket``, or ``None`` (the records this process
        queued before included)."""
        await self.writer.written()
        await self.migrate()
        row = await self.store.transaction(
            lambda tx: tx.one(f"SELECT {', '.join(COLUMNS)}, detail FROM console_requests WHERE id = ?", ticket),
            write=False,
        )
        if row is None:
            return None
        detail: dict[str, Any] = json.loads(row[-1])
        return _summary(row[:-1]), detail


_ROWS_PER_INSERT: Final = 999 // (len(COLUMNS) + 1)
"""Rows per multi-row ``INSERT`` (43): SQLite before 3.32 binds at most 999 values per statement
(https://www.sqlite.org/limits.html#max_variable_number), and PostgreSQL's driver keeps ~100
prepared statements per connection: 43 texts of ``INSERT`` at most."""

_INSERTS: dict[int, str] = {}
"""The ``INSERT`` of ``n`` rows, by ``n`` (1 … :data:`_ROWS_PER_INSERT`)."""


def _insert_sql(rows: int) -> str:
    sql = _INSERTS.get(rows)
    if sql is None:
        one = f"({', '.join('?' for _ in range(len(COLUMNS) + 1))})"
        sql = _INSERTS[rows] = f"INSERT INTO console_requests ({', '.join(COLUMNS)}, detail) VALUES " + ", ".join(
            one for _ in range(rows)
        )
    return sql


def _summary(row: tuple[Any, ...]) -> dict[str, Any]:
    record = dict(zip(COLUMNS, row, strict=True))
    record["attempts"] = json.loads(record["attempts"])
    return record


def _detail_size(values: _Values) -> int:
    """The size of a queued record: its detail text's length (the rest is a few hundred bytes)."""
    return len(values[-1])


def _json(value: Any) -> str:
    """``value`` as compact JSON text: msgspec's encoder (~10x ``json.dumps`` on a request's
    detail, once per request); a string holding a lone surrogate, which UTF-8 cannot carry, makes
    it ``json.dumps``'s ASCII text instead (``\\ud800`` escaped, RFC 8259 §7).

    Raises:
        TypeError: ``value`` holds something JSON cannot carry.
    """
    try:
        return msgspec.json.encode(value).decode()
    except UnicodeEncodeError:
        return json.dumps(value)


def bounded_detail(detail: dict[str, Any]) -> str:
    """``detail`` as JSON of at most :data:`DETAIL_LIMIT` characters (:func:`_json`): timeline
    entries are dropped from the end (``timeline_cut`` then counts them), then messages are
    replaced by a note."""
    text = _json(detail)
    timeline = list(detail.get("timeline", []))
    cut = 0
    while len(text) > DETAIL_LIMIT and timeline:
        drop = max(1, len(timeline) // 4)
        del timeline[-drop:]
        cut += drop
        text = _json({**detail, "timeline": timeline, "timeline_cut": cut})
    if len(text) > DETAIL_LIMIT:
        text = _json({**detail, "timeline": [], "timeline_cut": cut, "messages": [], "messages_cut": True})
    return text
