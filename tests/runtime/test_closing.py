"""harness.stream owns closing: every generator of the chain is closed, outermost first."""

from __future__ import annotations

import logging
import types
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from runtime_scripted import AdapterPlugin, PassThrough, ScriptedAdapter, Stall, reply

from harness_core import BlockStart, GenerateOptions, Harness, StreamChunk, TextDelta, hookimpl

pytestmark = pytest.mark.anyio

LAYERS = ["finally:outer", "finally:inner", "finally:adapter"]


def _harness(log: list[str], script: list[Any], *extra: tuple[str, object]) -> Harness:
    return Harness(
        [
            ("outer", PassThrough("outer", log)),
            *extra,
            ("fake", AdapterPlugin(ScriptedAdapter(script, log=log))),
            ("inner", PassThrough("inner", log)),
        ]
    )


def _finallys(log: list[str]) -> list[str]:
    return [entry for entry in log if entry.startswith("finally:")]


async def _first_chunk_then(harness: Harness, error: Exception | None) -> None:
    """Stream, and after the first chunk raise ``error`` in the body (or break when ``None``)."""
    async with harness.stream(GenerateOptions(route="fake")) as chunks:
        async for _ in chunks:
            if error is not None:
                raise error
            break


async def test_break_closes_every_layer_outermost_first() -> None:
    log: list[str] = []
    async with _harness(log, reply("abc", "a", "b", "c")) as harness:
        async with harness.stream(GenerateOptions(route="fake")) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, TextDelta):
                    break
        assert _finallys(log) == LAYERS


async def test_exception_in_the_body_closes_every_layer_and_propagates() -> None:
    log: list[str] = []
    async with _harness(log, reply()) as harness:
        with pytest.raises(ValueError, match="consumer bug"):
            await _first_chunk_then(harness, ValueError("consumer bug"))
        assert _finallys(log) == LAYERS


async def test_cancellation_in_the_body_closes_every_layer_outermost_first() -> None:
    log: list[str] = []
    async with _harness(log, reply()) as harness:
        with anyio.CancelScope() as scope:
            async with harness.stream(GenerateOptions(route="fake")) as chunks:
                async for _ in chunks:
                    scope.cancel()
                    await anyio.sleep_forever()
        assert scope.cancelled_caught
        assert _finallys(log) == LAYERS


async def test_cancellation_while_the_adapter_stalls_propagates_and_closes_everything() -> None:
    log: list[str] = []
    async with _harness(log, [BlockStart(0, "text"), TextDelta(0, "x"), Stall()]) as harness:
        received: list[StreamChunk] = []
        with anyio.CancelScope() as scope:
            async with harness.stream(GenerateOptions(route="fake")) as chunks:
                async for chunk in chunks:
                    received.append(chunk)
                    if isinstance(chunk, TextDelta):
                        scope.cancel()  # delivered at the adapter's next await: its stalled read
        assert scope.cancelled_caught  # the cancellation was not swallowed by any layer
        assert received == [BlockStart(0, "text"), TextDelta(0, "x")]  # no finish was invented
        assert sorted(_finallys(log)) == sorted(LAYERS)


