"""timeout: first-chunk, idle and total timers; partial blocks closed; no stray cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import anyio
import msgspec
import pytest
from mw_helpers import Script, Stall, collect, options, stop, text_chunks

from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
)
from harness_middleware.timeout import TimeoutPlugin

pytestmark = pytest.mark.anyio


def plugin(**config: object) -> TimeoutPlugin:
    return TimeoutPlugin(msgspec.convert(config, TimeoutPlugin.Config))


def failure_of(chunk: object) -> tuple[str, str]:
    assert isinstance(chunk, Finish)
    assert chunk.reason.kind == "error"
    assert chunk.reason.failure is not None
    return chunk.reason.failure.code, chunk.reason.failure.message


async def test_first_chunk_timeout() -> None:
    inner = Stall()
    chunks = await collect(plugin(first_chunk=0.02, idle=None).llm_stream(options(), inner))
    assert len(chunks) == 1
    code, message = failure_of(chunks[0])
    assert code == "TIMEOUT"
    assert "first_chunk" in message
    assert chunks[0].reason.failure.retryable  # type: ignore[union-attr]
    assert inner.closed == 1


async def test_idle_timeout_closes_open_blocks_with_partial_content() -> None:
    inner = Stall(
        BlockStart(index=0, block_type="reasoning", signed=True),
        ReasoningDelta(index=0, text="think"),
        BlockEnd(index=0, block=ReasoningBlock("think", signed=True)),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="ab"),
        TextDelta(index=1, text="c"),
        BlockStart(index=2, block_type="tool-call", id="c1"),
        ToolCallDelta(index=2, id="c1", name="lookup", arguments_delta='{"q": '),
        BlockStart(index=3, block_type="tool-call", id="c2", name="other"),
        BlockStart(index=4, block_type="reasoning", signed=True),
    )
    # the chunks before the stall arrive at once; an idle bound far above any scheduling delay of a
    # loaded machine keeps the verdict independent of load (the stall itself is endless)
    chunks = await collect(plugin(first_chunk=10, idle=0.5).llm_stream(options(), inner))
    assert chunks[10:14] == [
        BlockEnd(index=1, block=TextBlock("abc")),
        BlockEnd(index=2, block=ToolCallBlock(id="c1", name="lookup", arguments='{"q": ')),
        BlockEnd(index=3, block=ToolCallBlock(id="c2", name="other", arguments="{}")),
        BlockEnd(index=4, block=ReasoningBlock("", signed=True)),
    ]
    code, message = failure_of(chunks[-1])
    assert code == "TIMEOUT"
    assert "idle" in message
    assert inner.closed == 1


async def test_total_deadline() -> None:
    """Deltas keep coming (the idle and first-chunk bounds never run out), endlessly: only the total
    deadline can end the stream, however slow the machine is."""
    closed = 0

    async def endless(options: object) -> AsyncIterator[StreamChunk]:
        nonlocal closed
        try:
            yield BlockStart(index=0, block_type="text")
            while True:
                await anyio.sleep(0.01)
                yield TextDelta(index=0, text="x")
        finally:
            closed += 1

    chunks = await collect(plugin(first_chunk=60, idle=60, total=0.2).llm_stream(options(), endless))
    code, message = failure_of(chunks[-1])
    assert code == "TIMEOUT"
    assert "total" in message
    assert isinstance(chunks[-2], BlockEnd)
    assert closed == 1


async def test_total_alone() -> None:
    chunks = await collect(plugin(first_chunk=None, idle=None, total=0.02).llm_stream(options(), Stall()))
    assert failure_of(chunks[-1])[0] == "TIMEOUT"


async def test_fast_stream_passes_unchanged() -> None:
    expected = [*text_chunks("a", "b"), stop()]
    chunks = await collect(plugin(first_chunk=5, idle=5, total=5).llm_stream(options(), Script(expected)))
    assert chunks == expected


async def test_no_timers() -> None:
    expected = [*text_chunks("a"), stop()]
    chunks = await collect(plugin(first_chunk=None, idle=None).llm_stream(options(), Script(expected)))
    assert chunks == expected


async def test_nothing_after_finish_even_if_the_inner_stream_stalls() -> None:
    inner = Stall(*text_chunks("a"), stop())
    chunks = await collect(plugin(idle=0.5).llm_stream(options(), inner))  # a read past the finish would time out
    assert chunks == [*text_chunks("a"), stop()]
    assert inner.closed == 1


async def test_unknown_chunk_kinds_pass_through() -> None:
    odd = object()
    out = [c async for c in plugin().llm_stream(options(), Script([odd, stop()]))]  # type: ignore[list-item]
    assert out == [odd, stop()]


async def test_no_stray_cancellation_reaches_the_consumer() -> None:
    """After a timeout the consumer's own awaits run normally: no cancel scope leaked."""
    inner = Stall(BlockStart(index=0, block_type="text"), TextDelta(index=0, text="a"))
    seen: list[object] = []
    cancelled = anyio.get_cancelled_exc_class()
    try:
        stream = plugin(idle=0.3).llm_stream(options(), inner)  # far above a loaded machine's delays
        async for chunk in stream:
            seen.append(chunk)
            await anyio.sleep(0.4)  # the consumer is slower than the bound: the idle timer must not count this
        await anyio.sleep(0.01)
        await anyio.lowlevel.checkpoint()
    except cancelled:  # pragma: no cover - the failure this test exists to catch
        pytest.fail("a cancellation escaped the timeout middleware")
    assert failure_of(seen[-1])[0] == "TIMEOUT"
    assert seen[1] == TextDelta(index=0, text="a")


