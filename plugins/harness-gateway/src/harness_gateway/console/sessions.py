"""Where the console's sign-in sessions live, so that signing out ends them everywhere.

A :class:`Sessions` keeps the digest (:func:`~harness_gateway.console.auth.session_digest`) of
every live session cookie with its expiry (unix seconds). The gateway keeps them in its state
store (:class:`StoreSessions`, table ``console_sessions``: every worker and host sees a sign-out);
``harness console`` (one process) in memory (:class:`MemorySessions`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from harness_gateway.console.records import RecordStore
from harness_gateway.store import Tx

__all__ = ["MemorySessions", "Sessions", "StoreSessions"]


class Sessions(Protocol):
    """Live console sessions by digest."""

    async def add(self, digest: str, expires_at: float) -> None:
        """Keep session ``digest`` until ``expires_at`` (unix seconds)."""

    async def alive(self, digest: str) -> bool:
        """Whether session ``digest`` was added, not removed, and has not expired."""

    async def remove(self, digest: str) -> None:
        """End session ``digest`` (signing out); unknown digests are ignored."""


class MemorySessions:
    """:class:`Sessions` in this process's memory (expired ones are dropped as new ones come);
    ``clock`` gives the time in unix seconds."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._live: dict[str, float] = {}
        self._clock = clock

    async def add(self, digest: str, expires_at: float) -> None:
        """Keep session ``digest`` until ``expires_at``."""
        now = self._clock()
        self._live = {d: until for d, until in self._live.items() if until > now}
        self._live[digest] = expires_at

    async def alive(self, digest: str) -> bool:
        """Whether session ``digest`` is live."""
        return self._live.get(digest, 0.0) > self._clock()

    async def remove(self, digest: str) -> None:
        """End session ``digest``."""
        self._live.pop(digest, None)


class StoreSessions:
    """:class:`Sessions` in the gateway's state store (``console_sessions``, created by the
    console's migrations). Every method raises :class:`~harness_gateway.errors.GatewayError`
    (503) when the database fails."""

    def __init__(self, records: RecordStore) -> None:
        self.records = records

    async def add(self, digest: str, expires_at: float) -> None:
        """Keep session ``digest`` until ``expires_at``; expired sessions are deleted."""
        await self.records.migrate()

        async def work(tx: Tx) -> None:
            await tx.run("DELETE FROM console_sessions WHERE expires_at <= ?", time.time())
            await tx.run("INSERT INTO console_sessions (digest, expires_at) VALUES (?, ?)", digest, expires_at)

        await self.records.store.transaction(work)

    async def alive(self, digest: str) -> bool:
        """Whether session ``digest`` is live."""
        await self.records.migrate()
        row = await self.records.store.transaction(
            lambda tx: tx.one(
                "SELECT 1 FROM console_sessions WHERE digest = ? AND expires_at > ?", digest, time.time()
            ),
            write=False,
        )
        return row is not None

    async def remove(self, digest: str) -> None:
        """End session ``digest``."""
        await self.records.migrate()
        await self.records.store.transaction(lambda tx: tx.run("DELETE FROM console_sessions WHERE digest = ?", digest))
