"""The record of one stream or embedding call: what was asked, what served it, how it went.

Chunks say what the model produced; they cannot say that a ``cache`` hit replayed them, that
``fallback`` served the request from its second target, or when the first chunk came. The core
opens a :class:`StreamRecord` for every stream (:meth:`harness_core.Harness.stream`) and every
embedding call (:meth:`harness_core.Harness.embed`); the adapter boundary writes the route and
model it called and the time of the adapter's first chunk, middleware write what they did
(``fallback``/``balance``: attempts and the served target, ``cache``: ``cached``), and outer
middleware and applications (usage ledger, prompt log, the gateway) read it
(docs/hooks.md#the-stream-record-and-observe).

How it travels: a stream's record rides in ``options.metadata`` under :data:`RECORD_KEY`
(metadata is not part of the cache key and not sent to providers): read it with
:func:`record_of`. An application that wants to read it after the stream opens it first with
:func:`open_record` and passes the returned options on; the core then reuses it. An embedding
call has no metadata: its record is the context variable read by :func:`embed_record`, opened by
the core around the ``llm_embed`` chain (:func:`open_embed_record`; the middleware run in the
same task, so they see it).

:func:`observe` is the "watch a stream, account at the end" loop: it passes every chunk on
unchanged and calls ``on_end`` exactly once with a :class:`StreamEnd`, however the stream ended.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal, Protocol

import anyio
import msgspec

from harness_core.closing import close_stream
from harness_core.embedding import EmbedOptions
from harness_core.errors import Failure
from harness_core.types import Finish, GenerateOptions, StreamChunk, TextDelta, TokenUsage, Usage

__all__ = [
    "RECORD_KEY",
    "Attempt",
    "ReadScope",
    "StreamEnd",
    "StreamRecord",
    "embed_record",
    "observe",
    "open_embed_record",
    "open_record",
    "record_of",
]

RECORD_KEY = "harness.record"
"""The ``options.metadata`` key holding the stream's :class:`StreamRecord`."""


class Attempt(msgspec.Struct, frozen=True, omit_defaults=True):
    """One target ``fallback`` or ``balance`` tried: ``route``/``model``, and why it was left
    (``failure`` ``None`` = it served the request).

    ``skipped`` is true for a target that was not called because it was cooling down;
    ``after_content`` for a ``failure`` that came after the target had sent content (the stream
    then ended with it: nothing is replayed from another target).
    """

    route: str | None
    model: str | None
    failure: Failure | None = None
    skipped: bool = False
    after_content: bool = False


@dataclass(slots=True, eq=False)
class StreamRecord:
    """What happened to one stream or embedding call (mutable; one per call, shared by every layer).

    Fields:
        requested_route / requested_model: what the caller asked for, after the runtime's defaults.
        served_route / served_model: the route and model that produced the answer (``None`` until
            one was called: the adapter boundary, ``fallback`` and ``balance`` write them; for an
            embedding call only the middleware do, the result's ``route``/``model`` say the rest).
        cached: a ``cache`` hit replayed the answer (no provider was called).
        attempts: the targets ``fallback``/``balance`` tried, in order (empty without them).
        started: monotonic seconds (:func:`time.monotonic`) when the record was opened.
        first_chunk: monotonic seconds of the adapter's first chunk (``None``: none came, or a
            cache replay; never set for an embedding call).
        ended: monotonic seconds when the stream context (or the embedding call) ended
            (``None`` while it runs).
    """

    requested_route: str | None = None
    requested_model: str | None = None
    served_route: str | None = None
    served_model: str | None = None
    cached: bool = False
    attempts: list[Attempt] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    first_chunk: float | None = None
    ended: float | None = None

    def served(self) -> tuple[str | None, str | None]:
        """``(route, model)`` that served the call: the served ones, else the requested ones."""
        return self.served_route or self.requested_route, self.served_model or self.requested_model


def open_record(options: GenerateOptions) -> tuple[GenerateOptions, StreamRecord]:
    """The stream's record, and the options to pass on (carrying it).

    Reuses the record already in ``options`` (``options`` is then returned unchanged); otherwise
    opens a new one (requested route and model from ``options``) in a copy of
    ``options.metadata`` (the caller's dict is never modified).
    """
    existing = record_of(options)
    if existing is not None:
        return options, existing
    record = StreamRecord(requested_route=options.route, requested_model=options.model)
    return msgspec.structs.replace(options, metadata={**options.metadata, RECORD_KEY: record}), record


def record_of(options: GenerateOptions) -> StreamRecord | None:
    """The record travelling with ``options``, or ``None`` (the stream runs outside a harness)."""
    record = options.metadata.get(RECORD_KEY)
    return record if isinstance(record, StreamRecord) else None


_EMBED_RECORD: ContextVar[StreamRecord | None] = ContextVar("harness_core.embed_record", default=None)


@contextmanager
def open_embed_record(options: EmbedOptions | None = None) -> Iterator[StreamRecord]:
    """The record of the embedding call in progress, for the ``with`` block around the call.

    Reuses the record an outer caller opened; otherwise opens a new one (requested route and
    model from ``options``), visible through :func:`embed_record` until the block ends, which
    sets its ``ended``.
    """
    existing = _EMBED_RECORD.get()
    if existing is not None:
        yield existing
        return
    record = StreamRecord()
    if options is not None:
        record.requested_route, record.requested_model = options.route, options.model
    token = _EMBED_RECORD.set(record)
    try:
        yield record
    finally:
        record.ended = time.monotonic()
        _EMBED_RECORD.reset(token)


