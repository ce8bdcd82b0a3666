"""Prompt caching and token counting on the Anthropic wire, against a scripted server that records bodies."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic_wire_fixtures import MODEL, TEXT_BODY

from harness_core.errors import LlmError
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import (
    CacheMark,
    FileBlock,
    GenerateOptions,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from harness_llm_anthropic.adapter import AnthropicAdapter
from harness_llm_anthropic.serialize import build_body

pytestmark = pytest.mark.anyio

HOUR = CacheMark(3600)
FIVE = CacheMark(300)


def marked_options(**fields: Any) -> GenerateOptions:
    """A request with a cache mark at every place: system, a system message, tools, every block kind."""
    return GenerateOptions(
        model=MODEL,
        system="You are terse.",
        system_cache=HOUR,
        tools=[ToolSpec("a"), ToolSpec("b", "B", cache=CacheMark())],
        messages=[
            Message(role="system", content=[TextBlock("Extra rules.", cache=FIVE)]),
            Message(
                role="user",
                content=[TextBlock("look", cache=FIVE), FileBlock("image/png", data=b"\x89PNG", cache=HOUR)],
            ),
            Message(
                role="assistant", content=[TextBlock("ok", cache=CacheMark()), ToolCallBlock("c1", "a", "{}", HOUR)]
            ),
            Message(role="tool", content=[ToolResultBlock("c1", "done", cache=HOUR)]),
        ],
        **fields,
    )


async def _body(server: ScriptedServer, adapter: AnthropicAdapter, options: GenerateOptions) -> Any:
    server.add(Reply(reads=[TEXT_BODY]))
    async for _ in adapter.stream(options):
        pass
    return server.requests[-1].json()


async def test_cache_marks_at_every_place_reach_the_wire(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    body = await _body(server, adapter, marked_options())
    one_hour = {"type": "ephemeral", "ttl": "1h"}
    five = {"type": "ephemeral", "ttl": "5m"}
    plain = {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": one_hour},
        {"type": "text", "text": "Extra rules.", "cache_control": five},
    ]
    assert body["tools"] == [
        {"name": "a", "input_schema": {"type": "object", "properties": {}}},
        {"name": "b", "description": "B", "input_schema": {"type": "object", "properties": {}}, "cache_control": plain},
    ]
    user, assistant, tool = body["messages"]
    assert user["content"][0] == {"type": "text", "text": "look", "cache_control": five}
    assert user["content"][1]["type"] == "image"
    assert user["content"][1]["cache_control"] == one_hour
    assert assistant["content"][0] == {"type": "text", "text": "ok", "cache_control": plain}
    assert assistant["content"][1]["cache_control"] == one_hour
    assert tool["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "done",
        "cache_control": one_hour,
    }


def test_unmarked_system_stays_a_string_and_other_ttls_are_unsupported() -> None:
    options = GenerateOptions(model=MODEL, system="S", messages=[Message(role="system", content=[TextBlock("T")])])
    assert b'"system":"S\\n\\nT"' in build_body(options, max_tokens_default=8, budgets={})
    odd = GenerateOptions(model=MODEL, messages=[Message(role="user", content=[TextBlock("x", cache=CacheMark(60))])])
    with pytest.raises(LlmError) as caught:
        build_body(odd, max_tokens_default=8, budgets={})
    assert caught.value.code == "UNSUPPORTED"
    assert "messages[0].content[0]" in caught.value.message
    assert "60 s" in caught.value.message


async def test_count_tokens_posts_the_countable_fields(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.route("POST", "/v1/messages/count_tokens", Reply.json(200, {"input_tokens": 42}))
    assert await adapter.count_tokens(marked_options(max_tokens=10, temperature=0.5)) == 42
    request = server.requests[-1]
    assert request.path == "/v1/messages/count_tokens"
    body = request.json()
    assert set(body) == {"model", "messages", "system", "tools"}  # no max_tokens, stream or sampling
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


async def test_count_tokens_errors(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    with pytest.raises(LlmError) as caught:
        await adapter.count_tokens(GenerateOptions(messages=[Message.user("hi")]))
    assert caught.value.code == "BAD_REQUEST"
    server.route("POST", "/v1/messages/count_tokens", Reply.json(200, {"tokens": 1}))
    with pytest.raises(LlmError) as caught:
        await adapter.count_tokens(GenerateOptions(model=MODEL, messages=[Message.user("hi")]))
    assert caught.value.code == "PROTOCOL"
    assert "count_tokens" in caught.value.message
