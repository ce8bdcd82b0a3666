"""Write-behind with group commit: rows that requests produce are queued, and one task per
gateway process (:meth:`WriteBehind.run`) writes every row queued while its previous
transaction ran in one transaction.

A request then pays an append to a list instead of a write transaction of its own (the console's
request record cost ~9 % of the gateway's main thread at 64 concurrent short requests that way:
BENCHMARKS.md, issue 25, cost per request). No timer is needed: under load the rows that arrive
during one transaction form the next batch; when idle a row is written on the event loop's next
turn.

Readers that must see what this process queued (the console's pages: read-your-writes) call
:meth:`WriteBehind.written` first. The queue is bounded; a row that finds it full, and every row
of a batch whose write fails, is dropped and counted (:attr:`WriteBehind.dropped`), never
raised to the request that produced it. The first drop of an outage is logged as an error, its
end (the next batch written) with the count of rows dropped meanwhile: one pair of log lines per
outage, never a row's content. The graceful shutdown writes what is left (:meth:`WriteBehind.flush`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final, Generic, TypeVar

import anyio
from anyio.abc import TaskStatus

from harness_gateway.errors import GatewayError

__all__ = ["BATCH_MAX", "QUEUE_BYTES_MAX", "QUEUE_MAX", "WriteBehind"]

logger = logging.getLogger("harness_gateway")

T = TypeVar("T")

BATCH_MAX: Final = 256
"""Most rows written in one transaction."""

QUEUE_MAX: Final = 10 * BATCH_MAX
"""Most rows waiting to be written; beyond, new rows are dropped (counted, logged)."""

QUEUE_BYTES_MAX: Final = 64 * 1024 * 1024
"""Most bytes of rows waiting to be written (as the ``size`` of :class:`WriteBehind` measures
them); beyond, new rows are dropped (counted, logged). Bounds the memory a stalled database
can make the queue hold."""


class WriteBehind(Generic[T]):
    """Rows queued by :meth:`put`, written in batches by ``write`` from one task (:meth:`run`).

    Args:
        write: writes one batch (a list of at most ``batch_max`` rows, oldest first) in one
            transaction; any exception drops the batch (counted and logged, see the module).
        what: what the rows are, for log lines (e.g. ``"console request records"``).
        batch_max: most rows per ``write``.
        limit: most rows queued; a row that finds the queue full is dropped.
        size: a row's size in bytes (``None``: rows are counted, not measured), for ``limit_bytes``.
        limit_bytes: most bytes queued (with ``size``); a row that would pass it is dropped.

    Without :meth:`run` running nothing is written until :meth:`written` or :meth:`flush` is
    awaited (callers that run without the task write directly: see :attr:`running`).
    """

    def __init__(
        self,
        write: Callable[[list[T]], Awaitable[None]],
        *,
        what: str,
        batch_max: int = BATCH_MAX,
        limit: int = QUEUE_MAX,
        size: Callable[[T], int] | None = None,
        limit_bytes: int = QUEUE_BYTES_MAX,
    ) -> None:
        self._write = write
        self.what = what
        self.batch_max = batch_max
        self.limit = limit
        self._size = size
        self.limit_bytes = limit_bytes
        self._bytes = 0  # of the rows queued (0 without ``size``)
        self._queue: deque[T] = deque()
        self._queued = 0  # rows ever queued
        self._settled = 0  # of them, written or dropped (they settle in queue order)
        self._wake: anyio.Event | None = None  # set by put() while the writer waits for rows
        self._progress: anyio.Event | None = None  # set when a batch settles, while a reader waits
        self._outage = 0  # rows dropped since the last batch written (0: no outage)
        self.dropped = 0
        """Rows dropped since this object was made (the queue was full, or their write failed)."""
        self.running = False
        """:meth:`run` is running: :meth:`put` rows are written by it."""

    def put(self, row: T) -> None:
        """Queue ``row`` for the writer; never blocks or raises (a full queue drops it: counted, logged)."""
        if len(self._queue) >= self.limit:
            self._drop(1, f"{self.limit} rows wait to be written (the database is slower than the requests)")
            return
        if self._size is not None:
            size = self._size(row)
            if self._bytes + size > self.limit_bytes:
                self._drop(1, f"{self.limit_bytes} bytes of rows wait to be written (the database is slower)")
                return
            self._bytes += size
        self._queue.append(row)
        self._queued += 1
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write every queued row until cancelled (started with ``TaskGroup.start`` by the
        gateway's lifespan); a batch being written when cancelled is finished first."""
        self.running = True
        task_status.started()
        try:
            while True:
                if not self._queue:
                    wake = self._wake = anyio.Event()
                    await wake.wait()
                await self._write_batch()
        finally:
            self.running = False
            self._wake = None

    async def written(self) -> None:
        """Return once every row queued before this call is written (or dropped). Without the
        writer task (not started, or the shutdown cancelled it) the caller writes them itself."""
        target = self._queued
        while self._settled < target:
            if self._queue and not self.running:
                await self._write_batch()
                continue
            progress = self._progress
            if progress is None:
                progress = self._progress = anyio.Event()
            await progress.wait()

    async def flush(self) -> None:
        """Write everything queued (the graceful shutdown, after the writer task was cancelled);
        when rows were dropped since the last batch written, their count is logged."""
        await self.written()
        if self._outage:
            logger.error("%s: %d were dropped since the last one written (at shutdown)", self.what, self._outage)
            self._outage = 0

    async def _write_batch(self) -> None:
        """Take the oldest ``batch_max`` rows and write them (shielded: a batch taken is written
        or dropped as a whole, never left half-done by a cancellation)."""
        batch = [self._queue.popleft() for _ in range(min(len(self._queue), self.batch_max))]
        if self._size is not None:
            self._bytes -= sum(map(self._size, batch))
        try:
            with anyio.CancelScope(shield=True):
                await self._write(batch)
        except GatewayError as exc:  # the store logged the cause (unavailable())
            self._drop(len(batch), f"the database failed ({exc.code or exc.status})")
        except Exception as exc:
            logger.error("%s: writing %d failed", self.what, len(batch), exc_info=exc)
            self._drop(len(batch), f"the write failed ({type(exc).__name__})")
        else:
            if self._outage:
                logger.warning("%s are written again (%d dropped meanwhile)", self.what, self._outage)
                self._outage = 0
        finally:
            self._settled += len(batch)
            progress = self._progress
            if progress is not None:
                self._progress = None
                progress.set()

    def _drop(self, count: int, reason: str) -> None:
        self.dropped += count
        if not self._outage:
            logger.error("%s are being dropped: %s; the count is logged once they are written again", self.what, reason)
        self._outage += count
