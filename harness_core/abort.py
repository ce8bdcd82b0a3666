"""Cooperative cancellation of one generation: :class:`AbortSignal` and :func:`race`.

An :class:`AbortSignal` is fired by the consumer (a Ctrl-C handler, a UI button, another thread)
and observed by adapters and middleware. Unlike task cancellation it is an ordinary outcome: the
stream ends with ``finish{aborted}`` and keeps what was produced so far
(docs/stream-obligations.md#7-abort-and-cancellation).

Works on asyncio and trio (through anyio); :meth:`AbortSignal.fire` is safe from any thread or
task and never blocks.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

__all__ = ["ABORTED", "DEFAULT_ABORT_REASON", "AbortSignal", "Aborted", "abort_reason", "race"]

T = TypeVar("T")


class Aborted:
    """Type of the :data:`ABORTED` sentinel returned by :func:`race` when the signal won."""

    _instance: Aborted | None = None

    def __new__(cls) -> Aborted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABORTED"


ABORTED: Final = Aborted()
"""Returned by :func:`race` instead of a result when the abort signal fired first."""

DEFAULT_ABORT_REASON: Final = "aborted by the caller"
"""The ``finish{aborted}`` message when the abort signal fired without a reason."""


def abort_reason(abort: AbortSignal | None) -> str:
    """The message of the ``finish{aborted}`` for ``abort``: the signal's own reason, else
    :data:`DEFAULT_ABORT_REASON`."""
    reason = abort.reason if abort is not None else None
    return reason or DEFAULT_ABORT_REASON


def _threadsafe_scheduler() -> Callable[[Callable[[], object]], object]:
    """Return a function that runs a callback soon on the running event loop, from any thread.

    Supports the asyncio and trio backends (the two anyio runs on). Raises ``RuntimeError``
    outside an event loop.
    """
    aio = sys.modules.get("asyncio")  # a running asyncio loop means asyncio is imported
    if aio is not None:
        try:
            return aio.get_running_loop().call_soon_threadsafe  # type: ignore[no-any-return]
        except RuntimeError:
            pass  # not asyncio: try trio below
    trio = sys.modules.get("trio")  # a running trio loop means trio is imported
    if trio is not None:
        try:
            scheduler: Callable[[Callable[[], object]], object] = trio.lowlevel.current_trio_token().run_sync_soon
        except RuntimeError:
            pass  # trio is imported but not running here
        else:
            return scheduler
    raise RuntimeError("AbortSignal needs a running asyncio or trio event loop")


class AbortSignal:
    """A one-shot, thread-safe "stop this generation" flag that async code can wait on.

    ``fire()`` may be called from any thread, task or signal handler, any number of times; only
    the first call has an effect. Async code either awaits :meth:`wait` or races an operation
    against the signal with :func:`race`. A signal is single-use: create one per request.

    Example::

        abort = AbortSignal()
        options = GenerateOptions(route="mock", model="echo", messages=[...], abort=abort)
        # elsewhere, e.g. in a UI callback: abort.fire("user pressed stop")
    """

    __slots__ = ("_event", "_lock", "_reason", "_subscribers")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._subscribers: list[tuple[Callable[[Callable[[], object]], object], Callable[[], object]]] = []

    @property
    def fired(self) -> bool:
        """True once :meth:`fire` has been called."""
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """The reason given to the first :meth:`fire` call, if any."""
        return self._reason

    def fire(self, reason: str = "aborted by the caller") -> None:
        """Fire the signal: every waiter and every :func:`race` in progress wakes up.

        Safe from any thread; never blocks on the event loop. Later calls do nothing.
        """
        with self._lock:
            if self._event.is_set():
                return
            self._reason = reason
            self._event.set()
            subscribers, self._subscribers = self._subscribers, []
        for schedule, callback in subscribers:
            # A waiter whose event loop has already closed cannot be woken, and needs not be.
            with contextlib.suppress(RuntimeError):
                schedule(callback)

    def _subscribe(self, callback: Callable[[], object]) -> Callable[[], None] | None:
        """Run ``callback`` on the current event loop when the signal fires.

        Returns an unsubscribe function, or ``None`` when the signal has already fired (the
        callback is then not scheduled: the caller checks :attr:`fired` itself).
        """
        entry = (_threadsafe_scheduler(), callback)
        with self._lock:
            if self._event.is_set():
                return None
            self._subscribers.append(entry)

        def unsubscribe() -> None:
            with self._lock, contextlib.suppress(ValueError):  # ValueError: already popped by fire()
                self._subscribers.remove(entry)

        return unsubscribe

    async def wait(self) -> None:
        """Return once the signal has fired (immediately when it already has)."""
        import anyio  # deferred: the CLI's `plugins` / `config check` paths never wait

        event = anyio.Event()
        unsubscribe = self._subscribe(event.set)
        if unsubscribe is None:
            return
        try:
            await event.wait()
        finally:
            unsubscribe()

    def __repr__(self) -> str:
        return f"AbortSignal(fired={self.fired})"


async def race(signal: AbortSignal | None, operation: Callable[[], Awaitable[T]]) -> T | Aborted:
    """Await ``operation()`` unless ``signal`` fires first.

    Returns the operation's result, or :data:`ABORTED` when the signal fired before or while it
    ran (the operation is then cancelled). With ``signal=None`` it simply awaits the operation.
    This is the one helper adapters use to make a blocking read abortable: it is a plain
    coroutine, so no caller ever yields inside its cancel scope (docs/hooks.md). Exceptions from the
    operation propagate unchanged; cancellation of the calling task is never swallowed.

    It sits on every network read of a stream, so on asyncio it avoids a cancel scope: the
    signal cancels the waiting task directly and the cancellation is taken back with
    ``Task.uncancel()`` (Python 3.11+), which keeps any outer cancellation intact. Other
    backends (trio) use an anyio cancel scope.
    """
    if signal is None:
        return await operation()
    aio = sys.modules.get("asyncio")  # not imported (the CLI's fast paths): certainly not under asyncio
    try:
        task = aio.current_task() if aio is not None else None
    except RuntimeError:  # not under asyncio
        task = None
    if task is None or aio is None:
        return await _race_in_scope(signal, operation)
    state = [False, False]  # [operation finished, cancelled by the signal]

    def cancel() -> None:
        if not state[0]:
            state[1] = True
            task.cancel("aborted")

    # Inlined AbortSignal._subscribe: this runs once per network read.
    entry = (task.get_loop().call_soon_threadsafe, cancel)
    lock = signal._lock
    with lock:
        if signal._event.is_set():
            return ABORTED
        signal._subscribers.append(entry)
    try:
        return await operation()
    except aio.CancelledError:
        if state[1] and task.uncancel() == 0:
            return ABORTED
        raise
    finally:
        state[0] = True
        with lock, contextlib.suppress(ValueError):  # ValueError: already popped by fire()
            signal._subscribers.remove(entry)


async def _race_in_scope(signal: AbortSignal, operation: Callable[[], Awaitable[T]]) -> T | Aborted:
    """:func:`race` for backends other than asyncio: the signal cancels an anyio cancel scope."""
    import anyio  # deferred (see AbortSignal.wait)

    with anyio.CancelScope() as scope:
        unsubscribe = signal._subscribe(scope.cancel)
        if unsubscribe is None:
            return ABORTED
        try:
            return await operation()
        finally:
            unsubscribe()
    # Only reached when our own scope absorbed the cancellation, i.e. the signal fired.
    return ABORTED