def embed_record() -> StreamRecord | None:
    """The record of the embedding call in progress, or ``None`` (called outside one)."""
    return _EMBED_RECORD.get()


End = Literal["finish", "incomplete", "error", "closed", "cancelled"]


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """What :func:`observe` saw of one stream, handed to its ``on_end``.

    Fields:
        finish: the ``finish`` chunk, if one came. usage: the last ``usage`` chunk's counts.
        raised: the exception that ended the stream: raised by the inner stream (an
            :class:`~harness_core.errors.LlmError`, a bug), ``GeneratorExit`` when the consumer
            closed the stream early, or the cancellation exception; ``None`` otherwise.
        started / first_chunk / ended: event-loop seconds (:func:`anyio.current_time`) of the
            first read, the first chunk that is not a ``finish`` (``None``: none came) and the end.
    """

    finish: Finish | None
    usage: TokenUsage | None
    raised: BaseException | None
    started: float
    first_chunk: float | None
    ended: float

    @property
    def how(self) -> End:
        """``"finish"`` (a finish came), ``"incomplete"`` (the stream ended without one),
        ``"error"`` (an exception), ``"closed"`` (the consumer stopped reading) or ``"cancelled"``."""
        raised = self.raised
        if self.finish is not None:
            return "finish"
        if raised is None:
            return "incomplete"
        if isinstance(raised, GeneratorExit):
            return "closed"
        if isinstance(raised, anyio.get_cancelled_exc_class()):
            return "cancelled"
        return "error"


class ReadScope(Protocol):
    """What :func:`observe` makes current around every read of the inner stream, never across a
    ``yield`` (e.g. ``otel``'s span, so the adapter's HTTP spans nest under it while the
    consumer's code never runs inside it).

    ``enter()`` runs just before each ``__anext__`` of the inner stream and returns a token;
    ``exit(token)`` runs right after that read (a chunk, the end of the stream or an exception),
    in the same task. Both are called once per chunk: keep them cheap.
    """

    def enter(self) -> object:
        """Make the scope current for one read; returns the token :meth:`exit` gets back."""
        ...  # pragma: no cover - protocol

    def exit(self, token: object) -> None:
        """Undo what :meth:`enter` returned ``token`` for."""
        ...  # pragma: no cover - protocol


async def observe(
    stream: AsyncIterator[StreamChunk],
    on_end: Callable[[StreamEnd], Awaitable[None]],
    on_chunk: Callable[[StreamChunk], object] | None = None,
    *,
    scope: ReadScope | None = None,
) -> AsyncGenerator[StreamChunk, None]:
    """Yield every chunk of ``stream`` unchanged; when it ends, close it and await ``on_end`` once.

    ``on_end`` gets a :class:`StreamEnd` however the stream ended: a ``finish``, the inner
    stream ending without one, an exception raised through it (re-raised after ``on_end``), the
    consumer closing this generator early, or cancellation. It runs after ``stream`` was closed
    (:func:`~harness_core.closing.close_stream`), shielded from cancellation: bound it yourself.
    ``on_chunk``, when given, is called with every chunk before it is yielded (e.g.
    :meth:`~harness_core.assembler.BlockAssembler.feed`). ``scope``, when given, is entered
    around every read of ``stream`` (:class:`ReadScope`), never while the consumer runs and
    never while ``stream`` is being closed. Text deltas after the first chunk cost one type
    check each (the loop usage, prompt-log and otel each wrote by hand).
    """
    started = anyio.current_time()
    first: float | None = None
    usage: TokenUsage | None = None
    finish: Finish | None = None
    raised: BaseException | None = None
    try:
        if scope is None:
            async for chunk in stream:
                if type(chunk) is not TextDelta or first is None:  # a later text delta: nothing to note
                    if first is None and not isinstance(chunk, Finish):  # a lone finish is no first chunk
                        first = anyio.current_time()
                    if isinstance(chunk, Usage):
                        usage = chunk.usage
                    elif isinstance(chunk, Finish):
                        finish = chunk
                if on_chunk is not None:
                    on_chunk(chunk)
                yield chunk
        else:  # the same loop, reading inside the scope (``async for`` is the cheaper loop without one)
            pull, enter, leave = stream.__anext__, scope.enter, scope.exit
            while True:
                token = enter()
                try:
                    chunk = await pull()
                except StopAsyncIteration:
                    break
                finally:
                    leave(token)
                if type(chunk) is not TextDelta or first is None:
                    if first is None and not isinstance(chunk, Finish):
                        first = anyio.current_time()
                    if isinstance(chunk, Usage):
                        usage = chunk.usage
                    elif isinstance(chunk, Finish):
                        finish = chunk
                if on_chunk is not None:
                    on_chunk(chunk)
                yield chunk
    except BaseException as exc:
        raised = exc
        raise
    finally:
        try:
            await close_stream(stream)
        finally:
            end = StreamEnd(finish, usage, raised, started, first, anyio.current_time())
            with anyio.CancelScope(shield=True):
                await on_end(end)
