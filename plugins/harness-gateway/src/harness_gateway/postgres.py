"""The PostgreSQL state store (asyncpg): keys, spend, limits and ledger shared by many workers and hosts.

Same statements and decisions as :class:`~harness_gateway.sqlite.SQLiteStore`
(:class:`~harness_gateway.store.SqlStore`), but for the hot path: an admission and a settlement
are each one statement (:data:`FUNCTIONS_POSTGRES`: ``gateway_admit``, ``gateway_settle``), one
round trip that locks the key row (``SELECT … FOR UPDATE``) only inside the server, so limits
hold across every process on the database and the lock is never held across a client round
trip (docs/gateway.md#admission-counters-not-scans). The
connection pool is created on first use and rebuilt after a failure, so the gateway answers 503
while PostgreSQL is away and recovers by itself when it is back
(https://magicstack.github.io/asyncpg/current/api/index.html).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import anyio

from harness_gateway.errors import GatewayError
from harness_gateway.request import decimal
from harness_gateway.store import (
    ENDED_ROW,
    LEASE,
    LIVE_NAME_INDEX,
    SqlStore,
    Status,
    Tx,
    decide,
    key_record,
    revoked,
    unavailable,
)

__all__ = ["FUNCTIONS_POSTGRES", "MIGRATIONS_POSTGRES", "PostgresStore"]

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
    (
        5,
        """
        UPDATE gateway_keys SET name = name || ' #' || id
        WHERE revoked_at IS NULL AND EXISTS (
            SELECT 1 FROM gateway_keys AS older
            WHERE older.name = gateway_keys.name AND older.revoked_at IS NULL
              AND (older.created_at < gateway_keys.created_at
                   OR (older.created_at = gateway_keys.created_at AND older.id < gateway_keys.id))
        );
        CREATE UNIQUE INDEX gateway_keys_live_name ON gateway_keys (name) WHERE revoked_at IS NULL
        """,
    ),
)
"""Versioned schema migrations for PostgreSQL (same versions as SQLite's)."""

_ADMIT_ANSWER: Final = """
        o_outcome TEXT, o_reserve DOUBLE PRECISION, o_requests BIGINT, o_oldest_start DOUBLE PRECISION,
        o_tokens BIGINT, o_oldest_end DOUBLE PRECISION, o_running INTEGER, o_reserved DOUBLE PRECISION,
        o_max_cost DOUBLE PRECISION, o_id TEXT, o_name TEXT, o_routes TEXT, o_budget DOUBLE PRECISION,
        o_rpm INTEGER, o_tpm INTEGER, o_expires_at DOUBLE PRECISION, o_created_at DOUBLE PRECISION,
        o_revoked_at DOUBLE PRECISION, o_spent DOUBLE PRECISION
    """
"""What every signature of ``gateway_admit`` answers (one row): the outcome, the reservation, the
window and counters it decided on, and the key row (:func:`~harness_gateway.store.key_record`'s columns)."""


FUNCTIONS_POSTGRES: Final = (
    """
    CREATE OR REPLACE FUNCTION gateway_slide(p_windows TEXT, p_now DOUBLE PRECISION) RETURNS JSONB
    LANGUAGE sql IMMUTABLE AS $fn$
        SELECT coalesce(jsonb_agg(entry ORDER BY position), '[]'::jsonb)
        FROM jsonb_array_elements(coalesce(nullif(p_windows, ''), '[]')::jsonb) WITH ORDINALITY AS t(entry, position)
        WHERE (entry->>0)::bigint >= floor(p_now)::bigint - 60
    $fn$
    """,
    """
    CREATE OR REPLACE FUNCTION gateway_window_add(
        p_entries JSONB, p_now DOUBLE PRECISION, p_requests BIGINT, p_tokens BIGINT
    ) RETURNS TEXT LANGUAGE plpgsql IMMUTABLE AS $fn$
    DECLARE
        v_entries JSONB := p_entries;
        v_count INTEGER := jsonb_array_length(p_entries);
        v_second BIGINT := floor(p_now)::bigint;
        v_newest JSONB;
    BEGIN
        IF v_count > 0 AND (v_entries->(v_count - 1)->>0)::bigint >= v_second THEN
            v_newest := v_entries->(v_count - 1);
            v_entries := jsonb_set(v_entries, ARRAY[(v_count - 1)::text], jsonb_build_array(
                v_newest->0, (v_newest->>1)::bigint + p_requests, (v_newest->>2)::bigint + p_tokens));
        ELSE
            v_entries := v_entries || jsonb_build_array(jsonb_build_array(v_second, p_requests, p_tokens));
        END IF;
        RETURN replace(v_entries::text, ' ', '');  -- integers only: the compact text SQLite's column holds
    END
    $fn$
    """,
    """
    CREATE OR REPLACE FUNCTION gateway_admit(
        p_ticket TEXT, p_key TEXT, p_route TEXT, p_model TEXT, p_now DOUBLE PRECISION, p_owner TEXT,
        p_lease_until DOUBLE PRECISION, p_bound DOUBLE PRECISION, p_floor DOUBLE PRECISION
    ) RETURNS TABLE ("""
    + _ADMIT_ANSWER
    + """) LANGUAGE plpgsql AS $fn$
    DECLARE
        v_windows TEXT;
        v_live JSONB;
        v_estimate DOUBLE PRECISION;
        v_left DOUBLE PRECISION;
        v_room DOUBLE PRECISION;
        v_fits BOOLEAN;
    BEGIN
        SELECT g.id, g.name, g.routes, g.budget, g.rpm, g.tpm, g.expires_at, g.created_at, g.revoked_at, g.spent,
               g.max_cost, g.running, g.reserved, g.windows
          INTO o_id, o_name, o_routes, o_budget, o_rpm, o_tpm, o_expires_at, o_created_at, o_revoked_at, o_spent,
               o_max_cost, o_running, o_reserved, v_windows
          FROM gateway_keys g WHERE g.id = p_key FOR UPDATE;
        IF NOT FOUND OR o_revoked_at IS NOT NULL THEN
            o_outcome := 'revoked';
            RETURN NEXT;
            RETURN;
        END IF;
        v_live := gateway_slide(v_windows, p_now);
        SELECT coalesce(sum((entry->>1)::bigint), 0), coalesce(sum((entry->>2)::bigint), 0),
               (array_agg((entry->>0)::double precision + 1 ORDER BY position)
                   FILTER (WHERE (entry->>1)::bigint <> 0))[1],
               (array_agg((entry->>0)::double precision + 1 ORDER BY position)
                   FILTER (WHERE (entry->>2)::bigint <> 0))[1]
          INTO o_requests, o_tokens, o_oldest_start, o_oldest_end
          FROM jsonb_array_elements(v_live) WITH ORDINALITY AS t(entry, position);
        o_outcome := 'admitted';
        o_reserve := 0;
        IF o_rpm IS NOT NULL AND o_requests >= o_rpm THEN
            o_outcome := 'refused';
        ELSIF o_tpm IS NOT NULL AND o_tokens >= o_tpm THEN
            o_outcome := 'refused';
        ELSIF o_budget IS NOT NULL THEN
            v_estimate := coalesce(p_bound, greatest(coalesce(o_max_cost, 0), coalesce(p_floor, 0)));
            v_left := o_budget - o_spent;
            v_room := v_left - o_reserved;
            -- an estimate of 0 needs only an unspent budget
            v_fits := (v_estimate = 0 AND v_left > 1e-9::double precision)
                OR (v_estimate <> 0 AND v_room > 1e-9::double precision
                    AND v_estimate <= v_room + 1e-9::double precision);
            IF NOT v_fits OR (p_bound IS NULL AND coalesce(o_max_cost, 0) <= 0 AND o_running > 0) THEN
                o_outcome := 'refused';
            ELSE
                o_reserve := v_estimate;
            END IF;
        END IF;
        IF o_outcome = 'admitted' THEN
            UPDATE gateway_keys g SET running = g.running + 1, reserved = g.reserved + o_reserve,
                windows = CASE WHEN o_rpm IS NOT NULL THEN gateway_window_add(v_live, p_now, 1, 0) ELSE v_windows END
            WHERE g.id = p_key;
            INSERT INTO gateway_ledger (id, key_id, route, model, started_at, status, reserved, owner, lease_until)
            VALUES (p_ticket, p_key, p_route, p_model, p_now, 'running', o_reserve, p_owner, p_lease_until);
        END IF;
        RETURN NEXT;
    END
    $fn$
    """,
    # the signatures of gateways before the request's floor and before its bound: a process of
    # one still running (a rolling upgrade) admits by the same rule, without them
    """
    CREATE OR REPLACE FUNCTION gateway_admit(
        p_ticket TEXT, p_key TEXT, p_route TEXT, p_model TEXT, p_now DOUBLE PRECISION, p_owner TEXT,
        p_lease_until DOUBLE PRECISION, p_bound DOUBLE PRECISION
    ) RETURNS TABLE ("""
    + _ADMIT_ANSWER
    + """) LANGUAGE sql AS $fn$
        SELECT * FROM gateway_admit($1, $2, $3, $4, $5, $6, $7, $8, 0::double precision)
    $fn$
    """,
    """
    CREATE OR REPLACE FUNCTION gateway_admit(
        p_ticket TEXT, p_key TEXT, p_route TEXT, p_model TEXT, p_now DOUBLE PRECISION, p_owner TEXT,
        p_lease_until DOUBLE PRECISION
    ) RETURNS TABLE ("""
    + _ADMIT_ANSWER
    + """) LANGUAGE sql AS $fn$
        SELECT * FROM gateway_admit($1, $2, $3, $4, $5, $6, $7, NULL::double precision, 0::double precision)
    $fn$
    """,
    """
    CREATE OR REPLACE FUNCTION gateway_settle(
        p_ticket TEXT, p_key TEXT, p_status TEXT, p_input BIGINT, p_output BIGINT, p_cost DOUBLE PRECISION,
        p_now DOUBLE PRECISION
    ) RETURNS INTEGER LANGUAGE plpgsql AS $fn$
    DECLARE
        v_key TEXT := p_key;
        v_keyed BOOLEAN := FALSE;
        v_tpm INTEGER;
        v_windows TEXT;
        v_old RECORD;
        v_tokens BIGINT := coalesce(p_input, 0) + coalesce(p_output, 0);
        v_amount DOUBLE PRECISION;
        v_released DOUBLE PRECISION;
        v_ends INTEGER;
    BEGIN
        IF v_key IS NULL THEN  -- a row this process did not admit
            SELECT coalesce(l.key_id, '') INTO v_key FROM gateway_ledger l WHERE l.id = p_ticket;
        END IF;
        IF coalesce(v_key, '') <> '' THEN  -- the key row first (lock order)
            SELECT g.tpm, g.windows INTO v_tpm, v_windows FROM gateway_keys g WHERE g.id = v_key FOR UPDATE;
            v_keyed := FOUND;
        END IF;
        SELECT l.status, coalesce(l.cost, 0) AS cost, l.reserved,
               coalesce(l.input_tokens, 0) + coalesce(l.output_tokens, 0) AS tokens
          INTO v_old FROM gateway_ledger l WHERE l.id = p_ticket;
        IF NOT FOUND THEN
            RETURN 0;
        END IF;
        UPDATE gateway_ledger l SET status = p_status, ended_at = p_now, input_tokens = p_input,
            output_tokens = p_output, cost = p_cost WHERE l.id = p_ticket;
        IF NOT v_keyed THEN
            RETURN 1;
        END IF;
        IF v_old.status = 'running' THEN
            v_amount := p_cost; v_released := v_old.reserved; v_ends := 1;
        ELSE  -- a reaper charged what was recorded: only the difference now
            v_amount := p_cost - v_old.cost; v_released := 0; v_ends := 0; v_tokens := v_tokens - v_old.tokens;
        END IF;
        IF v_tpm IS NOT NULL AND v_tokens <> 0 THEN
            v_windows := gateway_window_add(gateway_slide(v_windows, p_now), p_now, 0, v_tokens);
        END IF;
        UPDATE gateway_keys g SET spent = g.spent + v_amount,
            max_cost = CASE WHEN g.max_cost < p_cost THEN p_cost ELSE g.max_cost END,
            reserved = CASE WHEN g.running > v_ends THEN g.reserved - v_released ELSE 0 END,
            running = CASE WHEN g.running > v_ends THEN g.running - v_ends ELSE 0 END,
            windows = v_windows
        WHERE g.id = v_key;
        RETURN 1;
    END
    $fn$
    """,
)
"""The server-side functions of the hot path, (re)installed by :meth:`PostgresStore.migrate` with
``CREATE OR REPLACE`` (not a schema version: they hold no data; a changed signature is a new
function beside the old one, so the old signature stays installed and answers by the same rule:
``gateway_admit`` of 7 arguments, before the request's ``bound``, and of 8, before its
``floor``, call the one of 9 with ``NULL`` and 0, for the processes of an older gateway still
running on the database). ``gateway_admit`` and
``gateway_settle`` each do in one statement (one round trip, the key row locked only inside it)
what :meth:`SqlStore._open` and :meth:`SqlStore._close` do in a transaction: ``gateway_admit``
decides with :func:`~harness_gateway.store.decide`'s rule (the test
``test_gw_pg_functions.py`` runs both over generated cases) and answers ``admitted``,
``revoked`` or ``refused`` with what it decided on, from which :func:`decide` builds the 429;
``gateway_slide`` and ``gateway_window_add`` are ``_slide`` and ``_add`` on the ``windows``
column."""

_MIGRATION_LOCK: Final = 0x68617231  # pg_advisory_xact_lock id: one migrating process at a time


def numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1, $2 …``."""
    counter = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(counter)}", sql)


_ENDED_ROW_PG: Final = numbered(ENDED_ROW)  # the ledger row of a request without a key, as it ended


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
        return decimal(tail) or 0


async def _keep_session(conn: Any) -> None:
    """The pool's reset of a released connection: nothing. asyncpg's default runs one more round
    trip per use (``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``) undoing session
    state this store never makes (it takes transaction-scoped advisory locks only, no cursors,
    ``LISTEN`` or ``SET``); an open transaction is still rolled back by asyncpg before this
    (https://magicstack.github.io/asyncpg/current/api/index.html#asyncpg.pool.create_pool)."""


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
                    self._dsn, min_size=0, max_size=self.pool_size, timeout=self.timeout,
                    command_timeout=self.timeout, reset=_keep_session,
                )  # fmt: skip
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
            GatewayError: 503 for every database fault (:meth:`_connected`).
        """

        async def inside(conn: Any) -> T:
            async with conn.transaction():
                return await work(_PgTx(conn))

        return await self._connected(inside)

    async def _connected(self, use: Callable[[Any], Awaitable[T]]) -> T:
        """``use`` a pooled asyncpg connection (one statement outside a transaction is one round
        trip, committed by itself).

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
                async with pool.acquire() as conn:
                    return await use(conn)
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

    def violates_live_name(self, exc: BaseException) -> bool:
        import asyncpg

        return isinstance(exc, asyncpg.UniqueViolationError) and exc.constraint_name == LIVE_NAME_INDEX

    async def migrate(self) -> int:
        """Apply missing schema migrations, then (re)install :data:`FUNCTIONS_POSTGRES` under the
        migration lock (two processes starting at once do not race on them); the schema version.

        Raises:
            GatewayError: 503 when the database fails.
        """
        schema = await super().migrate()

        async def install(tx: Tx) -> None:
            await tx.one(self.migration_lock)
            for statement in FUNCTIONS_POSTGRES:
                await tx.run(statement)

        await self.transaction(install)
        return schema

    async def _open(
        self,
        ticket: str,
        key_id: str,
        route: str,
        model: str,
        now: float,
        bound: float | None,
        floor: float = 0.0,
        unpriced: str | None = None,
    ) -> None:
        """Admit in one statement (``gateway_admit``; ``unpriced`` named in a refusal, :func:`decide`). Near the
        budget (``budget_exceeded``: a dead process's reservation may be in the way) the admission
        runs again as the recounting transaction of :meth:`SqlStore._open`.

        Raises:
            GatewayError: 429 (rate or budget, built by :func:`decide`), 401 (key revoked), 503.
        """
        lease_until = now + self.lease
        row = await self._connected(
            lambda conn: conn.fetchrow(
                "SELECT * FROM gateway_admit($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                ticket,
                key_id,
                route,
                model,
                now,
                self.owner,
                lease_until,
                bound,
                floor,
            )
        )
        outcome = row[0]
        if outcome == "admitted":
            return
        if outcome == "revoked":
            raise revoked()
        decision = decide(key_record(tuple(row)[9:]), (*tuple(row)[2:9], None), now, bound, floor, unpriced=unpriced)
        if isinstance(decision, GatewayError) and decision.code != "budget_exceeded":
            raise decision
        await super()._open(
            ticket, key_id, route, model, now, bound, floor, unpriced
        )  # near the budget: recount (rare)

    async def _write_ended(self, values: tuple[Any, ...]) -> None:
        """:meth:`SqlStore._write_ended` in one round trip (one statement, its own transaction)."""
        await self._connected(lambda conn: conn.execute(_ENDED_ROW_PG, *values))

    async def _close(
        self,
        ticket: str,
        known: str | None,
        status: Status,
        input_tokens: int | None,
        output_tokens: int | None,
        cost: float,
        moment: float,
    ) -> None:
        """Settle in one statement (``gateway_settle``: the same writes as :meth:`SqlStore._close`).

        Raises:
            GatewayError: 503 when the database fails.
        """
        await self._connected(
            lambda conn: conn.fetchval(
                "SELECT gateway_settle($1, $2, $3, $4, $5, $6, $7)",
                ticket,
                known,
                status,
                input_tokens,
                output_tokens,
                cost,
                moment,
            )
        )

    async def aclose(self) -> None:
        async with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout):
                await pool.close()
