"""The console's request records: one row per generation, in the gateway's state store.

Each row holds what the Spend, Traffic and inspector pages show: who asked (key), what was asked
and what served it (route and model, after any fallback), tokens by kind, cost, time to first
token, latency, status and error, and a JSON ``detail`` (the masked messages, the chunk timeline
and the tool calls; see :mod:`harness_gateway.console.timeline`).

Bounded: ``detail`` is at most :data:`DETAIL_LIMIT` characters (the timeline is then cut and said
so), and only the newest ``keep`` rows are kept (older ones are deleted as new ones arrive). The
tables (and ``console_sessions``, :mod:`harness_gateway.console.sessions`) are created by their own
versioned migrations (``console_schema``), in SQLite and
PostgreSQL alike (the statements use types and SQL both accept).
"""

from __future__ import annotations

import json
from typing import Any, Final, Protocol

from harness_gateway.store import SqlStore, Tx

__all__ = ["COLUMNS", "DETAIL_LIMIT", "MIGRATIONS", "RecordStore", "Records", "bounded_detail"]

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
        keep: how many newest rows are kept.

    Every method raises :class:`~harness_gateway.errors.GatewayError` (503) when the database fails.
    """

    def __init__(self, store: SqlStore, *, keep: int = 10_000) -> None:
        self.store = store
        self.keep = keep
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
        ``detail`` is JSON-able (cut to :data:`DETAIL_LIMIT` by dropping timeline entries)."""
        await self.migrate()
        values = [json.dumps(row[name]) if name == "attempts" else row[name] for name in COLUMNS]
        text = bounded_detail(detail)
        placeholders = ", ".join("?" for _ in range(len(COLUMNS) + 1))

        async def work(tx: Tx) -> None:
            await tx.run(
                f"INSERT INTO console_requests ({', '.join(COLUMNS)}, detail) VALUES ({placeholders})", *values, text
            )
            await tx.run(
                "DELETE FROM console_requests WHERE started_at <"
                " (SELECT started_at FROM console_requests ORDER BY started_at DESC LIMIT 1 OFFSET ?)",
                self.keep - 1,
            )

        await self.store.transaction(work)

    async def since(self, since: float) -> list[dict[str, Any]]:
        """Summary rows (every name of :data:`COLUMNS`) of requests started at ``since`` (unix
        seconds) or later, oldest first."""
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
        """The newest ``limit`` summary rows, newest first, whose columns equal ``match``.

        Raises:
            ValueError: a ``match`` name that is not a column.
        """
        unknown = sorted(set(match) - set(COLUMNS))
        if unknown:
            raise ValueError(f"cannot filter requests by {unknown[0]!r}")
        await self.migrate()
        where = " AND ".join(f"{name} = ?" for name in match)
        sql = f"SELECT {', '.join(COLUMNS)} FROM console_requests{' WHERE ' + where if where else ''}"
        rows = await self.store.transaction(
            lambda tx: tx.all(sql + " ORDER BY started_at DESC, id LIMIT ?", *match.values(), limit), write=False
        )
        return [_summary(row) for row in rows]

    async def get(self, ticket: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """``(summary row, detail)`` of request ``ticket``, or ``None``."""
        await self.migrate()
        row = await self.store.transaction(
            lambda tx: tx.one(f"SELECT {', '.join(COLUMNS)}, detail FROM console_requests WHERE id = ?", ticket),
            write=False,
        )
        if row is None:
            return None
        detail: dict[str, Any] = json.loads(row[-1])
        return _summary(row[:-1]), detail


def _summary(row: tuple[Any, ...]) -> dict[str, Any]:
    record = dict(zip(COLUMNS, row, strict=True))
    record["attempts"] = json.loads(record["attempts"])
    return record


def bounded_detail(detail: dict[str, Any]) -> str:
    """``detail`` as JSON of at most :data:`DETAIL_LIMIT` characters: timeline entries are dropped
    from the end (``timeline_cut`` then counts them), then messages are replaced by a note."""
    text = json.dumps(detail)
    timeline = list(detail.get("timeline", []))
    cut = 0
    while len(text) > DETAIL_LIMIT and timeline:
        drop = max(1, len(timeline) // 4)
        del timeline[-drop:]
        cut += drop
        text = json.dumps({**detail, "timeline": timeline, "timeline_cut": cut})
    if len(text) > DETAIL_LIMIT:
        text = json.dumps({**detail, "timeline": [], "timeline_cut": cut, "messages": [], "messages_cut": True})
    return text
