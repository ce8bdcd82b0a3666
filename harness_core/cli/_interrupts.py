"""The signal watcher of one ``harness run``: the first SIGINT/SIGTERM/SIGHUP aborts, a second cancels."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from harness_core.abort import AbortSignal
from harness_core.cli._common import ABORT_SIGNALS

if TYPE_CHECKING:
    from harness_core.cli._render import Renderer

__all__ = ["Interrupts"]


class Interrupts:
    """Watches SIGINT, SIGTERM and SIGHUP for one run: the first fires ``abort`` (middleware
    cleanup runs, the usage row is written as aborted), a second cancels everything.

    :attr:`signum` is the first signal received; the run then exits with 128 + that number, the
    status a shell reports for a process that signal ended.
    """

    def __init__(self, abort: AbortSignal, renderer: Renderer) -> None:
        self.abort = abort
        self.renderer = renderer
        self.hard = False
        self.signum: int | None = None

    @property
    def exit_code(self) -> int:
        """128 + the first signal received (130 when none was: the caller saw an abort)."""
        return 128 + (self.signum if self.signum is not None else signal.SIGINT)

    async def watch(self, scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(*ABORT_SIGNALS) as signals:
            task_status.started()
            self.signum = await anext(signals)
            self.abort.fire(ABORT_SIGNALS[self.signum])
            again = "press Ctrl-C again" if self.signum == signal.SIGINT else "signal again"
            self.renderer.note(f"aborting… ({again} to quit at once)")
            await anext(signals)
            self.hard = True
            scope.cancel()
