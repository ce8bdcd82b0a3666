"""The history a Conversation produces is accepted by the OpenAI and Anthropic request serializers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conversation_kit import AdapterPlugin, FakeAdapter, parallel_calls

from harness_core import GenerateOptions, Harness, Message, ModelInfo
from harness_core.conversation import Conversation
from harness_core.testing.fake import text_reply
from harness_core.tools import tool

pytestmark = pytest.mark.anyio


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


async def produced_history() -> tuple[list[Message], list[Any]]:
    """A real history: two parallel calls (one with invalid arguments), their results, the answer."""
    adapter = FakeAdapter(
        parallel_calls(("call_a", "echo", '{"text":"hi"}'), ("call_b", "echo", '{"text": 5}')),
        text_reply("done"),
    )
    async with Harness([("fake", AdapterPlugin(adapter))]) as harness:
        conversation = Conversation(harness, provider="fake", tools=[echo])
        await conversation.send("say hi twice")
        await conversation.send("thanks")
    return conversation.messages, [echo.spec]


async def test_openai_serializer_sends_one_tool_message_per_result() -> None:
    serialize = pytest.importorskip("harness_llm_openai.serialize")
    messages, tools = await produced_history()
    options = GenerateOptions(model="gpt-test", messages=messages, tools=tools)
    body = serialize.RequestSerializer().body(options, ModelInfo(model="gpt-test"))
    wire = body["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "assistant", "user", "assistant"]
    assert [c["function"]["arguments"] for c in wire[1]["tool_calls"]] == ['{"text":"hi"}', '{"text": 5}']
    assert wire[2] == {"role": "tool", "tool_call_id": "call_a", "content": "hi"}
    assert wire[3]["tool_call_id"] == "call_b"
    assert "invalid arguments for tool 'echo'" in wire[3]["content"]


async def test_anthropic_serializer_merges_the_results_into_one_user_turn() -> None:
    serialize = pytest.importorskip("harness_llm_anthropic.serialize")
    messages, tools = await produced_history()
    options = GenerateOptions(model="claude-test", messages=messages, tools=tools)
    body = json.loads(serialize.build_body(options, max_tokens_default=1024, budgets={}))
    wire = body["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert [block["input"] for block in wire[1]["content"]] == [{"text": "hi"}, {"text": 5}]
    results = wire[2]["content"]
    assert [r["type"] for r in results] == ["tool_result", "tool_result"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "call_a", "content": "hi"}
    assert results[1]["tool_use_id"] == "call_b"
    assert results[1]["is_error"] is True
