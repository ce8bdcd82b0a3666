"""The plugin inside the real runtime: two turns through ``Harness.generate`` (replay state:
docs/stream-obligations.md#9-replay-state; runtime: docs/runtime.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from anthropic_wire_fixtures import (
    INBAND_ERROR_BODY,
    MESSAGE_STOP,
    MODEL,
    REDACTED,
    SIGNATURE,
    THINKING_TOOL_BODY,
    block_start,
    block_stop,
    delta,
    make_config,
    message_delta,
    message_start,
    sse,
    text_body,
    text_delta,
)

from harness_core.conversation import Conversation
from harness_core.errors import LlmError
from harness_core.runtime import Harness
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import GenerateOptions, Message, ReasoningBlock, ReasoningSignature, ToolResultBlock, ToolSpec
from harness_llm_anthropic import AnthropicPlugin

pytestmark = pytest.mark.anyio

TOOLS = [ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})]


async def conversation(server: ScriptedServer, second_route: str, second_model: str = MODEL) -> dict[str, Any]:
    server.add(Reply(reads=[THINKING_TOOL_BODY]), Reply(reads=[text_body("Sunny.")]))
    plugins = [
        ("anthropic", AnthropicPlugin(make_config(server))),
        ("anthropic:other", AnthropicPlugin(make_config(server, routes=["other"]))),
        ("proxy", AnthropicPlugin(make_config(server, routes=["proxy"]))),  # the same wire, another provider
    ]
    async with Harness(plugins) as harness:
        first = GenerateOptions(route="anthropic", model=MODEL, messages=[Message.user("Weather?")], tools=TOOLS)
        result = await harness.generate(first)
        assert result.finish.kind == "tool-calls"
        assert result.message.source == "anthropic"
        assert result.replay_state["blocks"] == {"0": {"signature": SIGNATURE}}
        assert result.message.content[0] == ReasoningBlock(
            "Let me think \u00e9 about it.", signed=True, signature=ReasoningSignature("anthropic", MODEL, SIGNATURE)
        )
        stored = msgspec.json.decode(msgspec.json.encode(result.message), type=Message)  # saved and loaded
        history = [*first.messages, stored, Message(role="tool", content=[ToolResultBlock("toolu_01", "21")])]
        second = GenerateOptions(route=second_route, model=second_model, messages=history, tools=TOOLS)
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


async def test_another_instance_of_the_same_provider_and_model_replays_the_typed_signature(
    server: ScriptedServer,
) -> None:
    body = await conversation(server, "other")  # replay_state is dropped (another source), the signature is not
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Let me think \u00e9 about it.",
        "signature": SIGNATURE,
    }


@pytest.mark.parametrize(
    ("route", "model"), [("anthropic", "claude-other"), ("proxy", MODEL)], ids=["model", "provider"]
)
async def test_another_model_or_provider_gets_no_signature(server: ScriptedServer, route: str, model: str) -> None:
    body = await conversation(server, route, model)
    assert SIGNATURE not in json.dumps(body)
    assert [block["type"] for block in body["messages"][1]["content"]] == ["text", "tool_use"]


async def test_inband_error_becomes_the_raised_error_of_generate(server: ScriptedServer) -> None:
    server.add(Reply(reads=[INBAND_ERROR_BODY]))
    async with Harness([("anthropic", AnthropicPlugin(make_config(server)))]) as harness:
        with pytest.raises(LlmError) as info:
            await harness.generate(GenerateOptions(route="anthropic", model=MODEL, messages=[Message.user("x")]))
    assert info.value.code == "OVERLOADED"


SIGNED_AND_REDACTED_BODY = sse(
    [
        message_start(),
        block_start(0, {"type": "redacted_thinking", "data": REDACTED}),
        block_stop(0),
        block_start(1, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(1, {"type": "thinking_delta", "thinking": "Let me think."}),
        delta(1, {"type": "signature_delta", "signature": SIGNATURE}),
        block_stop(1),
        block_start(2, {"type": "text", "text": ""}),
        text_delta(2, "Hi."),
        block_stop(2),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]
)


async def test_a_conversation_sends_signed_and_redacted_thinking_back_unchanged_after_save_and_load(
    server: ScriptedServer, tmp_path: Path
) -> None:
    server.add(Reply(reads=[SIGNED_AND_REDACTED_BODY]), Reply(reads=[text_body("Again.")]))
    async with Harness([("anthropic", AnthropicPlugin(make_config(server)))]) as harness:
        chat = Conversation(harness, route="anthropic", model=MODEL)
        assert (await chat.send("hi")).text == "Hi."
        assert chat.messages[1].content[:2] == [
            ReasoningBlock("", signed=True, signature=ReasoningSignature("anthropic", MODEL, REDACTED, redacted=True)),
            ReasoningBlock("Let me think.", signed=True, signature=ReasoningSignature("anthropic", MODEL, SIGNATURE)),
        ]
        chat.save(tmp_path / "chat.json")
        loaded = Conversation.load(tmp_path / "chat.json", harness)
        assert loaded.messages == chat.messages
        assert (await loaded.send("more")).text == "Again."
    raw = server.requests[1].body
    assert isinstance(raw, bytes)
    assert f'"signature":"{SIGNATURE}"'.encode() in raw  # byte-exact
    assert f'"data":"{REDACTED}"'.encode() in raw
    assert json.loads(raw)["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "thinking", "thinking": "Let me think.", "signature": SIGNATURE},
        {"type": "text", "text": "Hi."},
    ]
