"""Middleware shapes the chain supports: cache short-circuit, retry before the first chunk, rewriting."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from runtime_scripted import AdapterPlugin, Raise, ScriptedAdapter, reply

from harness_core import (
    Finish,
    FinishReason,
    GenerateOptions,
    Harness,
    LlmError,
    Message,
    StreamChunk,
    canonical_json,
    hookimpl,
)
from harness_core.plugininfo import Defaults

pytestmark = pytest.mark.anyio


class Cache:
    """Replays a stored stream on a hit: call_next is not called at all."""

    def __init__(self) -> None:
        self.store: dict[bytes, list[StreamChunk]] = {}
        self.hits = 0

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        key = canonical_json(options)
        stored = self.store.get(key)
        if stored is not None:
            self.hits += 1
            for chunk in stored:
                yield chunk
            return
        recorded: list[StreamChunk] = []
        async for chunk in call_next(options):
            recorded.append(chunk)
            yield chunk
        self.store[key] = recorded


async def test_cache_short_circuit_never_calls_the_adapter_twice() -> None:
    cache, adapter = Cache(), ScriptedAdapter(reply("cached", "cach", "ed"))
    async with Harness([("cache", cache), ("fake", AdapterPlugin(adapter))]) as harness:
        options = GenerateOptions(route="fake", model="m", messages=[Message.user("q")])
        first = await harness.generate(options)
        second = await harness.generate(options)
    assert first == second
    assert first.text == "cached"
    assert second.message.route == "fake"  # requested route and its owner, even without the boundary
    assert second.message.source == "fake"
    assert cache.hits == 1
    assert len(adapter.calls) == 1


class RetryBeforeFirstChunk:
    """Retries a retryable error finish, only while nothing has been yielded."""

    def __init__(self, attempts: int = 3) -> None:
        self.attempts = attempts
        self.seen: list[str] = []

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        for attempt in range(self.attempts):
            stream = call_next(options)
            first = await stream.__anext__()
            failure = first.reason.failure if isinstance(first, Finish) else None
            if failure is not None and failure.retryable and attempt + 1 < self.attempts:
                self.seen.append(failure.code)
                await stream.aclose()
                continue
            yield first
            async for chunk in stream:
                yield chunk
            return


async def test_retry_before_the_first_chunk() -> None:
    log: list[str] = []
    adapter = ScriptedAdapter(
        reply("ok"),
        log=log,
        retries=[[Raise(LlmError("OVERLOADED", "busy", status=529))], [Raise(LlmError("RATE_LIMITED", "slow"))]],
    )
    retry = RetryBeforeFirstChunk()
    async with Harness([("retry", retry), ("fake", AdapterPlugin(adapter))]) as harness:
        result = await harness.generate(GenerateOptions(route="fake"))
    assert result.text == "ok"
    assert retry.seen == ["OVERLOADED", "RATE_LIMITED"]
    assert len(adapter.calls) == 3
    assert log == ["finally:adapter"] * 3


async def test_retry_gives_up_and_the_error_reaches_generate() -> None:
    adapter = ScriptedAdapter([Raise(LlmError("SERVER", "boom", status=503))])
    async with Harness([("retry", RetryBeforeFirstChunk(2)), ("fake", AdapterPlugin(adapter))]) as harness:
        with pytest.raises(LlmError) as caught:
            await harness.generate(GenerateOptions(route="fake"))
    assert (caught.value.code, caught.value.status) == ("SERVER", 503)
    assert len(adapter.calls) == 2


class Rewrite:
    """Sends every request to another route, with a system prompt added."""

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        changed = msgspec.structs.replace(options, route="backup", system="be brief")
        async for chunk in call_next(changed):
            yield chunk


async def test_request_rewriting_reaches_the_adapter_and_the_result() -> None:
    main, backup = ScriptedAdapter(reply("main")), ScriptedAdapter(reply("backup"))
    plugins = [
        ("rewrite", Rewrite()),
        ("main", AdapterPlugin(main, ["main"])),
        ("alt", AdapterPlugin(backup, ["backup"])),
    ]
    async with Harness(plugins, defaults=Defaults(route="main", model="m")) as harness:
        result = await harness.generate(GenerateOptions())
    assert result.text == "backup"
    assert (result.message.route, result.message.source) == ("backup", "alt")
    assert main.calls == []
    (seen,) = backup.calls
    assert (seen.route, seen.model, seen.system) == ("backup", "m", "be brief")


class AddsAndDrops:
    """Transforms chunks: drops nothing it does not know, replaces the finish."""

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):
            if isinstance(chunk, Finish):
                yield Finish(FinishReason(kind="stop", raw="rewritten"))
            else:
                yield chunk


async def test_transforming_middleware() -> None:
    async with Harness([("t", AddsAndDrops()), ("fake", AdapterPlugin(ScriptedAdapter(reply())))]) as harness:
        result = await harness.generate(GenerateOptions(route="fake"))
    assert result.finish.raw == "rewritten"
