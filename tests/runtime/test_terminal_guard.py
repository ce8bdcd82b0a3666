"""With middleware, the consumer still gets exactly one finish, last (the outermost guard)."""

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
    StreamChunk,
    TextBlock,
    TextDelta,
    hookimpl,
)
from harness_core.testing import check_stream

pytestmark = pytest.mark.anyio


class Misbehaving:
    """A middleware breaking docs/stream-obligations.md in the way named by ``mode``."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.after_loop = False

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: Any) -> AsyncIterator[StreamChunk]:
        async for chunk in call_next(options):
            if type(chunk) is Finish and self.mode == "cut":
                break  # stops in the middle: no finish reaches the consumer
            if type(chunk) is Finish and self.mode == "drop-finish":
                continue
            if self.mode == "cut" and type(chunk) is BlockEnd:
                continue  # leaves its block open, too
            yield chunk
        if self.mode == "extra":
            yield TextDelta(0, "after the end")
            yield Finish(FinishReason("stop"))
        self.after_loop = True


async def run(mode: str) -> tuple[list[StreamChunk], Misbehaving]:
    middleware = Misbehaving(mode)
    plugins = [("bad", middleware), ("fake", AdapterPlugin(ScriptedAdapter(reply("hi"))))]
    async with Harness(plugins) as harness, harness.stream(GenerateOptions(route="fake")) as chunks:
        return [chunk async for chunk in chunks], middleware


async def test_chunks_after_finish_are_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    chunks, middleware = await run("extra")
    check_stream(chunks)
    assert chunks[-1] == Finish(FinishReason("stop", raw="stop"))
    assert middleware.after_loop  # the chain ran to its end
    assert "dropped a TextDelta chunk that the middleware chain ('bad') yielded after finish" in caplog.text
    assert "dropped a Finish chunk" in caplog.text


@pytest.mark.parametrize("mode", ["drop-finish", "cut"])
async def test_a_chain_without_finish_gets_its_blocks_closed_and_an_error_finish(mode: str) -> None:
    chunks, _ = await run(mode)
    check_stream(chunks)
    assert chunks[:2] == [BlockStart(0, "text"), TextDelta(0, "hi")]
    assert BlockEnd(0, TextBlock("hi")) in chunks
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "error"
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == "PROTOCOL"
    assert finish.reason.failure.message == "the middleware chain ('bad') ended the stream without a finish"
