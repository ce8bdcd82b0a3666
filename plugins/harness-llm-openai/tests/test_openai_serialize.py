"""Unit tests of the request serializer and the error classifier."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness_core.errors import LlmError
from harness_core.http import ErrorDetails
from harness_core.types import (
    FileBlock,
    GenerateOptions,
    Message,
    ModelInfo,
    NamedToolChoice,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from harness_llm_openai.errors import classify_http_error, inband_code, refine_code
from harness_llm_openai.serialize import RequestSerializer

ARGS = '{ "city" : "Zürich",\n  "emoji": "😀", "n": 1.50, "esc": "a\\"b\\u00e9" }'


def encode(options: GenerateOptions, info: ModelInfo | None = None, **kwargs: object) -> dict[str, object]:
    serializer = RequestSerializer(**kwargs)  # type: ignore[arg-type]
    raw = serializer.encode(options, info or ModelInfo(model=options.model or "m"))
    result: dict[str, object] = json.loads(raw)
    return result


def test_minimal_body() -> None:
    body = encode(GenerateOptions(model="gpt-x", messages=[Message.user("hi")]))
    assert body == {
        "model": "gpt-x",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert "stream_options" not in encode(GenerateOptions(model="m"), include_usage=False)


def test_full_conversation_and_sampling() -> None:
    options = GenerateOptions(
        model="m",
        system="be brief",
        messages=[
            Message(role="system", content=[TextBlock("extra system")]),
            Message(role="user", content=[TextBlock("a"), TextBlock("b")]),
            Message(
                role="assistant",
                content=[ReasoningBlock("hidden"), TextBlock("calling"), ToolCallBlock("c1", "weather", ARGS)],
            ),
            Message(role="tool", content=[ToolResultBlock("c1", "sunny", is_error=True)]),
            Message(role="user", content=[ToolResultBlock("c2", "late"), TextBlock("thanks"), ReasoningBlock("x")]),
            Message(role="assistant", content=[ToolCallBlock("c3", "f", "{}")]),
            Message(role="assistant", content=[]),
        ],
        tools=[ToolSpec("weather", "get the weather", {"type": "object"}), ToolSpec("f")],
        tool_choice=NamedToolChoice("weather"),
        max_tokens=50,
        temperature=0.5,
        top_p=0.9,
        seed=7,
        stop=["END"],
    )
    body = encode(options, max_tokens_field="max_completion_tokens")
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "system", "content": "extra system"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": ARGS}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "late"},
        {"role": "user", "content": "thanks"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c3", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "assistant", "content": ""},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "weather", "description": "get the weather", "parameters": {"type": "object"}},
        },
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}},
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert (body["max_completion_tokens"], body["temperature"], body["top_p"], body["seed"], body["stop"]) == (
        50,
        0.5,
        0.9,
        7,
        ["END"],
    )


def test_tool_call_arguments_byte_exact_in_body() -> None:
    options = GenerateOptions(model="m", messages=[Message(role="assistant", content=[ToolCallBlock("c", "f", ARGS)])])
    raw = RequestSerializer().encode(options, ModelInfo(model="m"))
    assert json.loads(raw)["messages"][0]["tool_calls"][0]["function"]["arguments"] == ARGS


def test_tool_choice_string_and_provider_options_merge() -> None:
    options = GenerateOptions(
        model="m",
        tool_choice="required",
        max_tokens=5,
        provider_options={
            "openai": {"user": "u1", "stream_options": {"include_usage": False}, "n": 1},
            "other": {"x": 1},
        },
    )
    body = encode(options)
    assert body["tool_choice"] == "required"
    assert body["max_tokens"] == 5
    assert body["user"] == "u1"
    assert body["stream_options"] == {"include_usage": False}
    assert "x" not in body


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"n": 2}, "n=2"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"stream": False}, "stream"),
    ],
)
def test_unsupported_provider_options(extra: dict[str, object], named: str) -> None:
    with pytest.raises(LlmError) as info:
        encode(GenerateOptions(model="m", provider_options={"openai": extra}))
    assert info.value.code == "UNSUPPORTED"
    assert named in info.value.message
    assert info.value.field == f"provider_options.{next(iter(extra))}"  # what a gateway names as its client's field


def test_reasoning_effort_listed_unlisted() -> None:
    info = ModelInfo(model="o", reasoning_efforts=["off", "low", "high"])
    assert encode(GenerateOptions(model="o", reasoning_effort="low"), info)["reasoning_effort"] == "low"
    assert encode(GenerateOptions(model="o", reasoning_effort="off"), info)["reasoning_effort"] == "none"
    with pytest.raises(LlmError) as err:
        encode(GenerateOptions(model="o", reasoning_effort="max"), info)
    assert err.value.code == "UNSUPPORTED"
    assert "reasoning_effort" in err.value.message
    assert err.value.field == "reasoning_effort"
    with pytest.raises(LlmError, match="none configured"):
        encode(GenerateOptions(model="o", reasoning_effort="low"))


def test_messages_that_cannot_be_expressed() -> None:
    with pytest.raises(LlmError, match="cannot hold a tool call") as err:
        encode(GenerateOptions(model="m", messages=[Message(role="user", content=[ToolCallBlock("c", "f", "{}")])]))
    assert err.value.code == "BAD_REQUEST"
    with pytest.raises(LlmError, match="outside a tool result"):
        encode(GenerateOptions(model="m", messages=[Message(role="tool", content=[TextBlock("x")])]))


# ---------------------------------------------------------------------- classifier


@pytest.mark.parametrize(
    ("error_type", "code", "message", "expected"),
    [
        ("insufficient_quota", None, None, "QUOTA"),
        ("invalid_request_error", "context_length_exceeded", None, "CONTEXT_LENGTH"),
        (
            "invalid_request_error",
            None,
            "the request exceeds the available context size, try increasing it",
            "CONTEXT_LENGTH",
        ),
        ("rate_limited", "1300", "Rate limit exceeded", "RATE_LIMITED"),
        ("invalid_request_error", None, "bad", None),
        (None, None, None, None),
    ],
)
def test_refine_code(error_type: str | None, code: str | None, message: str | None, expected: str | None) -> None:
    assert refine_code(error_type, code, message) == expected


@pytest.mark.parametrize(
    ("error_type", "code", "expected"),
    [
        ("server_error", None, "SERVER"),
        (None, 502, "SERVER"),
        (None, "429", "RATE_LIMITED"),
        (None, 402, "QUOTA"),
        ("BadRequestError", 400, "BAD_REQUEST"),
        ("BadRequestError", None, "BAD_REQUEST"),
        ("invalid_function_call", "3280", "BAD_REQUEST"),
        ("invalid_request_error", None, "BAD_REQUEST"),
        (None, 200, "SERVER"),
        (None, "weird", "SERVER"),
        (None, None, "SERVER"),
    ],
)
def test_inband_code(error_type: str | None, code: str | int | None, expected: str) -> None:
    assert inband_code(error_type, code, None) == expected


def test_classify_http_error() -> None:
    quota = {
        "error": {"message": "You exceeded your quota", "type": "insufficient_quota", "code": "insufficient_quota"}
    }
    assert classify_http_error(429, quota) == ErrorDetails(code="QUOTA")
    mistral = {"object": "error", "message": "Rate limit exceeded", "type": "rate_limited", "code": "1300"}
    assert classify_http_error(429, mistral) == ErrorDetails(code="RATE_LIMITED")
    assert classify_http_error(500, None) is None
    assert classify_http_error(400, {"error": {"message": "bad", "type": "invalid_request_error"}}) is None


def test_a_tool_result_with_files_is_unsupported_naming_the_route_and_media_type() -> None:
    result = ToolResultBlock("c", "a picture", files=(FileBlock("image/png", data=b"\x89PNG"),))
    call = Message(role="assistant", content=[ToolCallBlock("c", "draw", "{}")])
    options = GenerateOptions(route="gpt", model="m", messages=[call, Message(role="tool", content=[result])])
    with pytest.raises(LlmError) as caught:
        encode(options)
    assert caught.value.code == "UNSUPPORTED"
    assert "image/png" in str(caught.value)
    assert "route 'gpt': a Chat Completions tool message takes text only" in str(caught.value)


def test_a_strict_tool_asks_for_strict_function_calling() -> None:
    options = GenerateOptions(
        model="m",
        messages=[Message.user("hi")],
        tools=[
            ToolSpec("exact", parameters={"type": "object", "additionalProperties": False}, strict=True),
            ToolSpec("f"),
        ],
    )
    tools: Any = encode(options)["tools"]
    assert tools[0]["function"] == {
        "name": "exact",
        "parameters": {"type": "object", "additionalProperties": False},
        "strict": True,
    }
    assert "strict" not in tools[1]["function"]  # the API's default (false): nothing sent
