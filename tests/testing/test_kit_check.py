"""StreamChecker: every docs/stream-obligations.md obligation it checks, one violation at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness_core.errors import Failure, LlmError
from harness_core.testing.check import CheckedStream, StreamChecker, StreamViolation, check_stream
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)

STOP = Finish(FinishReason(kind="stop"))
TOOLS = Finish(FinishReason(kind="tool-calls"))
USAGE = Usage(TokenUsage(input_tokens=1, output_tokens=2))


def text(index: int, *pieces: str) -> list[StreamChunk]:
    return [
        BlockStart(index=index, block_type="text"),
        *(TextDelta(index=index, text=p) for p in pieces),
        BlockEnd(index=index, block=TextBlock("".join(pieces))),
    ]


def call(index: int, call_id: str, name: str, *pieces: str, arguments: str | None = None) -> list[StreamChunk]:
    joined = "".join(pieces)
    return [
        BlockStart(index=index, block_type="tool-call", id=call_id, name=name),
        *(ToolCallDelta(index=index, id=call_id, arguments_delta=p) for p in pieces),
        BlockEnd(index=index, block=ToolCallBlock(call_id, name, joined or "{}" if arguments is None else arguments)),
    ]


GOOD: list[list[StreamChunk]] = [
    [STOP],
    [*text(0, "a", "b"), USAGE, STOP],
    [
        BlockStart(index=0, block_type="reasoning", signed=True),
        ReasoningDelta(index=0, text="think"),
        BlockEnd(index=0, block=ReasoningBlock("think", signed=True)),
        *text(1, "x"),
        BlockStart(index=2, block_type="reasoning"),
        ReasoningDelta(index=2, text="more"),
        BlockEnd(index=2, block=ReasoningBlock("more")),
        STOP,
    ],
    [*call(0, "c1", "f", '{"a"', ":1}"), *call(1, "c2", "g"), USAGE, TOOLS],
    [
        BlockStart(index=0, block_type="tool-call"),
        ToolCallDelta(index=0, id="c", name="f", arguments_delta=""),
        ToolCallDelta(index=0, id="c", name="f", arguments_delta="{}"),
        BlockEnd(index=0, block=ToolCallBlock("c", "f", "{}")),
        TOOLS,
    ],
    [*call(0, "c", "f", "{"), Finish(FinishReason(kind="length", raw="length"))],
    [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="a"),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="b"),
        BlockEnd(index=1, block=TextBlock("b")),
        BlockEnd(index=0, block=TextBlock("a")),
        STOP,
    ],
    [Finish(FinishReason(kind="error", failure=Failure(code="SERVER", message="x")))],
    [
        BlockStart(index=0, block_type="reasoning", signed=True),
        BlockEnd(index=0, block=ReasoningBlock("", signed=True)),
        STOP,
    ],
]


@pytest.mark.parametrize("chunks", GOOD)
def test_legal_streams_pass(chunks: list[StreamChunk]) -> None:
    assert check_stream(chunks) == chunks


def test_a_raise_without_finish_is_legal() -> None:
    chunks: list[StreamChunk] = [BlockStart(index=0, block_type="text"), TextDelta(index=0, text="a")]
    assert check_stream(chunks, LlmError("NETWORK", "reset")) == chunks


BAD: list[tuple[list[Any], BaseException | None, int, str]] = [
    ([], None, 0, "without a finish"),
    ([*text(0, "a")], None, 3, "without a finish"),
    ([STOP, STOP], None, 1, "after finish"),
    ([STOP], LlmError("SERVER", "x"), 1, "after its finish chunk"),
    ([STOP], ValueError("bug"), 1, "rather than LlmError"),
    ([BlockStart(index=1, block_type="text")], None, 0, "skips ahead"),
    ([*text(0, "a"), BlockStart(index=0, block_type="text")], None, 3, "reused"),
    ([BlockStart(index=0, block_type="image")], None, 0, "unknown block_type"),  # type: ignore[arg-type]
    ([BlockStart(index=0, block_type="text", id="c")], None, 0, "tool-call id or name"),
    ([BlockStart(index=0, block_type="text", signed=True)], None, 0, "only reasoning blocks"),
    ([TextDelta(index=0, text="a")], None, 0, "never started"),
    ([*text(0, "a"), TextDelta(index=0, text="a")], None, 3, "already ended"),
    ([BlockStart(index=0, block_type="text"), ReasoningDelta(index=0, text="a")], None, 1, "for a text block"),
    ([BlockStart(index=0, block_type="text"), TextDelta(index=0, text="")], None, 1, "empty text-delta"),
    ([BlockStart(index=0, block_type="text"), BlockEnd(index=0, block=TextBlock(""))], None, 1, "an empty text block"),
    (
        [BlockStart(index=0, block_type="reasoning"), BlockEnd(index=0, block=ReasoningBlock(""))],
        None,
        1,
        "empty reasoning block",
    ),
    (
        [
            BlockStart(index=0, block_type="tool-call", id="a", name="f"),
            ToolCallDelta(index=0, id="b", arguments_delta="{}"),
        ],
        None,
        1,
        "differs from the block's 'a'",
    ),
    (
        [
            BlockStart(index=0, block_type="tool-call", id="a", name="f"),
            ToolCallDelta(index=0, id="a", name="g", arguments_delta="{}"),
        ],
        None,
        1,
        "name 'g' differs",
    ),
    (
        [
            BlockStart(index=0, block_type="tool-call", id="a", name="f"),
            ToolCallDelta(index=0, id="a", arguments_delta=""),
        ],
        None,
        1,
        "empty tool-call delta",
    ),
    (
        [
            BlockStart(index=0, block_type="tool-call", id="a", name="f"),
            ToolCallDelta(index=0, id="a", name="f", arguments_delta=""),
        ],
        None,
        1,
        "empty tool-call delta",
    ),
    ([BlockEnd(index=0, block=TextBlock("a"))], None, 0, "never started"),
    ([*text(0, "a"), BlockEnd(index=0, block=TextBlock("a"))], None, 3, "already ended"),
    (
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="a"),
            BlockEnd(index=0, block=ReasoningBlock("a")),
        ],
        None,
        2,
        "carries a reasoning block",
    ),
    (
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="a"),
            BlockEnd(index=0, block=TextBlock("ab")),
        ],
        None,
        2,
        "differs from the concatenated deltas 'a'",
    ),
    (
        [
            BlockStart(index=0, block_type="reasoning", signed=True),
            ReasoningDelta(index=0, text="a"),
            BlockEnd(index=0, block=ReasoningBlock("a")),
        ],
        None,
        2,
        "signed flag",
    ),
    (
        [*call(0, "a", "f", "{}", arguments="{}")[:2], BlockEnd(index=0, block=ToolCallBlock("b", "f", "{}"))],
        None,
        2,
        "id 'b'",
    ),
    ([*call(0, "a", "f", "{}")[:2], BlockEnd(index=0, block=ToolCallBlock("a", "g", "{}"))], None, 2, "name 'g'"),
    (
        [
            BlockStart(index=0, block_type="tool-call"),
            ToolCallDelta(index=0, id="", arguments_delta="{}"),
            BlockEnd(index=0, block=ToolCallBlock("", "", "{}")),
        ],
        None,
        2,
        "non-empty id and name",
    ),
    (call(0, "a", "f", arguments=""), None, 1, 'must end with "{}"'),
    (call(0, "a", "f", '{"x":1}', arguments="{}"), None, 2, "differ from the concatenated deltas"),
    ([*text(0, "a"), USAGE, USAGE], None, 4, "second usage"),
    ([BlockStart(index=0, block_type="text"), USAGE], None, 1, "still open"),
    ([USAGE, *text(0, "a")], None, 1, "block-start after usage"),
    ([BlockStart(index=0, block_type="text"), TextDelta(index=0, text="a"), STOP], None, 2, "still open"),
    ([TOOLS], None, 0, "without any tool-call block"),
    ([*call(0, "a", "f"), STOP], None, 2, "expected tool-calls"),
    ([Finish(FinishReason(kind="aborted"))], None, 0, "without a failure"),
    (["not a chunk"], None, 0, "not a stream chunk"),
]


@pytest.mark.parametrize(("chunks", "raised", "index", "reason"), BAD)
def test_violations_name_the_chunk_and_reason(
    chunks: list[Any], raised: BaseException | None, index: int, reason: str
) -> None:
    with pytest.raises(StreamViolation) as info:
        check_stream(chunks, raised)
    assert info.value.index == index
    assert reason in info.value.reason
    assert str(info.value).startswith(f"chunk #{index} (")


def test_violation_message_names_the_kind() -> None:
    with pytest.raises(StreamViolation, match=r"chunk #1 \(finish\): chunk after finish"):
        check_stream([STOP, STOP])
    with pytest.raises(StreamViolation, match=r"chunk #0 \(end of stream\)"):
        check_stream([])
    with pytest.raises(StreamViolation, match=r"chunk #0 \(str\)"):
        check_stream(["x"])  # type: ignore[list-item]


def test_checker_state_and_misuse() -> None:
    checker = StreamChecker()
    for chunk in [*call(0, "a", "f"), USAGE, TOOLS]:
        checker.feed(chunk)
    assert checker.finish == TOOLS
    assert checker.usage == USAGE
    assert checker.tool_call_blocks == 1
    checker.end()
    with pytest.raises(StreamViolation, match="end\\(\\) called twice"):
        checker.end()
    with pytest.raises(StreamViolation, match="after the end of the stream"):
        checker.feed(STOP)


async def source(chunks: list[StreamChunk], error: BaseException | None = None) -> AsyncIterator[StreamChunk]:
    for chunk in chunks:
        yield chunk
    if error is not None:
        raise error


@pytest.mark.anyio
async def test_checked_stream_passes_chunks_through() -> None:
    chunks = [*text(0, "hi"), STOP]
    async with CheckedStream(source(chunks)) as checked:
        assert [chunk async for chunk in checked] == chunks
        assert checked.chunks == chunks
        assert [chunk async for chunk in checked] == []  # exhausted: the end is checked once


@pytest.mark.anyio
async def test_checked_stream_reraises_legal_errors_and_flags_illegal_ones() -> None:
    error = LlmError("NETWORK", "reset")
    checked = CheckedStream(source(text(0, "a")[:2], error))
    with pytest.raises(LlmError) as info:
        async for _ in checked:
            pass
    assert info.value is error
    await checked.aclose()

    checked = CheckedStream(source([STOP], error))
    with pytest.raises(StreamViolation) as violation:
        async for _ in checked:
            pass
    assert violation.value.__cause__ is error
    await checked.aclose()

    checked = CheckedStream(source([STOP, STOP]))
    with pytest.raises(StreamViolation, match="after finish"):
        async for _ in checked:
            pass
    await checked.aclose()


@pytest.mark.anyio
async def test_checked_stream_lets_other_exceptions_through_and_closes_plain_iterators() -> None:
    class Plain:
        def __aiter__(self) -> Plain:
            return self

        async def __anext__(self) -> StreamChunk:
            raise KeyError("boom")

    checked = CheckedStream(Plain())
    with pytest.raises(KeyError):
        await checked.__anext__()
    await checked.aclose()  # nothing to close: no error
