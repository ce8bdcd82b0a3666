"""Abort, ``break`` and cancellation close the library's stream: the scripted server sees the
connection closed (no leaked connection), and abort ends with ``finish{aborted}``."""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import cast

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyllm_wire import ANTHROPIC_THINKING_TOOL, MISTRAL_TEXT, OPENAI_TEXT, make_adapter, options, run

from harness_core.abort import AbortSignal
from harness_core.testing.check import check_stream
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import BlockEnd, Finish, ReasoningDelta, StreamChunk, TextDelta

pytestmark = pytest.mark.anyio

# The first events of each body (a text delta among them), then the server stalls.
HEADS = {
    "openai": OPENAI_TEXT[: OPENAI_TEXT.index(b"\n\n", OPENAI_TEXT.index(b"Caf")) + 2],
    "mistral": MISTRAL_TEXT[: MISTRAL_TEXT.index(b"\n\n") + 2],
    "anthropic": ANTHROPIC_THINKING_TOOL[: ANTHROPIC_THINKING_TOOL.index(b"event: ping")],
}
FIRST = {"openai": TextDelta, "mistral": TextDelta, "anthropic": ReasoningDelta}
PROVIDERS = ["openai", "anthropic", "mistral"]


async def _idle(server: ScriptedServer) -> bool:
    return await anyio.to_thread.run_sync(server.wait_idle)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_abort_mid_stream_closes_blocks_and_the_connection(server: ScriptedServer, provider: str) -> None:
    server.add(Reply(reads=[HEADS[provider]], end="stall"))
    adapter = make_adapter(provider, server)
    signal = AbortSignal()
    chunks: list[StreamChunk] = []
    try:
        async for chunk in adapter.stream(options(abort=signal)):
            chunks.append(chunk)
            if isinstance(chunk, FIRST[provider]):
                signal.fire("user pressed stop")
        check_stream(chunks)
        assert await _idle(server)
    finally:
        await adapter.aclose()
    final = chunks[-1]
    assert isinstance(final, Finish)
    assert final.reason.kind == "aborted"
    assert final.reason.failure is not None
    assert final.reason.failure.message == "user pressed stop"
    assert isinstance(chunks[-2], BlockEnd)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_break_closes_the_connection(server: ScriptedServer, provider: str) -> None:
    server.add(Reply(reads=[HEADS[provider]], end="stall"))
    adapter = make_adapter(provider, server)
    try:
        async with aclosing(cast(AsyncGenerator[StreamChunk, None], adapter.stream(options()))) as stream:
            async for chunk in stream:
                if isinstance(chunk, FIRST[provider]):
                    break
        assert await _idle(server)
    finally:
        await adapter.aclose()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cancellation_closes_the_connection_and_propagates(server: ScriptedServer, provider: str) -> None:
    server.add(Reply(reads=[HEADS[provider]], end="stall"))
    adapter = make_adapter(provider, server)
    seen: list[StreamChunk] = []
    try:
        with anyio.CancelScope() as scope:
            async with aclosing(cast(AsyncGenerator[StreamChunk, None], adapter.stream(options()))) as stream:
                async for chunk in stream:
                    seen.append(chunk)
                    if isinstance(chunk, FIRST[provider]):
                        scope.cancel()
        assert scope.cancelled_caught
        assert await _idle(server)
    finally:
        await adapter.aclose()
    assert not any(isinstance(chunk, Finish) for chunk in seen)


async def test_abort_before_the_request_sends_nothing(server: ScriptedServer) -> None:
    adapter = make_adapter("openai", server)
    signal = AbortSignal()
    signal.fire()
    try:
        chunks = [chunk async for chunk in adapter.stream(options(abort=signal))]
    finally:
        await adapter.aclose()
    assert len(chunks) == 1
    assert isinstance(chunks[0], Finish)
    assert chunks[0].reason.kind == "aborted"
    assert not server.requests


async def test_abort_while_the_library_opens_the_request(server: ScriptedServer) -> None:
    server.add(Reply(reads=[OPENAI_TEXT]), Reply(reads=[OPENAI_TEXT], head_delay=60.0))
    adapter = make_adapter("openai", server)
    signal = AbortSignal()
    chunks: list[StreamChunk] = []
    # A first request lets the SDK finish its one-time set-up (platform probing in a worker
    # thread), so the second one waits on the socket for the response head.
    await run(adapter)

    async def consume() -> None:
        chunks.extend([chunk async for chunk in adapter.stream(options(abort=signal))])

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            await wait_all_tasks_blocked()  # the consumer waits for the response head, which never comes
            signal.fire()
    finally:
        await adapter.aclose()
    assert len(chunks) == 1
    assert isinstance(chunks[0], Finish)
    assert chunks[0].reason.kind == "aborted"


BODIES = {"openai": OPENAI_TEXT, "mistral": MISTRAL_TEXT, "anthropic": ANTHROPIC_THINKING_TOOL}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("how", ["to the end", "broken off"])
async def test_no_generator_of_the_library_is_left_to_the_garbage_collector(
    server: ScriptedServer, provider: str, how: str
) -> None:
    """Every async generator started while the stream runs (the library's, its SDK's, httpx's,
    the transport's) is finished when the stream is: none is left for a finalizer to close later,
    in a stray task or inside whatever event loop the next garbage collection runs in. The test
    holds each generator (so none is finalised behind its back) and looks at it afterwards."""
    server.add(Reply(reads=[BODIES[provider]]))
    adapter = make_adapter(provider, server)
    await run(adapter)  # the SDK's one-time set-up stays out of what is recorded
    server.add(Reply(reads=[BODIES[provider]]))
    started: list[AsyncGenerator[object, None]] = []
    hooks = sys.get_asyncgen_hooks()

    def first_iteration(generator: AsyncGenerator[object, None]) -> None:
        started.append(generator)
        if hooks.firstiter is not None:
            hooks.firstiter(generator)

    sys.set_asyncgen_hooks(firstiter=first_iteration, finalizer=hooks.finalizer)
    try:
        async with aclosing(cast(AsyncGenerator[StreamChunk, None], adapter.stream(options()))) as stream:
            async for chunk in stream:
                if how == "broken off" and isinstance(chunk, FIRST[provider]):
                    break
    finally:
        sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=hooks.finalizer)
        await adapter.aclose()
    left = [generator for generator in started if generator.ag_frame is not None]  # type: ignore[attr-defined]
    for generator in left:
        await generator.aclose()
    assert len(started) > 3  # the SDK's chain was seen
    assert not left, f"generators left open: {[generator.__qualname__ for generator in left]}"  # type: ignore[attr-defined]
