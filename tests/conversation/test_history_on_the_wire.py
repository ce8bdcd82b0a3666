"""The history a Conversation produces is accepted by the OpenAI and Anthropic request serializers."""

from __future__ import annotations

import json
from typing import Any

import msgspec
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
        conversation = Conversation(harness, route="fake", tools=[echo])
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


async def test_a_rolling_cache_breakpoint_reaches_the_anthropic_wire_on_every_step() -> None:
    """``Conversation(cache=…)`` marks the system prompt, the last tool and the newest message of
    each step; the stored history stays unmarked and the breakpoint moves with the conversation."""
    serialize = pytest.importorskip("harness_llm_anthropic.serialize")
    from conversation_kit import Recorder

    from harness_core import CacheMark

    recorder = Recorder()
    adapter = FakeAdapter(parallel_calls(("call_a", "echo", '{"text":"hi"}')), text_reply("done"), text_reply("bye"))
    async with Harness([("rec", recorder), ("fake", AdapterPlugin(adapter))]) as harness:
        conversation = Conversation(harness, route="fake", system="be brief", tools=[echo], cache=CacheMark(3600))
        await conversation.send("say hi")
        await conversation.send("thanks")
    assert all(getattr(block, "cache", None) is None for message in conversation.messages for block in message.content)
    bodies = [
        json.loads(
            serialize.build_body(msgspec.structs.replace(o, model="claude-test"), max_tokens_default=64, budgets={})
        )
        for o in recorder.options
    ]
    assert len(bodies) == 3  # the call, the answer after its result, the second send
    hour = {"type": "ephemeral", "ttl": "1h"}
    for body in bodies:
        assert body["system"][-1]["cache_control"] == hour
        assert body["tools"][-1]["cache_control"] == hour
        marked = [(m["role"], b) for m in body["messages"] for b in m["content"] if "cache_control" in b]
        assert marked == [(body["messages"][-1]["role"], body["messages"][-1]["content"][-1])]
    assert bodies[1]["messages"][-1]["content"][-1]["type"] == "tool_result"  # the step after the call
    assert bodies[2]["messages"][-1]["content"][-1] == {"type": "text", "text": "thanks", "cache_control": hour}


async def test_without_a_cache_policy_nothing_is_marked_and_a_bad_policy_is_refused() -> None:
    from conversation_kit import Recorder

    from harness_core import CacheMark

    recorder = Recorder()
    adapter = FakeAdapter(text_reply("ok"), text_reply("ok"))
    async with Harness([("rec", recorder), ("fake", AdapterPlugin(adapter))]) as harness:
        conversation = Conversation(harness, route="fake", tools=[echo])
        await conversation.send("hi")
        bare = Conversation(harness, route="fake", cache=CacheMark())  # no system, no tools
        await bare.send("hi")
        with pytest.raises(TypeError, match="cache must be a CacheMark or None, got int"):
            Conversation(harness, cache=3600)  # type: ignore[arg-type]
    options, rolling = recorder.options
    assert options.system_cache is None
    assert [spec.cache for spec in options.tools] == [None]
    assert options.messages[-1].content[-1].cache is None  # type: ignore[union-attr]
    assert (rolling.system_cache, rolling.tools) == (None, [])
    assert rolling.messages[-1].content[-1].cache == CacheMark()  # type: ignore[union-attr]
