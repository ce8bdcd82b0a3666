"""The usage so far of every running generation, recorded in its ledger row by one task per
gateway process (:class:`UsageRecorder`) instead of one task per request.

A generation records its usage every ``every`` seconds while it runs (what a reaper charges
should the process die: :meth:`~harness_gateway.store.SqlStore.record`); most end long before
their first record is due. A task of their own would cost each of them a task, a cancel scope
and its timer (BENCHMARKS.md, issue 25, cost per request); the recorder looks at the running
ones four times per interval and starts a record for each one that is due.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

import anyio
from anyio.abc import TaskStatus

__all__ = ["Recorded", "UsageRecorder"]

logger = logging.getLogger("harness_gateway")


class Recorded(Protocol):
    """What the recorder records: a running generation (:class:`~harness_gateway.relay.Relay`)."""

    request_id: str

    async def record_so_far(self) -> None:
        """Record the usage so far in the ledger row when it grew (a store fault is logged)."""


class UsageRecorder:
    """Records the usage so far of every generation :meth:`add` ed, every ``every`` seconds of
    its life (the first record ``every`` seconds after it was added; a record is never started
    while the previous one of the same generation runs), until it is :meth:`discard` ed.

    :meth:`run` is the process's one task that does it (started by the server's lifespan,
    :class:`~harness_gateway.server.GatewayServer`, or the lifespan of
    :func:`~harness_gateway.app.build_app`); it looks at every generation once per quarter of
    the shortest ``every`` among them, so a record starts up to that late."""

    def __init__(self) -> None:
        self._due: dict[Recorded, tuple[float, float]] = {}  # generation -> (next record, every): monotonic s
        self._recording: set[Recorded] = set()
        self._wake: anyio.Event | None = None
        self.running = False
        """:meth:`run` is running (records are made)."""

    def add(self, run: Recorded, every: float) -> None:
        """Record ``run``'s usage every ``every`` seconds (> 0) from now on."""
        self._due[run] = (time.monotonic() + every, every)
        wake = self._wake
        if wake is not None:
            self._wake = None
            wake.set()

    def discard(self, run: Recorded) -> None:
        """Stop recording ``run`` (it ended; its settlement follows)."""
        self._due.pop(run, None)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Record every generation that is due until cancelled (the records in flight with it)."""
        async with anyio.create_task_group() as group:
            self.running = True
            task_status.started()
            try:
                while True:
                    if not self._due:  # nothing runs: sleep until something does
                        wake = self._wake = anyio.Event()
                        await wake.wait()
                    await anyio.sleep(min((every for _, every in self._due.values()), default=0.0) / 4)  # the shortest
                    now = time.monotonic()
                    for run, (due, every) in list(self._due.items()):
                        if due <= now and run not in self._recording:
                            self._due[run] = (now + every, every)
                            self._recording.add(run)
                            group.start_soon(self._record, run)
            finally:
                self.running = False

    async def _record(self, run: Recorded) -> None:
        try:
            await run.record_so_far()
        except Exception:  # the recorder serves every generation of the process: it goes on
            logger.exception("request %s: recording its usage so far failed", run.request_id)
        finally:
            self._recording.discard(run)
