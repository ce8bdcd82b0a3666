"""The per-stream record (harness_core.record): the core opens it, middleware and callers read it;
``observe`` calls its ``on_end`` exactly once however a stream ends (issue 22 item 2)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from runtime_scripted import AdapterPlugin, ScriptedAdapter, reply

from harness_core import (
    Attempt,
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    Harness,
    LlmError,
    Message,
    StreamChunk,
    StreamEnd,
    StreamRecord,
    TextBlock,
    TextDelta,
    TokenUsage,
    Usage,
    embed_record,
    hookimpl,
    observe,
    open_embed_record,
    open_record,
    record_of,
)
from harness_core.embedding import EmbedCallNext, Embeddings, EmbedOptions
from harness_core.plugininfo import Defaults
from harness_core.record import RECORD_KEY

pytestmark = pytest.mark.anyio


def options(**fields: Any) -> GenerateOptions:
    return GenerateOptions(route="work", model="m", messages=[Message.user("x")], **fields)


# ------------------------------------------------------------------ the record


def test_open_record_attaches_one_record_and_reuses_it() -> None:
    given = options(metadata={"request_id": "r1"})
    passed, record = open_record(given)
    assert given.metadata == {"request_id": "r1"}  # the caller's dict is not modified
    assert passed.metadata == {"request_id": "r1", RECORD_KEY: record}
    assert (record.requested_route, record.requested_model, record.served()) == ("work", "m", ("work", "m"))
    again, same = open_record(passed)
    assert again is passed
    assert same is record
    assert record_of(passed) is record
    assert record_of(given) is None
    assert record_of(options(metadata={RECORD_KEY: "not a record"})) is None
    record.served_route, record.served_model = "backup", "b1"
    assert record.served() == ("backup", "b1")


def test_embed_record_is_shared_by_nested_blocks_and_ends_with_the_outer() -> None:
    assert embed_record() is None
    with open_embed_record(EmbedOptions(inputs=["a"], route="vec", model="e")) as outer:
        assert embed_record() is outer
        assert outer.ended is None
        with open_embed_record() as inner:
            assert inner is outer
        assert outer.ended is None  # only the block that opened it ends it
        assert (outer.requested_route, outer.requested_model) == ("vec", "e")
    assert embed_record() is None
    assert outer.ended is not None
    with open_embed_record() as bare:
        assert bare.requested_route is None


# ------------------------------------------------------------------ observe


async def source(chunks: list[Any], closed: list[bool]) -> AsyncIterator[StreamChunk]:
    try:
        for chunk in chunks:
            if isinstance(chunk, BaseException):
                raise chunk
            yield chunk
    finally:
        closed.append(True)


class Ends:
    def __init__(self) -> None:
        self.ends: list[StreamEnd] = []
        self.seen: list[StreamChunk] = []

    async def __call__(self, end: StreamEnd) -> None:
        await anyio.lowlevel.checkpoint()  # shielded: runs even while cancelled
        self.ends.append(end)


STOP = Finish(FinishReason(kind="stop"))
TEXT: list[StreamChunk] = [BlockStart(0, "text"), TextDelta(0, "a"), TextDelta(0, "b"), BlockEnd(0, TextBlock("ab"))]


async def test_observe_passes_every_chunk_and_reports_finish_and_usage() -> None:
    ends, closed = Ends(), list[bool]()
    chunks = [*TEXT, Usage(TokenUsage(3, 2)), STOP]
    got = [chunk async for chunk in observe(source(chunks, closed), ends, ends.seen.append)]
    assert got == chunks == ends.seen
    [end] = ends.ends
    assert (end.how, end.finish, end.usage, end.raised) == ("finish", STOP, TokenUsage(3, 2), None)
    assert end.first_chunk is not None
    assert end.started <= end.first_chunk <= end.ended
    assert closed == [True]


async def test_observe_an_error_finish_and_a_lone_finish() -> None:
    ends = Ends()
    error = Finish(FinishReason(kind="error", failure=LlmError("SERVER", "503").to_failure()))
    assert [chunk async for chunk in observe(source([error], []), ends)] == [error]
    [end] = ends.ends
    assert (end.how, end.finish, end.first_chunk) == ("finish", error, None)  # a lone finish: no first chunk


async def test_observe_a_stream_ending_without_finish() -> None:
    ends = Ends()
    assert [chunk async for chunk in observe(source(TEXT, []), ends)] == TEXT
    assert [(end.how, end.finish, end.raised) for end in ends.ends] == [("incomplete", None, None)]


async def test_observe_an_exception_is_reported_then_reraised() -> None:
    ends, closed = Ends(), list[bool]()
    boom = LlmError("NETWORK", "reset")
    with pytest.raises(LlmError, match="reset"):
        async for _ in observe(source([TEXT[0], boom], closed), ends):
            pass
    [end] = ends.ends
    assert (end.how, end.raised, closed) == ("error", boom, [True])


async def test_observe_the_consumer_closing_early() -> None:
    ends, closed = Ends(), list[bool]()
    stream = observe(source([*TEXT, STOP], closed), ends)
    assert await stream.__anext__() == TEXT[0]
    await stream.aclose()
    await stream.aclose()  # closing again reports nothing more
    [end] = ends.ends
    assert (end.how, type(end.raised), closed) == ("closed", GeneratorExit, [True])


async def test_observe_cancellation() -> None:
    ends, closed, started = Ends(), [], anyio.Event()

    async def hanging() -> AsyncIterator[StreamChunk]:
        try:
            yield TEXT[0]
            await anyio.sleep_forever()
            yield STOP  # pragma: no cover - never reached: cancelled while waiting
        finally:
            closed.append(True)

    async def consume() -> None:
        async for _ in observe(hanging(), ends):
            started.set()

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await started.wait()
        group.cancel_scope.cancel()
    [end] = ends.ends
    assert (end.how, closed) == ("cancelled", [True])


class Scope:
    """A read scope recording when it is current (``inside``) and the tokens it got back."""

    def __init__(self) -> None:
        self.inside = False
        self.tokens: list[object] = []
        self.entered = 0

    def enter(self) -> object:
        assert not self.inside
        self.inside, self.entered = True, self.entered + 1
        return self.entered

    def exit(self, token: object) -> None:
        assert self.inside
        self.inside = False
        self.tokens.append(token)


async def test_observe_enters_the_scope_around_every_read_only() -> None:
    scope, seen_inner, seen_consumer = Scope(), list[bool](), list[bool]()

    async def inner() -> AsyncIterator[StreamChunk]:
        for chunk in [*TEXT, STOP]:
            seen_inner.append(scope.inside)
            yield chunk
        seen_inner.append(scope.inside)  # the read that ends the stream

    async for _ in observe(inner(), Ends(), scope=scope):
        seen_consumer.append(scope.inside)
    assert seen_inner == [True] * 6
    assert seen_consumer == [False] * 5
    assert scope.tokens == [1, 2, 3, 4, 5, 6]  # every enter's token handed back to exit


async def test_observe_leaves_the_scope_when_a_read_raises() -> None:
    scope, ends = Scope(), Ends()
    with pytest.raises(LlmError, match="reset"):
        async for _ in observe(source([TEXT[0], LlmError("NETWORK", "reset")], []), ends, scope=scope):
            pass
    assert (scope.inside, scope.tokens, [end.how for end in ends.ends]) == (False, [1, 2], ["error"])


# ------------------------------------------------------------------ the core opens it


class Reads:
    """A middleware reading the record the core opened."""

    def __init__(self) -> None:
        self.records: list[StreamRecord | None] = []

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        self.records.append(record_of(options))
        async for chunk in call_next(options):
            yield chunk

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        self.records.append(embed_record())
        return await call_next(options)


async def test_the_runtime_opens_the_record_and_the_boundary_fills_it() -> None:
    reads = Reads()
    plugins = [("reads", reads), ("openai:work", AdapterPlugin(ScriptedAdapter(reply()), ["work"]))]
    async with Harness(plugins, defaults=Defaults(route="work", model="m")) as harness:
        context = harness.stream(GenerateOptions(messages=[Message.user("x")]))
        async with context as chunks:
            async for _ in chunks:
                pass
        record = context.record
        assert reads.records == [record]
        assert (record.requested_route, record.requested_model) == ("work", "m")  # after the defaults
        assert (record.served_route, record.served_model, record.cached, record.attempts) == ("work", "m", False, [])
        assert record.first_chunk is not None
        assert record.ended is not None
        assert record.started <= record.first_chunk <= record.ended
        assert (context.route, context.model, context.source) == ("work", "m", "openai:work")
        # a caller that opened the record first (the gateway) reads the same one
        given, mine = open_record(options())
        mine.attempts.append(Attempt("other", "x", skipped=True))
        async with harness.stream(given) as chunks:
            async for _ in chunks:
                pass
        assert reads.records[-1] is mine
        assert mine.served() == ("work", "m")
        assert mine.ended is not None


async def test_the_runtime_opens_an_embedding_calls_record() -> None:
    from test_embed import EmbedOnly, Recording

    reads = Reads()
    async with Harness([("reads", reads), ("vec", EmbedOnly(Recording()))]) as harness:
        await harness.embed(["a"], route="vec", model="e")
    [record] = reads.records
    assert record is not None
    assert (record.requested_route, record.requested_model) == ("vec", "e")
    assert record.ended is not None
    assert embed_record() is None
