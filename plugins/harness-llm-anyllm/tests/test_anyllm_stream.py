"""The library's OpenAI, Anthropic and Mistral providers against a scripted server: text,
reasoning, tool calls, usage and replay state, and the same outcome at every byte split."""

from __future__ import annotations

import pytest
from anyllm_wire import (
    ANTHROPIC_TEXT,
    ANTHROPIC_THINKING_TOOL,
    MISTRAL_TEXT,
    MODEL,
    OPENAI_REASONING_TOOLS,
    OPENAI_TEXT,
    SIGNATURE,
    UNICODE,
    make_adapter,
    options,
    run,
)

from harness_core.testing.server import Reply, ScriptedServer
from harness_core.testing.splits import every_split
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    ReasoningBlock,
    TextBlock,
    TokenUsage,
    ToolCallBlock,
    Usage,
)

pytestmark = pytest.mark.anyio

TEXT_BODIES = {"openai": OPENAI_TEXT, "mistral": MISTRAL_TEXT}


TEXT_BODIES["anthropic"] = ANTHROPIC_TEXT


@pytest.mark.parametrize("provider", ["openai", "anthropic", "mistral"])
async def test_text_with_usage(server: ScriptedServer, provider: str) -> None:
    server.add(Reply(reads=[TEXT_BODIES[provider]]))
    adapter = make_adapter(provider, server)
    try:
        chunks, error = await run(adapter)
    finally:
        await adapter.aclose()
    assert error is None
    assert chunks[0] == BlockStart(0, "text")
    assert chunks[-3] == BlockEnd(0, TextBlock("".join(UNICODE)))
    assert chunks[-2] == Usage(TokenUsage(input_tokens=9, output_tokens=4))
    raw = "stop"  # any-llm reports OpenAI's finish names for every provider (Anthropic's end_turn too)
    assert chunks[-1] == Finish(FinishReason("stop", raw=raw))


@pytest.mark.parametrize("provider", ["mistral"])  # openai and anthropic: the conformance suite
async def test_every_byte_split_gives_the_same_stream(server: ScriptedServer, provider: str) -> None:
    """Every 2-way cut of the body (inside UTF-8 characters too), then 1-byte reads."""
    body = TEXT_BODIES[provider]
    adapter = make_adapter(provider, server)
    try:
        server.add(Reply(reads=[body]))
        expected, _ = await run(adapter)
        for reads in every_split(body):
            server.add(Reply(reads=list(reads)))
            chunks, error = await run(adapter)
            assert error is None
            assert chunks == expected
    finally:
        await adapter.aclose()


async def test_openai_reasoning_parallel_tool_calls_and_cache_usage(server: ScriptedServer) -> None:
    server.add(Reply(reads=[OPENAI_REASONING_TOOLS]))
    adapter = make_adapter("openai", server)
    try:
        chunks, error = await run(adapter)
    finally:
        await adapter.aclose()
    assert error is None
    ends = [c.block for c in chunks if isinstance(c, BlockEnd)]
    assert ends == [
        ReasoningBlock("Think \u00e9 more."),
        TextBlock("Checking."),
        ToolCallBlock("call_a", "get_weather", '{"city": "Paris"}'),
        ToolCallBlock("call_b", "get_time", "{}"),
    ]
    usage = TokenUsage(input_tokens=120, output_tokens=30, cache_read_tokens=100, reasoning_tokens=12)
    assert chunks[-2] == Usage(usage)
    assert chunks[-1] == Finish(FinishReason("tool-calls", raw="tool_calls"))
    sent = server.requests[0].json()
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


async def test_anthropic_signed_thinking_tool_call_cache_and_replay_state(server: ScriptedServer) -> None:
    server.add(Reply(reads=[ANTHROPIC_THINKING_TOOL]))
    adapter = make_adapter("anthropic", server)
    try:
        chunks, error = await run(adapter)
    finally:
        await adapter.aclose()
    assert error is None
    assert chunks[0] == BlockStart(0, "reasoning", signed=True)
    ends = [c.block for c in chunks if isinstance(c, BlockEnd)]
    assert ends == [
        ReasoningBlock("Let me think \u00e9 about it.", signed=True),
        TextBlock("I'll check."),
        ToolCallBlock("toolu_01", "get_weather", '{"city": "Paris"}'),
    ]
    usage = TokenUsage(input_tokens=132, output_tokens=61, cache_read_tokens=100, cache_write_tokens=20)
    assert chunks[-2] == Usage(usage)
    final = chunks[-1]
    assert final == Finish(
        FinishReason("tool-calls", raw="tool_calls"),
        replay_state={"model": MODEL, "extra_content": {"anthropic": {"signature": SIGNATURE}}},
    )


async def test_anthropic_replay_sends_the_signed_thinking_back(server: ScriptedServer) -> None:
    """A second turn of the same model replays the thinking block with its signature, byte-exact
    tool arguments and the tool result; another model gets no signature."""
    from harness_core.assembler import BlockAssembler
    from harness_core.types import Message, ToolResultBlock

    server.add(Reply(reads=[ANTHROPIC_THINKING_TOOL]), Reply(reads=[TEXT_BODIES["anthropic"]]))
    server.add(Reply(reads=[TEXT_BODIES["anthropic"]]))
    adapter = make_adapter("anthropic", server)
    try:
        chunks, _ = await run(adapter)
        assembler = BlockAssembler()
        for chunk in chunks:
            assembler.feed(chunk)
        reply = assembler.message()
        result = Message(role="tool", content=[ToolResultBlock("toolu_01", "18 C")])
        history = [Message.user("weather?"), reply, result]
        await run(adapter, options(messages=history))
        await run(adapter, options(model="other-model", messages=history))
    finally:
        await adapter.aclose()
    assistant = server.requests[1].json()["messages"][1]
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "Let me think \u00e9 about it.", "signature": SIGNATURE},
        {"type": "text", "text": "I'll check."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
    ]
    other = server.requests[2].json()["messages"][1]
    assert all(block["type"] != "thinking" for block in other["content"])
