"""Helpers for the openai plugin's adapter tests: running a stream against a ScriptedServer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness_core.errors import LlmError
from harness_core.testing.check import check_stream
from harness_core.testing.server import ScriptedServer
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    GenerateOptions,
    Message,
    StreamChunk,
    TextBlock,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)
from harness_llm_openai.adapter import OpenAIAdapter
from harness_llm_openai.config import Config


def check(chunks: Sequence[StreamChunk]) -> list[StreamChunk]:
    """Check docs/stream-obligations.md obligations 1-4 with the kit's checker, plus our own stricter checks
    (indices in order, tool calls with finish stop)."""
    check_stream(list(chunks))
    open_blocks: dict[int, BlockStart] = {}
    texts: dict[int, list[str]] = {}
    seen: set[int] = set()
    next_index = 0
    tool_calls = 0
    usage_seen = False
    for number, chunk in enumerate(chunks):
        assert not isinstance(chunks[number - 1], Finish) or number == 0, "chunk after finish"
        if isinstance(chunk, BlockStart):
            assert chunk.index == next_index, f"bad index at {number}"
            assert chunk.index not in seen, f"reused index at {number}"
            assert not usage_seen
            next_index += 1
            seen.add(chunk.index)
            open_blocks[chunk.index] = chunk
            texts[chunk.index] = []
            tool_calls += chunk.block_type == "tool-call"
        elif isinstance(chunk, BlockEnd):
            start = open_blocks.pop(chunk.index)
            joined = "".join(texts[chunk.index])
            block = chunk.block
            if isinstance(block, ToolCallBlock):
                assert start.block_type == "tool-call"
                assert block.id == start.id
                assert block.arguments == (joined or "{}")
            else:
                assert (start.block_type == "text") == isinstance(block, TextBlock)
                assert block.text == joined
                assert joined
        elif isinstance(chunk, Usage):
            assert not open_blocks
            assert not usage_seen
            usage_seen = True
        elif isinstance(chunk, Finish):
            assert number == len(chunks) - 1
            assert not open_blocks
            kind = chunk.reason.kind
            if kind == "tool-calls":
                assert tool_calls
            if tool_calls and kind in ("stop",):
                raise AssertionError("tool calls emitted but finish is stop")
        else:
            assert chunk.index in open_blocks, f"delta for a block not open at {number}"
            if isinstance(chunk, ToolCallDelta):
                assert chunk.arguments_delta or chunk.name
                texts[chunk.index].append(chunk.arguments_delta)
            else:
                assert chunk.text
                texts[chunk.index].append(chunk.text)
    assert chunks, "empty stream"
    assert isinstance(chunks[-1], Finish), "no finish"
    return list(chunks)


def adapter_for(server: ScriptedServer, **config: Any) -> OpenAIAdapter:
    return OpenAIAdapter(Config(base_url=server.url + "/v1", **config))


def options(**kwargs: Any) -> GenerateOptions:
    kwargs.setdefault("model", "model-x")
    kwargs.setdefault("messages", [Message.user("hi")])
    return GenerateOptions(**kwargs)


async def run(adapter: OpenAIAdapter, opts: GenerateOptions | None = None) -> list[StreamChunk]:
    """Collect a whole stream (errors propagate)."""
    return [chunk async for chunk in adapter.stream(opts or options())]


async def run_checked(adapter: OpenAIAdapter, opts: GenerateOptions | None = None) -> list[StreamChunk]:
    return check(await run(adapter, opts))


async def run_error(adapter: OpenAIAdapter, opts: GenerateOptions | None = None) -> tuple[list[StreamChunk], LlmError]:
    """Collect until the stream raises; returns what came before and the error."""
    got: list[StreamChunk] = []
    try:
        async for chunk in adapter.stream(opts or options()):
            got.append(chunk)
    except LlmError as exc:
        return got, exc
    raise AssertionError(f"no error raised; got {got}")
