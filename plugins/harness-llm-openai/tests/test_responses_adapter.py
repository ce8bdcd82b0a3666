"""The Responses adapter end to end against a scripted provider: the request it sends, the plugin's
``api`` switch, routes of both APIs side by side, and a two-turn conversation replaying encrypted
reasoning (the conformance suite is in ``test_responses_conformance.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from responses_fixtures import RECORDED, recorded

from harness_core.adapter import LlmAdapter
from harness_core.conversation import Conversation
from harness_core.runtime import Harness
from harness_core.secret import Secret
from harness_core.testing.check import check_stream
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.tools import Tool
from harness_core.types import (
    FileBlock,
    GenerateOptions,
    JsonSchemaFormat,
    Message,
    ReasoningBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from harness_llm_openai import Config, ModelConfig, OpenAIAdapter, OpenAIPlugin, ResponsesAdapter

KEY = "sk-" + "responses-0123456789abcdef"
MODEL = "o4-mini"
ASK = [Message.user("Say hello")]
TOOL_CALL = recorded("tool-call")
TEXT = recorded("text")
ENCRYPTED = json.loads(TOOL_CALL.split(b'"encrypted_content":')[1].split(b"}", 1)[0])


def config(url: str, **fields: Any) -> Config:
    return Config(base_url=url, api_key=Secret(KEY), api="responses", **fields)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


# --------------------------------------------------------------------------- the request


async def stream(adapter: LlmAdapter, options: GenerateOptions) -> list[Any]:
    try:
        return check_stream([chunk async for chunk in adapter.stream(options)])
    finally:
        await adapter.aclose()


@pytest.mark.anyio
async def test_request_path_headers_and_reasoning_fields(server: ScriptedServer) -> None:
    server.add(Reply(reads=[TEXT]), Reply(reads=[TEXT]))
    schema = JsonSchemaFormat("greeting", {"type": "object", "properties": {"text": {"type": "string"}}})
    photo = FileBlock("image/png", url="https://example.com/p.png")
    options = GenerateOptions(
        model=MODEL, messages=[Message.user("hi", photo)], response_format=schema, reasoning_effort="medium"
    )
    await stream(ResponsesAdapter(config(server.url, organization="org-1")), options)
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/responses")
    assert sent.headers["authorization"] == "Bearer " + KEY
    assert sent.headers["openai-organization"] == "org-1"
    body = sent.json()
    assert body["stream"] is True
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert body["text"]["format"]["name"] == "greeting"
    assert body["input"][0]["content"][1] == {
        "type": "input_image",
        "image_url": "https://example.com/p.png",
        "detail": "auto",
    }
    plain = GenerateOptions(model="gpt-4.1-mini", messages=ASK)
    await stream(ResponsesAdapter(config(server.url, store=True, reasoning_summary=None)), plain)
    body = server.requests[1].json()
    assert body["store"] is True
    assert "reasoning" not in body
    assert "include" not in body


def test_model_facts() -> None:
    adapter = ResponsesAdapter(config("http://127.0.0.1:1", models={"o3": ModelConfig(reasoning_efforts=["high"])}))
    assert adapter.resolve_model("o3").reasoning_efforts == ["high"]  # the config wins
    assert adapter.resolve_model("gpt-5-mini").reasoning_efforts == ["low", "medium", "high"]
    assert adapter.resolve_model("gpt-4.1").reasoning_efforts is None


def test_the_api_field_picks_the_adapter() -> None:
    assert type(OpenAIPlugin(Config()).make_adapter()) is OpenAIAdapter
    assert type(OpenAIPlugin(Config(api="responses")).make_adapter()) is ResponsesAdapter
    with pytest.raises(msgspec.ValidationError, match="api"):
        msgspec.convert({"api": "assistants"}, Config)


@pytest.mark.anyio
async def test_routes_of_both_apis_coexist(server: ScriptedServer) -> None:
    chat_body = (RECORDED.parent / "recorded" / "text.sse").read_bytes()
    server.route("POST", "/chat/completions", Reply(reads=[chat_body]))
    server.route("POST", "/responses", Reply(reads=[TEXT]))
    plugins = [
        ("openai", OpenAIPlugin(Config(base_url=server.url, api_key=Secret(KEY)))),
        ("openai:responses", OpenAIPlugin(config(server.url, routes=["openai-responses"]))),
    ]
    async with Harness(plugins) as harness:
        for route in ("openai", "openai-responses"):
            result = await harness.generate(GenerateOptions(route=route, model=MODEL, messages=ASK))
            assert result.text == "Café coûte 5 € 😀 你好世界"
    assert sorted(request.path for request in server.requests) == ["/chat/completions", "/responses"]


# --------------------------------------------------------------------------- replay


def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"21 °C in {city}"


def plugins(server: ScriptedServer) -> list[tuple[str, object]]:
    return [
        ("openai", OpenAIPlugin(config(server.url))),
        ("openai:other", OpenAIPlugin(config(server.url, routes=["other"]))),
    ]


@pytest.mark.anyio
async def test_two_turns_replay_encrypted_reasoning_byte_exact(server: ScriptedServer) -> None:
    server.add(Reply(reads=[TOOL_CALL]), Reply(reads=[TEXT]))
    async with Harness(plugins(server)) as harness:
        chat = Conversation(harness, route="openai", model=MODEL, tools=[Tool(get_weather)])
        reply = await chat.send("Weather in Zürich?")
    assert reply.text == "Café coûte 5 € 😀 你好世界"
    turn = chat.messages[1]
    assert isinstance(turn.content[0], ReasoningBlock)
    assert turn.content[0].signed
    assert isinstance(turn.content[1], ToolCallBlock)
    assert turn.replay_state["reasoning"]["0"]["encrypted_content"] == ENCRYPTED
    body = server.requests[1].json()
    assert body["input"] == [
        {"role": "user", "content": "Weather in Zürich?"},
        {
            "type": "reasoning",
            "id": "rs_68af1c2f00",
            "summary": [{"type": "summary_text", "text": "Need the weather."}],
            "encrypted_content": ENCRYPTED,
        },
        {"type": "function_call", "call_id": "call_Qx7fJ2", "name": "get_weather", "arguments": '{"city":"Zürich"}'},
        {"type": "function_call_output", "call_id": "call_Qx7fJ2", "output": "21 °C in Zürich"},
    ]
    raw = server.requests[1].body
    assert b'"encrypted_content":"' + ENCRYPTED.encode() + b'"' in raw  # the very bytes the server sent
    assert b'"arguments":"{\\"city\\":\\"Z\xc3\xbcrich\\"}"' in raw


@pytest.mark.anyio
@pytest.mark.parametrize(("route", "model"), [("other", MODEL), ("openai", "o3")])
async def test_reasoning_is_not_replayed_to_another_instance_or_model(
    server: ScriptedServer, route: str, model: str
) -> None:
    server.add(Reply(reads=[TOOL_CALL]), Reply(reads=[TEXT]))
    async with Harness(plugins(server)) as harness:
        first = GenerateOptions(route="openai", model=MODEL, messages=[Message.user("Weather?")])
        result = await harness.generate(first)
        assert result.replay_state is not None
        answer = Message("tool", [ToolResultBlock("call_Qx7fJ2", "21")])
        second = GenerateOptions(route=route, model=model, messages=[*first.messages, result.message, answer])
        await harness.generate(second)
    body = server.requests[1].json()
    assert [item.get("type", item.get("role")) for item in body["input"]] == [
        "user",
        "function_call",
        "function_call_output",
    ]