async def test_outer_cancellation_propagates_and_closes_the_inner_stream() -> None:
    inner = Stall()
    with anyio.move_on_after(0.02) as scope:
        await collect(plugin(first_chunk=10).llm_stream(options(), inner))
    assert scope.cancelled_caught
    assert inner.closed == 1


async def test_default_config() -> None:
    assert TimeoutPlugin().config == TimeoutPlugin.Config(first_chunk=60.0, idle=60.0, total=None)


@pytest.mark.parametrize("config", [{}, {"first_chunk": None, "idle": None}])
async def test_stream_without_finish_is_passed_on(config: dict[str, object]) -> None:
    # not a legal stream; the timeout layer passes it on as it is and adds nothing
    out = [c async for c in plugin(**config).llm_stream(options(), Script(text_chunks("a")))]
    assert out == text_chunks("a")


async def test_inner_iterator_without_aclose() -> None:
    class Plain:
        def __init__(self) -> None:
            self.items = [*text_chunks("a"), stop()]

        def __aiter__(self) -> Plain:
            return self

        async def __anext__(self) -> object:
            if not self.items:
                raise StopAsyncIteration
            return self.items.pop(0)

    chunks = await collect(plugin().llm_stream(options(), lambda _: Plain()))  # type: ignore[arg-type,return-value]
    assert chunks == [*text_chunks("a"), stop()]


async def test_a_read_that_swallows_the_timeout_keeps_its_chunk() -> None:
    """An inner stream that catches the timer's cancellation and returns a chunk anyway: the
    chunk is passed on, the stream goes on, and no cancellation is left pending for the caller."""
    chunks = text_chunks("late")
    cancelled = anyio.get_cancelled_exc_class()

    async def inner(options: object) -> AsyncIterator[StreamChunk]:
        with contextlib.suppress(cancelled):  # a misbehaving inner stream
            await anyio.sleep_forever()
        for chunk in [*chunks, stop()]:
            yield chunk

    out = await collect(plugin(first_chunk=0.01, idle=None).llm_stream(options(), inner))
    await anyio.lowlevel.checkpoint()  # a stray cancellation would surface here
    assert out == [*chunks, stop()]


async def test_a_total_deadline_beyond_the_idle_timer_leaves_idle_in_charge() -> None:
    chunks = [*text_chunks("a", "b"), stop()]
    assert await collect(plugin(idle=30, total=3600).llm_stream(options(), Script(chunks))) == chunks


def test_read_timer_reads_the_loop_s_own_clock() -> None:
    """asyncio's clock is read as ``time.monotonic`` directly; a loop with its own clock (a
    subclass, or a clock replaced on the instance) is read through ``loop.time``."""
    import time

    from harness_middleware.timeout import _clock

    class Shifted(asyncio.SelectorEventLoop):
        def time(self) -> float:
            return 1000.0 + super().time()

    plain, shifted, replaced = asyncio.SelectorEventLoop(), Shifted(), asyncio.SelectorEventLoop()
    try:
        replaced.time = lambda: 5.0  # type: ignore[method-assign]
        assert _clock(plain) is time.monotonic
        assert _clock(shifted)() >= 1000.0
        assert _clock(replaced)() == 5.0
    finally:
        for loop in (plain, shifted, replaced):
            loop.close()
