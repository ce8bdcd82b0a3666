"""Helpers for the middleware tests: scripted inner streams, stream checking, a fake adapter plugin."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio

from harness_core import LlmAdapter, hookimpl
from harness_core.errors import Failure, LlmError
from harness_core.testing import check_stream
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    Message,
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
from harness_middleware.usage import UsageRecord

# ---------------------------------------------------------------------------- stream builders


def text_chunks(*pieces: str, index: int = 0) -> list[StreamChunk]:
    """A text block made of ``pieces`` (block-start, deltas, block-end)."""
    return [
        BlockStart(index=index, block_type="text"),
        *[TextDelta(index=index, text=p) for p in pieces],
        BlockEnd(index=index, block=TextBlock("".join(pieces))),
    ]


def reasoning_chunks(*pieces: str, index: int = 0, signed: bool = False) -> list[StreamChunk]:
    return [
        BlockStart(index=index, block_type="reasoning", signed=signed),
        *[ReasoningDelta(index=index, text=p) for p in pieces],
        BlockEnd(index=index, block=ReasoningBlock("".join(pieces), signed=signed)),
    ]


def tool_chunks(*pieces: str, index: int = 0, id: str = "call_1", name: str = "lookup") -> list[StreamChunk]:
    return [
        BlockStart(index=index, block_type="tool-call", id=id, name=name),
        *[ToolCallDelta(index=index, id=id, arguments_delta=p) for p in pieces],
        BlockEnd(index=index, block=ToolCallBlock(id=id, name=name, arguments="".join(pieces) or "{}")),
    ]


def usage(input_tokens: int | None = 10, output_tokens: int | None = 5, **extra: int) -> Usage:
    return Usage(TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens, **extra))


def stop() -> Finish:
    return Finish(FinishReason(kind="stop", raw="stop"))


def finish(kind: Any) -> Finish:
    return Finish(FinishReason(kind=kind))


def error_finish(code: Any, retry_after: float | None = None, message: str = "boom") -> Finish:
    failure = LlmError(code, message, retry_after=retry_after).to_failure()
    return Finish(FinishReason(kind="error", failure=failure))


def aborted_finish() -> Finish:
    return Finish(FinishReason(kind="aborted", failure=Failure(code="ABORTED", message="aborted")))


def options(text: str = "hi", **fields: Any) -> GenerateOptions:
    fields.setdefault("route", "fake")
    fields.setdefault("model", "m1")
    return GenerateOptions(messages=[Message.user(text)], **fields)


# ---------------------------------------------------------------------------- scripted inner streams

Step = StreamChunk | BaseException | float | Callable[[], Any]
"""A chunk to yield, an exception to raise, seconds to sleep, or a callable to run."""


class Script:
    """A ``call_next`` replaying one script per call (the last one repeats), recording calls.

    ``calls`` holds the options of every call; ``closed`` counts generators whose ``finally`` ran.
    """

    def __init__(self, *scripts: Sequence[Step]) -> None:
        self.scripts = [list(s) for s in scripts]
        self.calls: list[GenerateOptions] = []
        self.closed = 0

    def __call__(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        script = self.scripts[min(len(self.calls), len(self.scripts) - 1)]
        self.calls.append(options)
        return self._run(script)

    async def _run(self, script: list[Step]) -> AsyncIterator[StreamChunk]:
        try:
            for step in script:
                if isinstance(step, BaseException):
                    raise step
                if isinstance(step, float):
                    await anyio.sleep(step)
                elif callable(step):
                    step()
                else:
                    yield step
        finally:
            self.closed += 1


class Stall:
    """An inner stream that yields ``before`` and then waits forever (until cancelled/closed)."""

    def __init__(self, *before: StreamChunk) -> None:
        self.before = before
        self.closed = 0

    def __call__(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        return self._run()

    async def _run(self) -> AsyncIterator[StreamChunk]:
        try:
            for chunk in self.before:
                yield chunk
            await anyio.sleep_forever()
        finally:
            self.closed += 1


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    """Every chunk of ``stream`` (closed afterwards), checked against docs/stream-obligations.md."""
    chunks: list[StreamChunk] = []
    try:
        async for chunk in stream:
            chunks.append(chunk)
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    return check(chunks)


def check(chunks: list[StreamChunk]) -> list[StreamChunk]:
    """Check ``chunks`` keeps docs/stream-obligations.md with the testing kit's ``check_stream``."""
    return check_stream(chunks)


# ---------------------------------------------------------------------------- runtime stand-ins


class ScriptAdapter(LlmAdapter):
    """An adapter replaying a :class:`Script` (used through the real runtime)."""

    def __init__(self, script: Script | Stall) -> None:
        self.script = script

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        inner = self.script(options)
        try:
            async for chunk in inner:
                yield chunk
        finally:
            await inner.aclose()  # type: ignore[attr-defined]


class AdapterPlugin:
    """A plugin registering ``adapter`` for ``routes``."""

    def __init__(self, adapter: LlmAdapter, routes: Sequence[str] = ("fake",)) -> None:
        self.adapter = adapter
        self.routes = list(routes)

    @hookimpl
    def register_adapter(self, register: Any) -> None:
        register(self.routes, self.adapter)


def usage_record(**fields: object) -> UsageRecord:
    """A ledger row of one complete openai/gpt-x stream (100 in, 10 out, $0.25) with ``fields`` changed."""
    base: dict[str, object] = {
        "ts": time.time(),
        "route": "openai",
        "model": "gpt-x",
        "input_tokens": 100,
        "output_tokens": 10,
        "cache_read_tokens": None,
        "cache_write_tokens": None,
        "reasoning_tokens": None,
        "status": "complete",
        "error_code": None,
        "finish_reason": "stop",
        "latency_ms": 12.5,
        "first_chunk_ms": 3.0,
        "cost": 0.25,
    }
    base.update(fields)
    return UsageRecord(**base)  # type: ignore[arg-type]
