"""Accounting one admitted request, however it ends: its ledger row recorded while it runs
(:data:`RECORD_EVERY`) and settled at the end (:func:`settle_row`), and the observers told
(:func:`start_watches`). Shared by generations (:mod:`harness_gateway.relay`) and embedding calls
(:mod:`harness_gateway.embedding`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Final

import anyio
import anyio.lowlevel

from harness_core import TokenUsage
from harness_gateway.errors import GatewayError
from harness_gateway.gateway import Gateway
from harness_gateway.observe import RunInfo, RunWatch
from harness_gateway.runtime import GatewayRuntime
from harness_gateway.store import Status

if TYPE_CHECKING:
    from harness_gateway.embedding import EmbeddingRun
    from harness_gateway.relay import Relay

__all__ = ["RECORD_EVERY", "settle_row", "start_watches"]

logger = logging.getLogger("harness_gateway")


RECORD_EVERY: Final = 1.0
"""Seconds between two records of a running stream's usage so far in its ledger row (only when it
grew): what a reaper charges should this process die (:meth:`SqlStore.record`)."""


async def settle_row(
    gateway: Gateway,
    runtime: GatewayRuntime,
    ticket: str,
    status: Status,
    usage: TokenUsage | None,
    cost: float,
    request_id: str,
) -> None:
    """Settle ledger row ``ticket`` (:meth:`SqlStore.settle`, bounded by twice ``db_timeout``);
    when the store fails or is too slow, keep the settlement for a retry (:meth:`SqlStore.defer`)
    and log it as an error naming the request, the row, its status and its cost (USD). Never
    raises. Sets :attr:`Gateway.first_settled`."""
    try:
        with anyio.fail_after(runtime.config.db_timeout * 2):
            await gateway.store.settle(ticket, status, usage, cost)
    except (GatewayError, TimeoutError) as exc:
        gateway.store.defer(ticket, status, usage, cost)  # retried once the store answers
        logger.error(
            "request %s: could not settle ledger row %s (%s, %.6f USD), retried later: %s",
            request_id, ticket, status, cost, exc,
        )  # fmt: skip
    gateway.first_settled.set()


def start_watches(run: Relay | EmbeddingRun, request_id: str, dialect: str) -> list[RunWatch]:
    """Tell the gateway's observers that ``run`` (a generation or an embedding call, of API
    ``dialect``) starts; their watches, in observer order. The one place a :class:`RunInfo` is built."""
    key = run.key
    info = RunInfo(
        ticket=run.ticket,
        request_id=request_id,
        dialect=dialect,
        key_id=key.id if key is not None else None,
        key_name=key.name if key is not None else None,
        route=run.route,
        model=run.model,
        options=run.options,
        abort=run.abort,
        started_at=time.time(),
    )
    return [observer.started(info) for observer in run.gateway.observers]
