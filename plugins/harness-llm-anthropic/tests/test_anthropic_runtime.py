"""The plugin inside the real runtime: two turns through ``Harness.generate`` (replay state:
docs/stream-obligations.md#9-replay-state; runtime: docs/runtime.md)."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic_wire_fixtures import INBAND_ERROR_BODY, MODEL, SIGNATURE, THINKING_TOOL_BODY, make_config, text_body

from harness_core.errors import LlmError
from harness_core.runtime import Harness
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import GenerateOptions, Message, ToolResultBlock, ToolSpec
from harness_llm_anthropic import AnthropicPlugin

pytestmark = pytest.mark.anyio

TOOLS = [ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})]


async def conversation(server: ScriptedServer, second_route: str) -> dict[str, Any]:
    server.add(Reply(reads=[THINKING_TOOL_BODY]), Reply(reads=[text_body("Sunny.")]))
    plugins = [
        ("anthropic", AnthropicPlugin(make_config(server))),
        ("anthropic:other", AnthropicPlugin(make_config(server, routes=["other"]))),
    ]
    async with Harness(plugins) as harness:
        first = GenerateOptions(route="anthropic", model=MODEL, messages=[Message.user("Weather?")], tools=TOOLS)
        result = await harness.generate(first)
        assert result.finish.kind == "tool-calls"
        assert result.message.source == "anthropic"
        assert result.replay_state["blocks"] == {"0": {"signature": SIGNATURE}}
        history = [*first.messages, result.message, Message(role="tool", content=[ToolResultBlock("toolu_01", "21")])]
        second = GenerateOptions(route=second_route, model=MODEL, messages=history, tools=TOOLS)
        assert (await harness.generate(second)).text == "Sunny."
    body: dict[str, Any] = server.requests[1].json()
    return body


async def test_same_instance_replays_the_signature(server: ScriptedServer) -> None:
    body = await conversation(server, "anthropic")
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Let me think \u00e9 about it.",
        "signature": SIGNATURE,
    }
    assert body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "21"}]


async def test_another_instance_gets_no_replay_state(server: ScriptedServer) -> None:
    body = await conversation(server, "other")
    assert [block["type"] for block in body["messages"][1]["content"]] == ["text", "tool_use"]


async def test_inband_error_becomes_the_raised_error_of_generate(server: ScriptedServer) -> None:
    server.add(Reply(reads=[INBAND_ERROR_BODY]))
    async with Harness([("anthropic", AnthropicPlugin(make_config(server)))]) as harness:
        with pytest.raises(LlmError) as info:
            await harness.generate(GenerateOptions(route="anthropic", model=MODEL, messages=[Message.user("x")]))
    assert info.value.code == "OVERLOADED"
