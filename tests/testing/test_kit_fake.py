"""FakeAdapter: replay, delays, stalls, failures, abort, cancellation, records."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterator

import anyio
import pytest

from harness_core.abort import AbortSignal
from harness_core.errors import LlmError
from harness_core.testing.check import check_stream
from harness_core.testing.fake import Delay, FakeAdapter, Raise, Stall, Step, text_reply, tool_call_reply
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    ModelInfo,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
)

pytestmark = pytest.mark.anyio


async def run(adapter: FakeAdapter, options: GenerateOptions | None = None) -> list[StreamChunk]:
    stream = adapter.stream(options or GenerateOptions(route="fake", model="m"))
    assert isinstance(stream, AsyncGenerator)
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.aclose()


async def test_replays_scripts_in_order_and_repeats_the_last() -> None:
    usage = TokenUsage(input_tokens=3, output_tokens=2)
    adapter = FakeAdapter(text_reply("Hel", "lo", usage=usage), tool_call_reply("c1", "f", '{"a":', "1}"))
    first = await run(adapter)
    assert check_stream(first) == first
    assert "".join(c.text for c in first if isinstance(c, TextDelta)) == "Hello"
    second = await run(adapter)
    third = await run(adapter)
    assert second == third == check_stream(second)
    assert isinstance(second[-1], Finish)
    assert second[-1].reason.kind == "tool-calls"
    assert [o.route for o in adapter.calls] == ["fake"] * 3
    assert adapter.started == adapter.finalized == 3


async def test_builders() -> None:
    assert text_reply() == [Finish(FinishReason(kind="stop"))]
    empty_call = tool_call_reply("c", "f", usage=TokenUsage(input_tokens=1, output_tokens=1))
    assert check_stream(empty_call) == empty_call
    assert empty_call[1] == BlockEnd(index=0, block=ToolCallBlock("c", "f", "{}"))
    assert text_reply("x", reason="length", raw="max_tokens", replay_state={"k": 1})[-1] == Finish(
        FinishReason(kind="length", raw="max_tokens"), replay_state={"k": 1}
    )


async def test_script_function_receives_the_options() -> None:
    adapter = FakeAdapter(lambda options: text_reply(options.model or "?"))
    chunks = await run(adapter, GenerateOptions(model="echo"))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["echo"]


async def test_delay_and_raise() -> None:
    error = LlmError("SERVER", "boom")
    adapter = FakeAdapter([BlockStart(index=0, block_type="text"), Delay(0.001), Raise(error)])
    got: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in adapter.stream(GenerateOptions()):
            got.append(chunk)

    with pytest.raises(LlmError) as info:
        await consume()
    assert info.value is error
    assert got == [BlockStart(index=0, block_type="text")]
    assert adapter.finalized == 1


async def test_unexpected_exception() -> None:
    adapter = FakeAdapter([Raise(KeyError("bug"))])
    with pytest.raises(KeyError):
        await run(adapter)


async def test_abort_during_a_stall_closes_open_blocks_and_finishes_aborted() -> None:
    abort = AbortSignal()
    adapter = FakeAdapter(
        [
            BlockStart(index=0, block_type="reasoning", signed=True),
            ReasoningDelta(index=0, text="hm"),
            BlockEnd(index=0, block=ReasoningBlock("hm", signed=True)),
            BlockStart(index=1, block_type="text"),
            TextDelta(index=1, text="par"),
            BlockStart(index=2, block_type="tool-call", id="c9", name="f"),
            ToolCallDelta(index=2, id="c9", arguments_delta='{"q"'),
            BlockStart(index=3, block_type="tool-call"),
            BlockStart(index=4, block_type="reasoning"),
            ReasoningDelta(index=4, text="r"),
            Stall(),
            TextDelta(index=1, text="never"),
        ]
    )
    got: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in adapter.stream(GenerateOptions(abort=abort)):
            got.append(chunk)
            if chunk == ReasoningDelta(index=4, text="r"):
                abort.fire("user stop")

    await consume()
    tail = got[10:]
    assert tail[:4] == [
        BlockEnd(index=1, block=TextBlock("par")),
        BlockEnd(index=2, block=ToolCallBlock("c9", "f", '{"q"')),
        BlockEnd(index=3, block=ToolCallBlock("call_3", "", "{}")),
        BlockEnd(index=4, block=ReasoningBlock("r")),
    ]
    finish = tail[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "aborted"
    assert finish.reason.failure is not None
    assert (finish.reason.failure.code, finish.reason.failure.message) == ("ABORTED", "user stop")


async def test_abort_before_a_step_and_during_a_delay() -> None:
    abort = AbortSignal()
    abort.fire()
    chunks = await run(FakeAdapter(text_reply("a")), GenerateOptions(abort=abort))
    assert chunks == [Finish(FinishReason(kind="aborted", failure=chunks[0].reason.failure))]  # type: ignore[union-attr]

    abort = AbortSignal()
    delaying = anyio.Event()

    def script(options: GenerateOptions) -> Iterator[Step]:
        delaying.set()  # the waiter below runs once the adapter waits in the delay
        yield Delay(60)
        yield from text_reply("late")

    adapter = FakeAdapter(script)  # type: ignore[arg-type]  # steps are iterated once, lazily: a generator works
    async with anyio.create_task_group() as tg:
        tg.start_soon(fire_on, delaying, abort)
        chunks = await run(adapter, GenerateOptions(abort=abort))
    assert check_stream(chunks) == chunks
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.kind == "aborted"


async def fire_on(event: anyio.Event, abort: AbortSignal) -> None:
    await event.wait()
    abort.fire()


async def test_abort_after_finish_changes_nothing() -> None:
    abort = AbortSignal()
    script = [*text_reply("a"), Delay(0.001), Stall()]
    adapter = FakeAdapter(script)
    got: list[StreamChunk] = []
    with anyio.fail_after(30):  # a hang guard: the fired signal ends the stall, the stream ends by itself
        async for chunk in adapter.stream(GenerateOptions(abort=abort)):
            got.append(chunk)
            if isinstance(chunk, Finish):
                abort.fire()
    assert got == text_reply("a")


async def test_stall_without_signal_until_cancelled() -> None:
    adapter = FakeAdapter([Stall()])
    with anyio.move_on_after(0.05) as scope:
        await run(adapter)
    assert scope.cancelled_caught
    assert adapter.cancelled == 1
    assert adapter.finalized == 1


async def test_closing_early_runs_finally() -> None:
    adapter = FakeAdapter(text_reply("a", "b"))
    stream: AsyncIterator[StreamChunk] = adapter.stream(GenerateOptions())
    assert isinstance(stream, AsyncGenerator)
    await stream.__anext__()
    await stream.aclose()
    assert adapter.finalized == 1


async def test_models_and_close() -> None:
    plain = FakeAdapter(text_reply())
    assert plain.resolve_model("x") == ModelInfo(model="x")
    with pytest.raises(LlmError) as info:
        await plain.list_models()
    assert info.value.code == "UNSUPPORTED"
    models = [ModelInfo(model="a", context_window=10), ModelInfo(model="b")]
    known = FakeAdapter(text_reply(), models=models)
    assert known.resolve_model("a") == models[0]
    assert await known.list_models() == models
    with pytest.raises(LlmError) as info:
        known.resolve_model("zzz")
    assert info.value.code == "NOT_FOUND"
    assert not known.closed
    await known.aclose()
    assert known.closed


def test_needs_a_script() -> None:
    with pytest.raises(ValueError, match="at least one script"):
        FakeAdapter()
