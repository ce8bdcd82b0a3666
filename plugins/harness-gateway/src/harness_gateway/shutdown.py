"""The shutdown of a serving process of ``harness serve`` (the only one, or each worker of
``--workers N``): uvicorn's graceful shutdown made the gateway's drain.

On SIGINT / SIGTERM uvicorn stops accepting connections and waits for the requests in flight, up
to its ``timeout_graceful_shutdown``; then it cancels what is left (each cut stream's body ends
mid-answer, its generation recorded ``error`` without a code, and uvicorn logs every task's
``CancelledError``). :class:`DrainingServer` is uvicorn's server whose wait is the gateway's
drain: at ``drain_timeout`` (the current runtime's, read when the shutdown starts, so a reload's
value holds) the generations still running are aborted (its ``abort``:
:meth:`~harness_gateway.server.GatewayServer.abort_streams`; each ends with its dialect's
aborted end, code ``ABORTED``, recorded ``aborted`` and charged what it streamed), and uvicorn's
own bound, :data:`~harness_gateway.runtime.ABORT_GRACE` later (:func:`graceful_timeout`), cancels
only what an abort did not end. :func:`harness_gateway.server.serve` runs one in its process;
every worker of :class:`~harness_gateway.workers.WorkerSupervisor` runs one
(:class:`~harness_gateway.workers.WorkerProcess`).

uvicorn's shutdown: https://www.uvicorn.org/settings/#timeouts (``--timeout-graceful-shutdown``)
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Protocol

import uvicorn

from harness_gateway.runtime import ABORT_GRACE

__all__ = ["DrainingServer", "abort_worker_streams", "graceful_timeout", "worker_drain_timeout", "worker_serves"]


def graceful_timeout(drain_timeout: float) -> float:
    """uvicorn's ``timeout_graceful_shutdown`` for a gateway that drains for ``drain_timeout``
    seconds: :data:`~harness_gateway.runtime.ABORT_GRACE` more, the time the generations aborted
    at the drain timeout have to end (their terminal event, their partial usage)."""
    return drain_timeout + ABORT_GRACE


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose shutdown aborts the generations still running at the drain timeout
    (``abort``, called once then) before uvicorn's own bound cancels anything. ``config``'s
    ``timeout_graceful_shutdown`` is :func:`graceful_timeout` of the drain timeout at the start;
    ``current_drain`` (when given) is the drain timeout in force when the shutdown starts (the
    current runtime's: a reload may have changed it; ``None`` before the app started), which
    then replaces it."""

    def __init__(
        self,
        config: uvicorn.Config,
        abort: Callable[[], None],
        current_drain: Callable[[], float | None] | None = None,
    ) -> None:
        super().__init__(config)
        self.abort = abort
        self.current_drain = current_drain

    @property
    def drain_timeout(self) -> float:
        """Seconds from the start of the shutdown to the abort: uvicorn's bound less
        :data:`~harness_gateway.runtime.ABORT_GRACE` (the inverse of :func:`graceful_timeout`)."""
        bound = self.config.timeout_graceful_shutdown
        assert bound is not None, "a draining server's config sets timeout_graceful_shutdown (graceful_timeout)"
        return bound - ABORT_GRACE

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown (stop accepting, wait for the requests in flight, cancel what is left
        after its bound), with ``abort`` called at the drain timeout meanwhile (the current one:
        ``current_drain``)."""
        drain = self.current_drain() if self.current_drain is not None else None
        if drain is not None:
            self.config.timeout_graceful_shutdown = graceful_timeout(drain)  # type: ignore[assignment]
        timer = asyncio.get_running_loop().call_later(self.drain_timeout, self.abort)
        try:
            await super().shutdown(sockets)
        finally:
            timer.cancel()


class _Draining(Protocol):
    def abort_streams(self) -> None: ...

    def drain_timeout(self) -> float | None: ...


_worker_apps: list[_Draining] = []
"""The app of this worker process (:func:`worker_serves`; none before uvicorn's server made it)."""


def worker_serves(app: _Draining) -> None:
    """In a worker process: ``app`` (its :class:`~harness_gateway.server.GatewayServer`, made by
    :func:`~harness_gateway.server.worker_app`) is what :func:`abort_worker_streams` aborts."""
    _worker_apps[:] = [app]


def abort_worker_streams() -> None:
    """In a worker process: abort the generations its app still runs (its ``abort_streams``); the
    ``abort`` of the worker's :class:`DrainingServer` (:class:`~harness_gateway.workers.WorkerProcess`),
    called at the drain timeout of its shutdown. Nothing to abort before the app was made."""
    for app in _worker_apps:
        app.abort_streams()


def worker_drain_timeout() -> float | None:
    """In a worker process: the drain timeout of its app's current runtime (its
    ``drain_timeout()``), the ``current_drain`` of the worker's :class:`DrainingServer`; ``None``
    before the app was made (or started)."""
    return next((app.drain_timeout() for app in _worker_apps), None)
