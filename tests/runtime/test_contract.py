"""The whole stream contract is checked at run time: a violation ends the stream as an error
finish naming the layer (the chain by default, the exact middleware or adapter when strict)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from runtime_scripted import AdapterPlugin, ScriptedAdapter, reply

from harness_core import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    Harness,
    LlmError,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    Usage,
    hookimpl,
)
from harness_core.contract import StreamContract
from harness_core.testing import check_stream
from harness_core.types import TokenUsage

pytestmark = pytest.mark.anyio

STOP = Finish(FinishReason("stop"))
USAGE = Usage(TokenUsage(input_tokens=1, output_tokens=1))


class Inject:
    """A middleware that yields ``extra`` before the first chunk of the inner stream."""

    def __init__(self, *extra: StreamChunk) -> None:
        self.extra = extra

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        for chunk in self.extra:
            yield chunk
        async for chunk in call_next(options):
            yield chunk


class Fine:
    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):
            yield chunk


async def collect(plugins: list[tuple[str, object]], *, strict: bool = False) -> list[StreamChunk]:
    harness = Harness(plugins)
    harness.strict = strict
    async with harness, harness.stream(GenerateOptions(route="fake")) as chunks:
        return [chunk async for chunk in chunks]


def failure_of(chunks: list[StreamChunk]) -> str:
    check_stream(chunks)  # still a legal stream for consumers
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == "PROTOCOL"
    return finish.reason.failure.message


async def test_a_delta_for_a_block_never_started_ends_the_stream_naming_the_chain() -> None:
    plugins = [("bad", Inject(TextDelta(5, "x"))), ("fake", AdapterPlugin(ScriptedAdapter(reply("hi"))))]
    chunks = await collect(plugins)
    assert chunks == chunks[-1:]  # nothing of the broken stream reaches the consumer
    assert failure_of(chunks) == (
        "the middleware chain ('bad') broke the stream contract: chunk #0 (text-delta): "
        "delta for block 5, which was never started"
    )


async def test_strict_mode_names_exactly_the_middleware_that_broke_it() -> None:
    plugins = [
        ("outer", Fine()),
        ("bad", Inject(BlockStart(0, "text"), TextDelta(0, "a"))),  # leaves block 0 open: the adapter reuses 0
        ("inner", Fine()),
        ("fake", AdapterPlugin(ScriptedAdapter(reply("hi")))),
    ]
    chunks = await collect(plugins, strict=True)
    message = failure_of(chunks)
    assert message.startswith("middleware 'bad' broke the stream contract: chunk #2 (block-start): block index 0")
    assert chunks[:3] == [BlockStart(0, "text"), TextDelta(0, "a"), BlockEnd(0, TextBlock("a"))]


async def test_strict_mode_names_the_adapter() -> None:
    broken: list[StreamChunk] = [BlockStart(0, "text"), TextDelta(0, "t"), ReasoningDelta(0, "x"), STOP]
    chunks = await collect([("fake", AdapterPlugin(ScriptedAdapter(broken)))], strict=True)
    assert failure_of(chunks) == (
        "the adapter of route 'fake' broke the stream contract: chunk #2 (reasoning-delta): "
        "reasoning delta for the text block 0"
    )


async def test_generate_raises_the_violation() -> None:
    harness = Harness([("bad", Inject(BlockEnd(0, TextBlock("")))), ("fake", AdapterPlugin(ScriptedAdapter(reply())))])
    async with harness:
        with pytest.raises(LlmError) as caught:
            await harness.generate(GenerateOptions(route="fake"))
    assert caught.value.code == "PROTOCOL"
    assert "block-end for block 0, which was never started" in caught.value.message


@pytest.mark.parametrize(
    ("chunks", "problem"),
    [
        ([BlockStart(1, "text")], "chunk #0 (block-start): block index 1; expected 0"),
        ([BlockStart(0, "text"), BlockEnd(0, TextBlock("")), TextDelta(0, "x")], "which already ended"),
        ([BlockStart(0, "text"), TextDelta(0, "")], "chunk #1 (text-delta): an empty delta"),
        ([BlockStart(0, "text"), ToolCallDelta(0, "c", "{}")], "tool-call delta for the text block 0"),
        ([BlockStart(0, "text"), STOP], "finish while block [0] still open"),
        ([BlockStart(0, "text"), BlockStart(1, "text"), USAGE], "usage while blocks [0, 1] still open"),
        ([USAGE, USAGE], "chunk #1 (usage): a second usage"),
        ([USAGE, BlockStart(0, "text")], "block-start after usage"),
        ([STOP, STOP], "chunk #1 (finish): a chunk after finish"),
        ([BlockEnd(3, TextBlock(""))], "block-end for block 3, which was never started"),
        (["not a chunk"], "not a stream chunk: str"),
    ],
)
def test_each_rule(chunks: list[StreamChunk], problem: str) -> None:
    contract = StreamContract()
    problems = [contract.check(chunk) for chunk in chunks]
    assert problems[:-1] == [None] * (len(chunks) - 1)
    assert problems[-1] is not None
    assert problem in problems[-1]


def test_a_legal_stream_passes() -> None:
    contract = StreamContract()
    stream: list[StreamChunk] = [
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "r"),
        BlockEnd(0, TextBlock("r")),
        BlockStart(1, "tool-call", id="c", name="f"),
        ToolCallDelta(1, "c", ""),
        BlockEnd(1, TextBlock("")),
        BlockStart(2, "text"),
        TextDelta(2, "t"),
        BlockEnd(2, TextBlock("t")),
        USAGE,
        STOP,
    ]
    assert [contract.check(chunk) for chunk in stream] == [None] * len(stream)
    assert contract.count == len(stream)


class Raises:
    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):
            yield chunk
            raise KeyError("boom")


@pytest.mark.parametrize("strict", [False, True])
async def test_an_exception_from_a_middleware_names_it(strict: bool) -> None:
    plugins = [("outer", Fine()), ("boom", Raises()), ("fake", AdapterPlugin(ScriptedAdapter(reply("hi"))))]
    with pytest.raises(KeyError) as caught:
        await collect(plugins, strict=strict)
    assert caught.value.__notes__ == ["raised by middleware plugin 'boom'"]
