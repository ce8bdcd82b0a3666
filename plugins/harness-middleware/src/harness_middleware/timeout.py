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

Each read of the inner stream is raced against its timer with :func:`anyio.move_on_after` inside
a plain coroutine: this generator never yields inside a cancel scope (docs/hooks.md), so the timers can
never cancel the caller's code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Final

import anyio
import msgspec

from harness_core.assembler import BlockAssembler
from harness_core.hookspecs import CallNext, hookimpl
from harness_core.types import Failure, Finish, GenerateOptions, StreamChunk
from harness_middleware._stream import aclose

__all__ = ["TimeoutPlugin"]

Seconds = Annotated[float, msgspec.Meta(gt=0)]


class _Marker:
    """The type of the two outcomes of a read that are not chunks."""


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
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Pass ``call_next(options)`` on, ending it with ``TIMEOUT`` when a timer runs out."""
        total = self.config.total
        deadline = anyio.current_time() + total if total is not None else None
        stream = call_next(options)
        blocks = BlockAssembler(keep_ended=False)  # only the blocks still open
        first = True
        try:
            while True:
                limit, timer = self._limit(first, deadline)
                item = await _next_within(stream, limit)
                if item is _END:
                    return
                if isinstance(item, _Marker):
                    await aclose(stream)
                    message = f"the {timer} timeout of {getattr(self.config, timer)}s ran out"
                    for end in blocks.terminal(Failure(code="TIMEOUT", message=message, retryable=True)):
                        yield end
                    return
                first = False
                blocks.feed(item)
                yield item
                if isinstance(item, Finish):
                    return  # nothing follows a finish: no timer may add a second one
        finally:
            await aclose(stream)
