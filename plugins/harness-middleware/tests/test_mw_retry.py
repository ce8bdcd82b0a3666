"""retry: success after failures, giving up, retry_after, abort during the wait, never after content."""

from __future__ import annotations

import anyio
import msgspec
import pytest
from mw_helpers import Script, collect, error_finish, options, stop, text_chunks, tool_chunks, usage

from harness_core.abort import AbortSignal
from harness_core.errors import LlmError
from harness_core.types import BlockEnd, BlockStart, Finish, ReasoningBlock, StreamChunk
from harness_middleware.retry import RetryPlugin

pytestmark = pytest.mark.anyio


class Sleeps:
    """A sleep that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await anyio.lowlevel.checkpoint()


def plugin(sleeps: Sleeps | None = None, **config: object) -> RetryPlugin:
    return RetryPlugin(msgspec.convert(config, RetryPlugin.Config), sleep=sleeps)


async def test_success_after_failures() -> None:
    sleeps = Sleeps()
    script = Script(
        [error_finish("RATE_LIMITED")],
        [BlockStart(index=0, block_type="text"), error_finish("OVERLOADED")],
        [*text_chunks("hel", "lo"), usage(), stop()],
    )
    chunks = await collect(
        plugin(sleeps, max_attempts=5, jitter=False, initial_delay=0.25).llm_stream(options(), script)
    )
    assert chunks == [*text_chunks("hel", "lo"), usage(), stop()]
    assert len(script.calls) == 3
    assert script.closed == 3  # every attempt's stream was closed
    assert sleeps.waits == [0.25, 0.5]  # exponential without jitter: multiplier * 2**n


async def test_gives_up_with_the_last_failure() -> None:
    sleeps = Sleeps()
    script = Script([error_finish("SERVER", message="first")], [error_finish("SERVER", message="last")])
    chunks = await collect(plugin(sleeps, max_attempts=3).llm_stream(options(), script))
    assert len(script.calls) == 3
    assert len(sleeps.waits) == 2
    assert all(0 <= w <= 30 for w in sleeps.waits)
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.failure is not None
    assert chunks[-1].reason.failure.message == "last"
    assert script.closed == 3


async def test_gives_up_with_the_held_chunks_of_the_last_attempt() -> None:
    # a signed reasoning block may hold only its signature: no content, so no commitment
    failing: list[StreamChunk] = [
        BlockStart(index=0, block_type="reasoning", signed=True),
        BlockEnd(index=0, block=ReasoningBlock("", signed=True)),
        usage(),
        error_finish("SERVER"),
    ]
    script = Script(failing)
    chunks = await collect(plugin(Sleeps(), max_attempts=2).llm_stream(options(), script))
    assert chunks == failing
    assert len(script.calls) == 2


async def test_honours_retry_after() -> None:
    sleeps = Sleeps()
    script = Script([error_finish("RATE_LIMITED", retry_after=2.5)], [*text_chunks("ok"), stop()])
    await collect(plugin(sleeps, max_elapsed=10).llm_stream(options(), script))
    assert sleeps.waits == [2.5]


async def test_retry_after_ignored_when_not_honoured() -> None:
    sleeps = Sleeps()
    script = Script([error_finish("RATE_LIMITED", retry_after=7.0)], [*text_chunks("ok"), stop()])
    await collect(
        plugin(sleeps, honour_retry_after=False, jitter=False, initial_delay=1.0).llm_stream(options(), script)
    )
    assert sleeps.waits == [1.0]


async def test_retry_after_beyond_max_elapsed_gives_up_at_once() -> None:
    sleeps = Sleeps()
    script = Script([error_finish("RATE_LIMITED", retry_after=120)], [*text_chunks("ok"), stop()])
    chunks = await collect(plugin(sleeps, max_elapsed=60).llm_stream(options(), script))
    assert sleeps.waits == []
    assert len(script.calls) == 1
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.kind == "error"


async def test_no_elapsed_limit() -> None:
    sleeps = Sleeps()
    script = Script([error_finish("RATE_LIMITED", retry_after=1000)], [*text_chunks("ok"), stop()])
    chunks = await collect(plugin(sleeps, max_elapsed=None).llm_stream(options(), script))
    assert sleeps.waits == [1000]
    assert chunks[-1] == stop()


async def test_never_retries_after_content() -> None:
    # content (a delta) went out, then the failure: passed on, never retried
    script = Script([*text_chunks("partial"), error_finish("SERVER")])
    chunks = await collect(plugin(Sleeps()).llm_stream(options(), script))
    assert len(script.calls) == 1
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.kind == "error"


async def test_tool_call_block_commits() -> None:
    script = Script([*tool_chunks(), error_finish("SERVER")])
    chunks = await collect(plugin(Sleeps()).llm_stream(options(), script))
    assert len(script.calls) == 1
    assert chunks[:-1] == tool_chunks()


async def test_non_retryable_failure_passes_through() -> None:
    script = Script([error_finish("AUTH")])
    chunks = await collect(plugin(Sleeps()).llm_stream(options(), script))
    assert len(script.calls) == 1
    assert chunks == [error_finish("AUTH")]


async def test_code_not_configured_is_not_retried() -> None:
    script = Script([error_finish("TIMEOUT")], [*text_chunks("ok"), stop()])
    chunks = await collect(plugin(Sleeps(), codes=["RATE_LIMITED"]).llm_stream(options(), script))
    assert len(script.calls) == 1
    assert chunks == [error_finish("TIMEOUT")]


async def test_raised_retryable_error_is_retried() -> None:
    sleeps = Sleeps()
    script = Script([LlmError("NETWORK", "reset", retry_after=0.1)], [*text_chunks("ok"), stop()])
    chunks = await collect(plugin(sleeps).llm_stream(options(), script))
    assert chunks == [*text_chunks("ok"), stop()]
    assert sleeps.waits == [0.1]


async def test_raised_error_after_giving_up_is_reraised() -> None:
    error = LlmError("NETWORK", "reset")
    script = Script([BlockStart(index=0, block_type="text"), error])
    with pytest.raises(LlmError) as caught:
        await collect(plugin(Sleeps(), max_attempts=2).llm_stream(options(), script))
    assert caught.value is error
    assert len(script.calls) == 2
    assert script.closed == 2


async def test_raised_non_retryable_error_is_not_retried() -> None:
    script = Script([LlmError("BAD_REQUEST", "no")])
    with pytest.raises(LlmError, match="BAD_REQUEST"):
        await collect(plugin(Sleeps()).llm_stream(options(), script))
    assert len(script.calls) == 1


async def test_unknown_chunk_kind_commits_and_passes_through() -> None:
    odd = object()
    script = Script([odd, error_finish("SERVER")])  # type: ignore[list-item]
    out: list[object] = []
    async for chunk in plugin(Sleeps()).llm_stream(options(), script):
        out.append(chunk)
    assert out == [odd, error_finish("SERVER")]
    assert len(script.calls) == 1


async def test_stream_without_finish_is_passed_on() -> None:
    script = Script([BlockStart(index=0, block_type="text")])
    out = [c async for c in plugin(Sleeps()).llm_stream(options(), script)]
    assert out == [BlockStart(index=0, block_type="text")]


async def test_abort_during_the_wait_finishes_aborted() -> None:
    abort = AbortSignal()

    async def sleep(seconds: float) -> None:
        abort.fire("stop please")
        await anyio.sleep_forever()

    script = Script([error_finish("RATE_LIMITED")], [*text_chunks("ok"), stop()])
    chunks = await collect(RetryPlugin(sleep=sleep).llm_stream(options(abort=abort), script))
    assert len(script.calls) == 1
    assert len(chunks) == 1
    assert isinstance(chunks[0], Finish)
    assert chunks[0].reason.kind == "aborted"
    assert chunks[0].reason.failure is not None
    assert chunks[0].reason.failure.message == "stop please"


async def test_default_sleep_and_config() -> None:
    # the default sleep is anyio.sleep: a retry_after of 0 waits for nothing
    script = Script([error_finish("SERVER", retry_after=0.0)], [*text_chunks("ok"), stop()])
    chunks = await collect(RetryPlugin().llm_stream(options(), script))
    assert chunks[-1] == stop()
    assert len(script.calls) == 2


async def test_consumer_break_closes_the_committed_attempt() -> None:
    script = Script([*text_chunks("a", "b"), stop()])
    stream = plugin(Sleeps()).llm_stream(options(), script)
    first: list[StreamChunk] = []
    async for chunk in stream:
        first.append(chunk)
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert first == [BlockStart(index=0, block_type="text")]
    assert script.closed == 1


async def test_cancellation_during_an_attempt_propagates() -> None:
    script = Script([30.0])
    with anyio.move_on_after(0.01) as scope:
        await collect(plugin(Sleeps()).llm_stream(options(), script))
    assert scope.cancelled_caught
    assert script.closed == 1
