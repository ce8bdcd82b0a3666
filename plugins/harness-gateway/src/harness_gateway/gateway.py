"""The state one gateway process serves with (:class:`Gateway`): the runtime holder, the state
store, metrics, the observers, the usage recorder, the write-behind queues and the key policy
(:mod:`harness_gateway.auth`).
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request

from harness_gateway.auth import authenticate, may_scrape
from harness_gateway.keys import KeyRecord
from harness_gateway.metrics import GatewayMetrics
from harness_gateway.observe import Observer
from harness_gateway.recorder import UsageRecorder
from harness_gateway.runtime import RuntimeHolder
from harness_gateway.store import SqlStore
from harness_gateway.writebehind import WriteBehind

__all__ = ["Gateway"]


class Gateway:
    """The state one gateway process serves with: the runtime holder, the store, metrics, policy.

    Args:
        holder: the current runtime (swapped on reload).
        store: keys, limits and ledger.
        keys_required: refuse requests without a valid key (401).
        master_key: the admin key, or ``None`` (then ``/admin`` always answers 401).
        metrics: what ``/metrics`` serves (default: this process's own counts).
        metrics_protected: ``/metrics`` answers 401 without the master key or ``metrics_token``.
        metrics_token: a bearer token that may read ``/metrics`` (and nothing else), or ``None``.
    """

    def __init__(
        self,
        holder: RuntimeHolder,
        store: SqlStore,
        *,
        keys_required: bool,
        master_key: str | None,
        metrics: GatewayMetrics | None = None,
        metrics_protected: bool = False,
        metrics_token: str | None = None,
    ) -> None:
        self.holder = holder
        self.metrics_protected = metrics_protected
        self.metrics_token = metrics_token
        self.store = store
        self.keys_required = keys_required
        self.master_key = master_key
        self.metrics = metrics if metrics is not None else GatewayMetrics()
        self.observers: list[Observer] = []
        """Told about every generation (:mod:`harness_gateway.observe`); the console registers here."""
        self.first_settled = anyio.Event()
        """Set once the first admitted request was settled (:func:`~harness_gateway.accounting.settle_row`):
        what its route builds and imports on first use exists by then (the HTTP client, its
        transport, the price table), and ``harness serve`` settles its heap again
        (:func:`~harness_gateway.server.settle_heap`)."""
        self.recorder = UsageRecorder()
        """Records the usage so far of every running generation (started by the lifespan)."""
        self.writers: list[WriteBehind[Any]] = []
        """Write-behind queues (the console's request records registers here): the lifespan runs
        each one's writer task, and the shutdown flushes them (:meth:`flush_writers`)."""
        self._migrated = False

    def served_routes(self) -> set[str]:
        """The routes the current runtime serves: generation and embedding routes (what a key's
        ``routes`` may name: :meth:`KeySpec.unserved <harness_gateway.keys.KeySpec.unserved>`)."""
        harness = self.holder.current.harness
        return {*harness.routes(), *harness.embed_routes()}

    async def flush_writers(self) -> None:
        """Write what the write-behind queues (:attr:`writers`) still hold, once their tasks were
        cancelled and the streams in flight ended (a database fault is counted and logged by each)."""
        for writer in self.writers:
            await writer.flush()

    async def ensure_store(self) -> None:
        """Apply the store's migrations once (retried on every request while the database is down).

        Raises:
            GatewayError: 503 while the database cannot be reached.
        """
        if not self._migrated:
            await self.store.migrate()
            self._migrated = True

    async def authenticate(self, request: Request) -> KeyRecord | bool | None:
        """The caller's key record; ``True`` for the master key; ``None`` when anonymous is allowed.

        A key this gateway issued and then revoked (or that expired) is refused even where keys are
        optional (loopback): revoking must take effect everywhere. An unknown or missing key is
        anonymous there, since SDKs always send some key.

        Raises:
            GatewayError: 401 for a revoked or expired key; where keys are required, also for a
                missing or unknown one.
        """
        await self.ensure_store()
        return await authenticate(self.store, request, master_key=self.master_key, keys_required=self.keys_required)

    def may_scrape(self, request: Request) -> bool:
        """Whether ``request`` may read ``/metrics``: always when unprotected, else with the master
        key or the metrics token (compared in constant time; the state store is not asked, so a
        scrape works while the database is down)."""
        return may_scrape(request, protected=self.metrics_protected, secrets=(self.master_key, self.metrics_token))
