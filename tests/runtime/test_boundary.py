"""The final adapter boundary: every adapter fault becomes a legal terminal; cancellation propagates."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from runtime_scripted import AdapterPlugin, Raise, ScriptedAdapter, reply

from harness_core import (
    AbortSignal,
    BlockEnd,
    BlockStart,
    Failure,
    Finish,
    FinishReason,
    GenerateOptions,
    Harness,
    LlmAdapter,
    LlmError,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
)
from harness_core.plugininfo import PluginFailure
from harness_core.testing.check import check_stream

pytestmark = pytest.mark.anyio


async def collect(harness: Harness, options: GenerateOptions) -> list[StreamChunk]:
    """The chunks of one stream, checked against the stream obligations (docs/stream-obligations.md)."""
    async with harness.stream(options) as chunks:
        return check_stream([chunk async for chunk in chunks])


def failure_of(chunk: StreamChunk) -> Failure:
    assert isinstance(chunk, Finish)
    assert chunk.reason.failure is not None
    return chunk.reason.failure


PARTIAL: list[StreamChunk] = [
    BlockStart(0, "text"),
    TextDelta(0, "par"),
    TextDelta(0, "tial"),
    BlockStart(1, "tool-call", id="call_1", name="get"),
    ToolCallDelta(1, "call_1", '{"city":'),
]
CLOSED: list[StreamChunk] = [
    *PARTIAL,
    BlockEnd(0, TextBlock("partial")),
    BlockEnd(1, ToolCallBlock("call_1", "get", '{"city":')),
]


async def test_unknown_route_is_one_no_adapter_finish_naming_routes_and_failures() -> None:
    failures = [
        PluginFailure(
            key="openai:groq", name="openai", message="ImportError: no httpx", stage="import", is_middleware=False
        ),
        PluginFailure(key="trace", name="trace", message="unrelated", stage="init", is_middleware=True),
    ]
    harness = Harness([("fake", AdapterPlugin(ScriptedAdapter(), ["a", "b"]))], failures=failures)
    async with harness:
        (chunk,) = await collect(harness, GenerateOptions(route="groq"))
    failure = failure_of(chunk)
    assert chunk == Finish(FinishReason(kind="error", failure=failure))
    assert failure.code == "NO_ADAPTER"
    assert "'groq'" in failure.message
    assert "known routes: 'a', 'b'" in failure.message
    assert "plugin 'openai:groq' failed at import: ImportError: no httpx" in failure.message
    assert "trace" not in failure.message  # a middleware failure cannot explain a missing route


async def test_an_unknown_route_suggests_a_served_route_or_one_a_failed_plugin_claims() -> None:
    failed = PluginFailure(
        key="openai", name="openai", message="no API key", stage="config", is_middleware=False, routes=["openai"]
    )
    harness = Harness([("fake", AdapterPlugin(ScriptedAdapter(), ["mock"]))], failures=[failed])
    async with harness:
        (served,) = await collect(harness, GenerateOptions(route="mokc"))
        (claimed,) = await collect(harness, GenerateOptions(route="opnai"))
    assert failure_of(served).message.startswith("no adapter serves route 'mokc' (did you mean 'mock'?); known routes")
    assert failure_of(claimed).message.startswith("no adapter serves route 'opnai' (did you mean 'openai'?);")


async def test_no_route_and_no_default() -> None:
    async with Harness() as harness:
        (chunk,) = await collect(harness, GenerateOptions())
    failure = failure_of(chunk)
    assert failure.code == "NO_ADAPTER"
    assert "no route given" in failure.message
    assert "known routes: none" in failure.message


async def test_adapter_llm_error_closes_open_blocks_then_finishes_with_the_error() -> None:
    error = LlmError("RATE_LIMITED", "slow down", status=429, retry_after=2.0, provider="fake", request_id="req_1")
    log: list[str] = []
    async with Harness([("fake", AdapterPlugin(ScriptedAdapter([*PARTIAL, Raise(error)], log=log)))]) as harness:
        chunks = await collect(harness, GenerateOptions(route="fake"))
    assert chunks == [*CLOSED, Finish(FinishReason(kind="error", failure=error.to_failure()))]
    assert failure_of(chunks[-1]).retryable
    assert log == ["finally:adapter"]


async def test_unexpected_exception_is_internal_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    async with Harness([("fake", AdapterPlugin(ScriptedAdapter([*PARTIAL, Raise(KeyError("choices"))])))]) as harness:
        chunks = await collect(harness, GenerateOptions(route="fake"))
    assert chunks[:-1] == CLOSED
    failure = failure_of(chunks[-1])
    assert failure.code == "INTERNAL"
    assert "KeyError" in failure.message
    assert "'fake'" in failure.message
    (record,) = [r for r in caplog.records if r.name == "harness"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError


class CutByAbort(LlmAdapter):
    """Sends PARTIAL, then its read is cut by the abort: it raises (or, ``ends=True``, just stops)."""

    def __init__(self, ends: bool = False) -> None:
        self.ends = ends

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        for chunk in PARTIAL:
            yield chunk
        assert options.abort is not None
        await options.abort.wait()
        if not self.ends:
            raise LlmError("NETWORK", "connection closed", provider="cut")


@pytest.mark.parametrize("ends", [False, True])
async def test_abort_turns_an_adapter_fault_into_finish_aborted(ends: bool) -> None:
    abort = AbortSignal()
    async with Harness([("fake", AdapterPlugin(CutByAbort(ends)))]) as harness:
        received: list[StreamChunk] = []
        async with harness.stream(GenerateOptions(route="fake", abort=abort)) as chunks:
            async for chunk in chunks:
                received.append(chunk)
                if len(received) == len(PARTIAL):
                    abort.fire("user pressed stop")
    assert check_stream(received)[:-1] == CLOSED
    failure = LlmError("ABORTED", "user pressed stop", provider=None if ends else "cut").to_failure()
    assert received[-1] == Finish(FinishReason(kind="aborted", failure=failure))


async def test_stream_without_finish_is_protocol() -> None:
    async with Harness([("fake", AdapterPlugin(ScriptedAdapter(PARTIAL)))]) as harness:
        chunks = await collect(harness, GenerateOptions(route="fake"))
    assert chunks[:-1] == CLOSED
    assert failure_of(chunks[-1]).code == "PROTOCOL"
    assert "ended its stream without a finish" in failure_of(chunks[-1]).message


async def test_nothing_after_the_adapter_finish_is_read() -> None:
    log: list[str] = []
    script = [*reply("x"), TextDelta(0, "late"), Raise(RuntimeError("never reached"))]
    async with Harness([("fake", AdapterPlugin(ScriptedAdapter(script, log=log)))]) as harness:
        chunks = await collect(harness, GenerateOptions(route="fake"))
    assert chunks == reply("x")
    assert log == ["finally:adapter"]


class RaisesAtCall(LlmAdapter):
    """``stream`` is a plain method that validates before returning a generator."""

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        raise LlmError("UNSUPPORTED", "seed is not supported")


class PlainIterator(LlmAdapter):
    """``stream`` returns an async iterator that is not a generator (no aclose)."""

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        chunks = iter(reply("it"))

        class Iterator:
            def __aiter__(self) -> Iterator:
                return self

            async def __anext__(self) -> StreamChunk:
                for chunk in chunks:
                    return chunk
                raise StopAsyncIteration

        return Iterator()


class FailsToClose(ScriptedAdapter):
    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        try:
            for chunk in reply("done"):
                yield chunk
        finally:
            raise OSError("socket already closed")


async def test_adapter_shapes(caplog: pytest.LogCaptureFixture) -> None:
    plugins: list[tuple[str, Any]] = [
        ("raises", AdapterPlugin(RaisesAtCall(), ["raises"])),
        ("plain", AdapterPlugin(PlainIterator(), ["plain"])),
        ("noclose", AdapterPlugin(FailsToClose(), ["noclose"])),
    ]
    async with Harness(plugins) as harness:
        (chunk,) = await collect(harness, GenerateOptions(route="raises"))
        assert failure_of(chunk).code == "UNSUPPORTED"
        assert await collect(harness, GenerateOptions(route="plain")) == reply("it")
        assert await collect(harness, GenerateOptions(route="noclose")) == reply("done")
    assert "closing the adapter stream of route 'noclose' failed" in caplog.text
