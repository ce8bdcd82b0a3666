"""The plugin inside the real runtime: a two-turn tool conversation through ``Harness.generate``
whose second request carries every thought signature of the first response byte-exact."""

from __future__ import annotations

import json
from typing import Any

import pytest
from gemini_fixtures import MODEL, SIGNATURE, SIGNATURE_2, THINKING_TOOL_BODY, make_config, text_body

from harness_core.errors import LlmError
from harness_core.runtime import Harness
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.types import ContentBlock, GenerateOptions, Message, ToolResultBlock, ToolSpec
from harness_llm_gemini import GeminiPlugin

pytestmark = pytest.mark.anyio

TOOLS = [
    ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}}),
    ToolSpec("get_time"),
]


async def conversation(server: ScriptedServer, second_route: str) -> tuple[bytes, dict[str, Any]]:
    server.add(Reply(reads=[THINKING_TOOL_BODY]), Reply(reads=[text_body("Sunny, 14:00.")]))
    plugins = [
        ("gemini", GeminiPlugin(make_config(server))),
        ("gemini:other", GeminiPlugin(make_config(server, routes=["other"]))),
    ]
    async with Harness(plugins) as harness:
        first = GenerateOptions(
            route="gemini",
            model=MODEL,
            messages=[Message.user("Weather and time?")],
            tools=TOOLS,
            reasoning_effort="medium",
        )
        result = await harness.generate(first)
        assert result.finish.kind == "tool-calls"
        assert result.message.source == "gemini"
        calls = result.message.tool_calls
        assert [(c.name, c.arguments) for c in calls] == [("get_weather", '{"city":"Paris"}'), ("get_time", "{}")]
        results: list[ContentBlock] = [ToolResultBlock(calls[0].id, "18 C"), ToolResultBlock(calls[1].id, "14:00")]
        history = [*first.messages, result.message, Message(role="tool", content=results)]
        second = GenerateOptions(route=second_route, model=MODEL, messages=history, tools=TOOLS)
        assert (await harness.generate(second)).text == "Sunny, 14:00."
    assert json.loads(server.requests[0].body)["generationConfig"] == {
        "thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": True}
    }
    return server.requests[1].body, server.requests[1].json()


async def test_the_next_turn_replays_every_signature_byte_exact(server: ScriptedServer) -> None:
    raw, body = await conversation(server, "gemini")
    assert body["contents"][1] == {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": SIGNATURE},
            {"functionCall": {"name": "get_time", "args": {}}},
            {"text": "", "thoughtSignature": SIGNATURE_2},
        ],
    }
    assert body["contents"][2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"output": "18 C"}}},
            {"functionResponse": {"name": "get_time", "response": {"output": "14:00"}}},
        ],
    }
    # the signature bytes themselves, not only an equal decoded value
    assert b'"thoughtSignature":"' + SIGNATURE.encode() + b'"' in raw
    assert b'"thoughtSignature":"' + SIGNATURE_2.encode() + b'"' in raw


async def test_another_instance_gets_no_replay_state(server: ScriptedServer) -> None:
    _, body = await conversation(server, "other")
    assert body["contents"][1]["parts"] == [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
        {"functionCall": {"name": "get_time", "args": {}}},
    ]


async def test_an_inband_error_becomes_the_raised_error_of_generate(server: ScriptedServer) -> None:
    error = {"error": {"code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED"}}
    server.add(Reply(reads=[f"data: {json.dumps(error)}\r\n\r\n".encode()]))
    async with Harness([("gemini", GeminiPlugin(make_config(server)))]) as harness:
        with pytest.raises(LlmError) as info:
            await harness.generate(GenerateOptions(route="gemini", model=MODEL, messages=[Message.user("x")]))
    assert info.value.code == "RATE_LIMITED"
