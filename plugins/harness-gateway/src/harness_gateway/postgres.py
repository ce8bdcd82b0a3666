"""The PostgreSQL state store (asyncpg): keys, spend, limits and ledger shared by many workers and hosts.

Same statements and decisions as :class:`~harness_gateway.store.SQLiteStore`
(:class:`~harness_gateway.store.SqlStore`); admissions lock the key row (``SELECT … FOR
UPDATE``) inside their transaction, so limits hold across every process on the database. The
connection pool is created on first use and rebuilt after a failure, so the gateway answers 503
while PostgreSQL is away and recovers by itself when it is back
(https://magicstack.github.io/asyncpg/current/api/index.html).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import anyio

from harness_gateway.store import LEASE, SqlStore, Tx, unavailable

__all__ = ["MIGRATIONS_POSTGRES", "PostgresStore"]

T = TypeVar("T")

_PLACEHOLDER = re.compile(r"\?")

MIGRATIONS_POSTGRES: Final = (
    (
        1,
        """
        CREATE TABLE gateway_keys (
            id TEXT PRIMARY KEY,
            hash TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            routes TEXT,
            budget DOUBLE PRECISION,
            rpm INTEGER,
            tpm INTEGER,
            expires_at DOUBLE PRECISION,
            created_at DOUBLE PRECISION NOT NULL,
            revoked_at DOUBLE PRECISION,
            spent DOUBLE PRECISION NOT NULL,
            max_cost DOUBLE PRECISION NOT NULL
        );
        CREATE TABLE gateway_ledger (
            id TEXT PRIMARY KEY,
            key_id TEXT,
            route TEXT NOT NULL,
            model TEXT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION,
            status TEXT NOT NULL,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cost DOUBLE PRECISION,
            reserved DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX gateway_ledger_key_started ON gateway_ledger (key_id, started_at);
        CREATE INDEX gateway_ledger_key_ended ON gateway_ledger (key_id, ended_at);
        """,
    ),
    (
        2,
        """
        ALTER TABLE gateway_ledger ADD COLUMN owner TEXT;
        ALTER TABLE gateway_ledger ADD COLUMN lease_until DOUBLE PRECISION;
        CREATE INDEX gateway_ledger_running ON gateway_ledger (key_id, lease_until) WHERE status = 'running';
        """,
    ),
    (
        3,
        """
        ALTER TABLE gateway_keys ADD COLUMN running INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE gateway_keys ADD COLUMN reserved DOUBLE PRECISION NOT NULL DEFAULT 0;
        ALTER TABLE gateway_keys ADD COLUMN windows TEXT;
        UPDATE gateway_keys SET
            running = (SELECT count(*) FROM gateway_ledger WHERE key_id = gateway_keys.id AND status = 'running'),
            reserved = (SELECT coalesce(sum(reserved), 0) FROM gateway_ledger
                        WHERE key_id = gateway_keys.id AND status = 'running'),
            windows = (SELECT json_agg(json_build_array(second, requests, tokens) ORDER BY second)::text FROM (
                SELECT second, sum(requests) AS requests, sum(tokens) AS tokens FROM (
                    SELECT floor(started_at)::bigint AS second, 1 AS requests, 0 AS tokens FROM gateway_ledger
                    WHERE key_id = gateway_keys.id AND started_at > extract(epoch FROM now()) - 61
                    UNION ALL
                    SELECT floor(ended_at)::bigint, 0, coalesce(input_tokens, 0) + coalesce(output_tokens, 0)
                    FROM gateway_ledger
                    WHERE key_id = gateway_keys.id AND ended_at > extract(epoch FROM now()) - 61
                ) AS events GROUP BY second
            ) AS seconds)
        """,
    ),
    (
        4,
        """
        CREATE TABLE gateway_responses (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            previous_id TEXT,
            route TEXT NOT NULL,
            model TEXT NOT NULL,
            source TEXT,
            replay_state TEXT,
            input_items TEXT NOT NULL,
            response TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX gateway_responses_expires ON gateway_responses (expires_at)
        """,
    ),
)
"""Versioned schema migrations for PostgreSQL (same versions as SQLite's)."""

_MIGRATION_LOCK: Final = 0x68617231  # pg_advisory_xact_lock id: one migrating process at a time


def numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1, $2 …``."""
    counter = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(counter)}", sql)


class _PgTx:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        row = await self.conn.fetchrow(numbered(sql), *args)
        return tuple(row) if row is not None else None

    async def all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in await self.conn.fetch(numbered(sql), *args)]

    async def run(self, sql: str, *args: Any) -> int:
        status: str = await self.conn.execute(numbered(sql), *args)
        tail = status.rsplit(" ", 1)[-1]
        return int(tail) if tail.isdigit() else 0


class PostgresStore(SqlStore):
    """State in PostgreSQL at ``dsn`` (``postgresql://user:password@host:port/db``; a secret)."""

    lock_clause = " FOR UPDATE"
    migrations = MIGRATIONS_POSTGRES
    time_type = "DOUBLE PRECISION"
    migration_lock = f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"

    def __init__(self, dsn: str, *, timeout: float = 5.0, pool_size: int = 10, lease: float = LEASE) -> None:
        super().__init__(lease=lease)
        self._dsn = dsn
        self.timeout = timeout
        self.pool_size = pool_size
        self.description = "PostgreSQL state store"
        self._pool: Any = None
        self._pool_lock = anyio.Lock()

    def __repr__(self) -> str:
        return "PostgresStore(<dsn hidden>)"

    async def _get_pool(self) -> Any:
        async with self._pool_lock:
            if self._pool is None:
                import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information

                self._pool = await asyncpg.create_pool(
                    self._dsn, min_size=0, max_size=self.pool_size, timeout=self.timeout, command_timeout=self.timeout
                )
            return self._pool

    async def _reset_pool(self, broken: Any = None) -> None:
        """Drop the pool (``broken``: only while it is still that pool, not one made since)."""
        async with self._pool_lock:
            if broken is not None and self._pool is not broken:
                return  # a connection of a pool already replaced failed: the new pool stays
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.terminate()  # drops the broken connections at once, without waiting on them

    async def transaction(self, work: Callable[[Tx], Awaitable[T]], *, write: bool = True) -> T:
        """Run ``work`` in one transaction on a pooled connection.

        Raises:
            GatewayError: 503 for every database fault: unreachable, slower than twice ``timeout``,
                an SQL error, or a connection broken under a statement (asyncpg's
                ``InternalClientError`` when the pool was terminated while the statement ran:
                another request's connection fault reset it). Connection faults reset the pool.
        """
        import asyncpg

        pool = None
        try:
            with anyio.fail_after(self.timeout * 2):
                pool = await self._get_pool()
                async with pool.acquire() as conn, conn.transaction():
                    return await work(_PgTx(conn))
        except (
            OSError,
            TimeoutError,
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
        ) as exc:
            connection_fault = not isinstance(exc, asyncpg.PostgresError) or isinstance(
                exc, asyncpg.PostgresConnectionError
            )
            if connection_fault and pool is not None:
                await self._reset_pool(pool)
            raise unavailable(self.description, exc) from exc

    async def aclose(self) -> None:
        async with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout):
                await pool.close()