class AccountsInFinally:
    """Awaits in its finally (a ledger write): only a shielded close lets that finish."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in call_next(options):
                yield chunk
        finally:
            await anyio.lowlevel.checkpoint()
            self.log.append("finally:ledger")


async def test_awaiting_cleanup_is_shielded_from_cancellation() -> None:
    log: list[str] = []
    async with _harness(log, reply(), ("ledger", AccountsInFinally(log))) as harness:
        with anyio.CancelScope() as scope:
            async with harness.stream(GenerateOptions(route="fake")) as chunks:
                async for _ in chunks:
                    scope.cancel()
                    await anyio.sleep_forever()
        assert _finallys(log) == ["finally:outer", "finally:ledger", "finally:inner", "finally:adapter"]


class FailsInFinally:
    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in call_next(options):
                yield chunk
        finally:
            raise RuntimeError("cleanup failed")


async def test_close_error_is_raised_after_everything_was_closed(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    async with _harness(log, reply(), ("bad", FailsInFinally())) as harness:
        with pytest.raises(RuntimeError, match="cleanup failed"):
            await _first_chunk_then(harness, None)
        assert _finallys(log) == LAYERS
        assert "closing the stream generator" in caplog.text


async def test_close_error_does_not_mask_the_body_exception(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    async with _harness(log, reply(), ("bad", FailsInFinally())) as harness:
        with pytest.raises(KeyError):
            await _first_chunk_then(harness, KeyError("body"))
        assert _finallys(log) == LAYERS
        assert "cleanup failed" in caplog.text


class HangsInFinally:
    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in call_next(options):
                yield chunk
        finally:
            await anyio.sleep_forever()


async def test_a_hanging_close_is_bounded_and_the_rest_still_closes(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    harness = _harness(log, reply(), ("hang", HangsInFinally()))
    harness.close_timeout = 0.01
    with caplog.at_level(logging.WARNING, logger="harness"):
        async with harness, harness.stream(GenerateOptions(route="fake")) as chunks:
            async for _ in chunks:
                break
    assert _finallys(log) == LAYERS
    assert "took longer than" in caplog.text


async def test_zero_middleware_stream_is_the_boundary_over_the_adapter() -> None:
    log: list[str] = []
    adapter = ScriptedAdapter(reply("a", "a"), log=log)
    async with Harness([("fake", AdapterPlugin(adapter))]) as harness:
        context = harness.stream(GenerateOptions(route="fake"))
        async with context as chunks:
            assert chunks.__qualname__ == "AdapterBoundary._serve"  # type: ignore[attr-defined]
            async for _ in chunks:
                break
    assert log == ["finally:adapter"]


async def test_several_close_errors_are_grouped() -> None:
    log: list[str] = []
    async with _harness(log, reply(), ("bad1", FailsInFinally()), ("bad2", FailsInFinally())) as harness:
        with pytest.raises(ExceptionGroup) as caught:
            await _first_chunk_then(harness, None)
        assert [str(e) for e in caught.value.exceptions] == ["cleanup failed", "cleanup failed"]
        assert _finallys(log) == LAYERS


async def test_concurrent_streams_are_independent() -> None:
    log: list[str] = []
    results: dict[str, str] = {}
    async with _harness(log, reply("same", "sa", "me")) as harness:

        async def one(name: str) -> None:
            results[name] = (await harness.generate(GenerateOptions(route="fake"))).text

        async with anyio.create_task_group() as group:
            for name in ("a", "b", "c"):
                group.start_soon(one, name)
    assert results == {"a": "same", "b": "same", "c": "same"}
    assert sorted(_finallys(log)) == sorted(LAYERS * 3)


async def test_close_stream_skips_plain_iterators_and_reraises_cleanup_errors() -> None:
    from harness_core.chain import close_stream

    class Plain:
        def __aiter__(self) -> Plain:
            return self

        async def __anext__(self) -> int:
            raise StopAsyncIteration

    await close_stream(Plain())  # nothing to close

    async def failing() -> AsyncIterator[int]:
        try:
            yield 1
        finally:
            raise OSError("cleanup failed")

    stream = failing()
    await stream.__anext__()
    with pytest.raises(OSError, match="cleanup failed"):
        await close_stream(stream)


async def test_aclose_all_skips_an_async_generator_that_already_ended() -> None:
    """An ended async generator's ``aclose()`` does nothing (PEP 525), so it is not called: no
    bounded, shielded close is paid for a stream read to its end; a live one is closed."""
    from harness_core.chain import aclose_all

    class Generatorish:
        def __init__(self, frame: object) -> None:
            self.ag_frame = frame
            self.closed = 0

        async def aclose(self) -> None:
            self.closed += 1

    ended, live = Generatorish(None), Generatorish(object())
    assert await aclose_all([ended, live], 1.0, "stream") == []
    assert (ended.closed, live.closed) == (0, 1)

    async def one() -> AsyncGenerator[int, None]:
        yield 1

    stream = one()
    assert isinstance(stream, types.AsyncGeneratorType)
    assert [chunk async for chunk in stream] == [1]
    assert stream.ag_frame is None  # what the rule relies on: an ended generator has no frame
    assert await aclose_all([stream], 1.0, "stream") == []
