"""The ``balance`` middleware's state in the gateway's store: pool members' in-flight counts,
rpm/tpm windows and cooldowns shared by every worker and host of one store.

:class:`StoreBalanceState` implements :class:`harness_middleware.balance.BalanceState` over the
gateway's :class:`~harness_gateway.store.SqlStore` (SQLite or PostgreSQL, its transactions and
503 errors as they are), in tables of its own created by their own versioned migrations
(``balance_schema``; statements SQLite and PostgreSQL both accept). ``harness serve`` registers
it with :func:`harness_middleware.balance.share_state` when it starts (and removes it when it
stops), so a pool's limits hold for the whole gateway, not per process.

Exactness: an admission is one write transaction that first locks the member's row (SQLite
``BEGIN IMMEDIATE``, PostgreSQL ``SELECT … FOR UPDATE``), then counts and decides with
:func:`harness_middleware.balance.admission_wait` (the same rule as in one process), so
concurrent admissions of one member, from any process or host, are decided one after the other:
``rpm`` (streams started in the last 60 s) and ``max_in_flight`` hold exactly, ``tpm`` counts
the tokens of streams that ended in the window (a running stream's tokens count once it ends).
Bound: a stream whose process died (``kill -9``) stops counting in flight after
:data:`FLIGHT_LEASE` seconds, and a stream running longer than that stops counting too.
Latency samples stay per process (each worker measures its own streams).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeVar

from harness_core import LlmError
from harness_gateway.errors import GatewayError
from harness_gateway.store import SqlStore, Tx
from harness_middleware.balance import WINDOW, Limits, MemberLoad, admission_wait

__all__ = ["FLIGHT_LEASE", "MIGRATIONS", "StoreBalanceState"]

T = TypeVar("T")

FLIGHT_LEASE: Final = 600.0
"""Seconds a started stream counts as in flight at most (a dead process's streams free up then)."""

MIGRATIONS: Final = (
    (
        1,
        """
        CREATE TABLE balance_members (
            member TEXT PRIMARY KEY,                         -- the member's target, route[/model]
            cooling_until DOUBLE PRECISION NOT NULL DEFAULT 0 -- unix seconds
        );
        CREATE TABLE balance_streams (
            id TEXT PRIMARY KEY,
            member TEXT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION,                       -- NULL while it runs
            tokens INTEGER NOT NULL DEFAULT 0,               -- input + output, once it ended
            lease_until DOUBLE PRECISION NOT NULL            -- counts in flight until then at most
        );
        CREATE INDEX balance_streams_member ON balance_streams (member, started_at)
        """,
    ),
)
"""``(version, script)`` migrations of the balance tables (``balance_schema``)."""


def _as_llm_error(exc: GatewayError) -> LlmError:
    return LlmError("OVERLOADED", f"balance: {exc.message}", retry_after=exc.retry_after)


class StoreBalanceState:
    """:class:`~harness_middleware.balance.BalanceState` in ``store`` (see the module doc).

    Every method raises :class:`~harness_core.errors.LlmError` ``OVERLOADED`` (carrying the
    store's 503 message, which names no DSN) when the database fails.
    """

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._migrated = False

    async def migrate(self) -> int:
        """Create or upgrade the balance tables (once per process); the schema version in place."""
        if not self._migrated:
            await self.store.apply_migrations("balance_schema", MIGRATIONS)
            self._migrated = True
        return MIGRATIONS[-1][0]

    async def loads(self, members: Sequence[str], now: float) -> Sequence[MemberLoad]:
        """See :meth:`harness_middleware.balance.BalanceState.loads`."""
        marks = ", ".join("?" for _ in members)
        since = now - WINDOW

        async def work(tx: Tx) -> dict[str, MemberLoad]:
            found = {member: MemberLoad() for member in members}
            rows = await tx.all(
                "SELECT member, coalesce(sum(CASE WHEN started_at > ? THEN 1 ELSE 0 END), 0),"
                " coalesce(sum(CASE WHEN ended_at > ? THEN tokens ELSE 0 END), 0),"
                " coalesce(sum(CASE WHEN ended_at IS NULL AND lease_until > ? THEN 1 ELSE 0 END), 0)"
                f" FROM balance_streams WHERE member IN ({marks}) GROUP BY member",
                since, since, now, *members,
            )  # fmt: skip
            for member, requests, tokens, in_flight in rows:
                load = found[member]
                load.requests, load.tokens, load.in_flight = int(requests), int(tokens), int(in_flight)
            for member, until in await tx.all(
                f"SELECT member, cooling_until FROM balance_members WHERE member IN ({marks})", *members
            ):
                found[member].cooling_until = float(until)
            return found

        found = await self._run(work, write=False)
        return [found[member] for member in members]

    async def acquire(self, member: str, limits: Limits, now: float) -> str | float:
        """See :meth:`harness_middleware.balance.BalanceState.acquire` (the ticket is the stream's row id)."""
        since = now - WINDOW
        lock = self.store.lock_clause

        async def work(tx: Tx) -> str | float:
            await tx.run("INSERT INTO balance_members (member) VALUES (?) ON CONFLICT (member) DO NOTHING", member)
            await tx.one(f"SELECT member FROM balance_members WHERE member = ?{lock}", member)
            await tx.run(
                "DELETE FROM balance_streams WHERE member = ? AND started_at <= ?"
                " AND ((ended_at IS NOT NULL AND ended_at <= ?) OR lease_until <= ?)",
                member, since, since, now,
            )  # fmt: skip
            row = await tx.one(
                "SELECT coalesce(sum(CASE WHEN started_at > ? THEN 1 ELSE 0 END), 0),"
                " min(CASE WHEN started_at > ? THEN started_at END),"
                " coalesce(sum(CASE WHEN ended_at > ? THEN tokens ELSE 0 END), 0),"
                " min(CASE WHEN ended_at > ? THEN ended_at END),"
                " coalesce(sum(CASE WHEN ended_at IS NULL AND lease_until > ? THEN 1 ELSE 0 END), 0)"
                " FROM balance_streams WHERE member = ?",
                since, since, since, since, now, member,
            )  # fmt: skip
            assert row is not None, "an aggregate without GROUP BY returns one row"
            requests, oldest_start, tokens, oldest_end, running = row
            load = MemberLoad(in_flight=int(running), requests=int(requests), tokens=int(tokens))
            wait = admission_wait(limits, load, oldest_start, oldest_end, now)
            if wait > 0:
                return wait
            ticket = uuid.uuid4().hex
            await tx.run(
                "INSERT INTO balance_streams (id, member, started_at, lease_until) VALUES (?, ?, ?, ?)",
                ticket, member, now, now + FLIGHT_LEASE,
            )  # fmt: skip
            return ticket

        return await self._run(work)

    async def release(self, member: str, ticket: str, tokens: int, now: float) -> None:
        """See :meth:`harness_middleware.balance.BalanceState.release`."""

        async def work(tx: Tx) -> None:
            await tx.run("UPDATE balance_streams SET ended_at = ?, tokens = ? WHERE id = ?", now, tokens, ticket)

        await self._run(work)

    async def cool(self, member: str, until: float) -> None:
        """See :meth:`harness_middleware.balance.BalanceState.cool`."""

        async def work(tx: Tx) -> None:
            await tx.run(
                "INSERT INTO balance_members (member, cooling_until) VALUES (?, ?) ON CONFLICT (member) DO UPDATE"
                " SET cooling_until = CASE WHEN excluded.cooling_until > balance_members.cooling_until"
                " THEN excluded.cooling_until ELSE balance_members.cooling_until END",
                member, until,
            )  # fmt: skip

        await self._run(work)

    async def _run(self, work: Callable[[Tx], Awaitable[T]], *, write: bool = True) -> T:
        try:
            await self.migrate()
            return await self.store.transaction(work, write=write)
        except GatewayError as exc:
            raise _as_llm_error(exc) from exc
