"""``timeout``: end a stream that is too slow with ``finish{error, TIMEOUT}``.

Three timers, each optional, in seconds:

- ``first_chunk``: the wait for the first chunk of the stream;
- ``idle``: every later wait between two chunks (time the caller spends between reads is not
  counted: only the wait for the inner stream is);
- ``total``: a deadline for the whole stream, measured from its start.

When a timer runs out the inner stream is closed, every open block is closed with what it holds
(``block-end`` with partial content) and the stream ends with ``finish{error}`` carrying a
retryable ``TIMEOUT`` failure, so a ``retry`` layer outside can try again when nothing was
yielded yet.

Each read of the inner stream is raced against its timer inside a plain coroutine: this generator
never yields inside a cancel scope (docs/hooks.md), so the timers can never cancel the caller's
code. On asyncio one loop timer per stream bounds every read (:class:`_ReadTimer`: a read only
moves a deadline, the timer is re-armed when it fires early, so a chunk costs no timer
operation); on trio each read runs inside :func:`anyio.move_on_after`.

An embedding call (``llm_embed``, docs/embeddings.md) is bounded by ``total``: when it runs out
the call is cancelled and :class:`~harness_core.errors.LlmError` ``TIMEOUT`` (retryable, so an
outer ``retry`` tries again) is raised naming the timer and the route. ``first_chunk`` and
``idle`` do not apply: an embedding call has no chunks, and the boundary may send a long input
list as several consecutive provider requests (each bounded by the adapter's HTTP timeouts).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Final

import anyio
import msgspec

from harness_core.middleware import (
    BlockAssembler,
    CallNext,
    EmbedCallNext,
    Embeddings,
    EmbedOptions,
    Failure,
    Finish,
    GenerateOptions,
    LlmError,
    StreamChunk,
    hookimpl,
)
from harness_middleware._stream import aclose

__all__ = ["TimeoutPlugin"]

Seconds = Annotated[float, msgspec.Meta(gt=0)]


class _Marker:
    """The type of the two outcomes of a read that are not chunks."""


_NEVER: Final = math.inf  # no deadline (between reads), no timer armed
_END: Final = _Marker()
_TIMED_OUT: Final = _Marker()


async def _next_within(stream: AsyncIterator[StreamChunk], seconds: float | None) -> StreamChunk | _Marker:
    """The next chunk of ``stream``; :data:`_END` when it is exhausted; :data:`_TIMED_OUT` when
    ``seconds`` passed first (the pending read is then cancelled)."""
    if seconds is None:
        try:
            return await anext(stream)
        except StopAsyncIteration:
            return _END
    with anyio.move_on_after(seconds):
        try:
            return await anext(stream)
        except StopAsyncIteration:
            return _END
    return _TIMED_OUT


class _ReadTimer:
    """The deadline of the read in progress on asyncio, with one ``loop.call_at`` handle per
    stream instead of a cancel scope per read.

    :meth:`begin` sets the deadline of the read about to start (arming the handle only when it is
    not armed early enough already); :meth:`end` clears it. When the handle fires before the
    current deadline (the stream moved on since) it re-arms for that deadline; between reads it
    stays unarmed; at the deadline it cancels the reading task, as ``asyncio.timeout`` does, and
    :meth:`end` withdraws that cancellation again.
    """

    __slots__ = ("_armed_for", "_deadline", "_fired", "_handle", "_loop", "_task", "_time")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._time = _clock(loop)
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = _NEVER
        self._deadline = _NEVER
        self._fired = False
        self._task: asyncio.Task[object] | None = None

    def begin(self, seconds: float) -> int:
        """The current task starts a read that may take ``seconds``; returns how many
        cancellations of it are pending (``Task.cancelling``) before the read."""
        task = asyncio.current_task(self._loop)
        assert task is not None  # a coroutine on asyncio runs in a task
        self._task = task
        deadline = self._time() + seconds
        self._deadline = deadline
        if deadline < self._armed_for:
            if self._handle is not None:
                self._handle.cancel()
            self._handle = self._loop.call_at(deadline, self._expire)
            self._armed_for = deadline
        return task.cancelling()

    def end(self) -> int | None:
        """The read ended. When the timer cancelled it, withdraw that cancellation and return how
        many cancellations of the reading task remain (``<=`` the count :meth:`begin` returned:
        the timer's alone); ``None`` when the timer did not fire."""
        self._deadline = _NEVER
        if not self._fired:
            return None
        self._fired = False
        assert self._task is not None  # set by begin
        return self._task.uncancel()

    def _expire(self) -> None:
        armed_for, deadline = self._armed_for, self._deadline
        self._handle, self._armed_for = None, _NEVER
        if deadline == _NEVER:
            return  # between reads: the next read arms the timer again
        if deadline > armed_for:
            self._handle = self._loop.call_at(deadline, self._expire)
            self._armed_for = deadline
            return
        assert self._task is not None  # set by begin with the deadline
        self._fired = True
        self._task.cancel()

    def close(self) -> None:
        """Disarm the timer (the stream ended)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def _clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """``loop.time``; ``time.monotonic`` itself when that is all it calls (asyncio's own loops
    unless the clock was replaced, e.g. by a test): no Python frame per read."""
    own = type(loop).time is asyncio.BaseEventLoop.time and "time" not in getattr(loop, "__dict__", {})
    return time.monotonic if own else loop.time


def _read_timer() -> _ReadTimer | None:
    """A :class:`_ReadTimer` on asyncio; ``None`` elsewhere (trio: a cancel scope per read)."""
    try:
        return _ReadTimer(asyncio.get_running_loop())
    except RuntimeError:
        return None


class TimeoutPlugin:
    """Middleware enforcing first-chunk, idle and total timeouts (see module doc)."""

    class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
        """``timeout:`` in plugins.yaml; seconds, ``null`` disables a timer.

        Fields:
            first_chunk: longest wait for the first chunk.
            idle: longest wait between two chunks.
            total: deadline of the whole stream from its start.
        """

        first_chunk: Seconds | None = 60.0
        idle: Seconds | None = 60.0
        total: Seconds | None = None

    def __init__(self, config: Config | None = None) -> None:
        self.config = config if config is not None else self.Config()

    def _limit(self, first: bool, deadline: float | None) -> tuple[float | None, str]:
        """The time allowed for the next read and the name of the timer that bounds it."""
        cfg = self.config
        limit, name = (cfg.first_chunk, "first_chunk") if first else (cfg.idle, "idle")
        if deadline is not None:
            remaining = max(0.0, deadline - anyio.current_time())
            if limit is None or remaining <= limit:
                return remaining, "total"
        return limit, name

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """``await call_next(options)`` within ``total`` seconds (no bound when it is ``null``).

        Raises:
            LlmError: ``TIMEOUT`` when ``total`` ran out (the inner call is cancelled).
        """
        total = self.config.total
        if total is None:
            return await call_next(options)
        with anyio.move_on_after(total):
            return await call_next(options)
        raise LlmError(
            "TIMEOUT", f"the total timeout of {total}s ran out for an embedding call to route {options.route!r}"
        )

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Pass ``call_next(options)`` on, ending it with ``TIMEOUT`` when a timer runs out."""
        total = self.config.total
        deadline = anyio.current_time() + total if total is not None else None
        stream = call_next(options)
        blocks = BlockAssembler(keep_ended=False)  # only the blocks still open
        first = True
        reads = _read_timer()
        idle = self.config.idle
        pull = stream.__anext__
        feed = blocks.feed
        try:
            while True:
                if first or deadline is not None:
                    limit, timer = self._limit(first, deadline)
                else:
                    limit, timer = idle, "idle"
                if reads is None or limit is None:
                    item = await _next_within(stream, limit)
                else:  # inline: no coroutine per read
                    cancelling = reads.begin(limit)
                    try:
                        item = await pull()
                    except StopAsyncIteration:
                        item = _END
                    except asyncio.CancelledError:
                        left = reads.end()
                        if left is None or left > cancelling:
                            raise  # the caller's cancellation (with or without the timer's)
                        item = _TIMED_OUT
                    else:
                        reads.end()  # had the read swallowed the timer's cancellation, its chunk is kept
                if isinstance(item, _Marker):
                    if item is _END:
                        return
                    await aclose(stream)
                    message = f"the {timer} timeout of {getattr(self.config, timer)}s ran out"
                    for end in blocks.terminal(Failure(code="TIMEOUT", message=message, retryable=True)):
                        yield end
                    return
                first = False
                feed(item)
                yield item
                if type(item) is Finish:
                    return  # nothing follows a finish: no timer may add a second one
        finally:
            if reads is not None:
                reads.close()
            await aclose(stream)
