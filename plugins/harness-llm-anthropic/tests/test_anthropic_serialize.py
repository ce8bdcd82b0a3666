"""The request serializer: GenerateOptions -> Messages API body bytes (no I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic_wire_fixtures import MODEL, REDACTED, SIGNATURE

from harness_core.errors import LlmError
from harness_core.types import (
    FileBlock,
    GenerateOptions,
    Message,
    NamedToolChoice,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from harness_llm_anthropic.config import DEFAULT_THINKING_BUDGETS
from harness_llm_anthropic.serialize import build_body, replay_blocks

STATE = {
    "v": 1,
    "provider": "anthropic",
    "model": MODEL,
    "blocks": {"0": {"signature": SIGNATURE}, "1": {"redacted": REDACTED}},
}


def body(options: GenerateOptions, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("max_tokens_default", 1000)
    kwargs.setdefault("budgets", DEFAULT_THINKING_BUDGETS)
    raw = build_body(options, **kwargs)
    assert isinstance(raw, bytes)
    result: dict[str, Any] = json.loads(raw)
    return result


def opts(*messages: Message, **kwargs: Any) -> GenerateOptions:
    return GenerateOptions(model=MODEL, messages=list(messages), **kwargs)


def test_minimal_request() -> None:
    assert body(opts(Message.user("hi"))) == {
        "model": MODEL,
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": True,
    }


def test_sampling_fields_tools_and_choice() -> None:
    options = opts(
        Message.user("hi"),
        system="be brief",
        max_tokens=50,
        temperature=0.2,
        top_p=0.9,
        stop=["END"],
        tools=[
            ToolSpec("get_weather", "Weather by city", {"type": "object", "properties": {"city": {"type": "string"}}}),
            ToolSpec("now"),
        ],
        tool_choice="required",
    )
    assert body(options) == {
        "model": MODEL,
        "max_tokens": 50,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "system": "be brief",
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather by city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
            {"name": "now", "input_schema": {"type": "object", "properties": {}}},
        ],
        "tool_choice": {"type": "any"},
        "stop_sequences": ["END"],
        "temperature": 0.2,
        "top_p": 0.9,
        "stream": True,
    }


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        (NamedToolChoice("f"), {"type": "tool", "name": "f"}),
    ],
)
def test_tool_choice(choice: Any, wire: dict[str, str]) -> None:
    assert body(opts(Message.user("x"), tools=[ToolSpec("f")], tool_choice=choice))["tool_choice"] == wire


def test_system_messages_are_joined_into_system() -> None:
    options = opts(
        Message(role="system", content=[TextBlock("first")]),
        Message.user("hi"),
        Message(role="system", content=[TextBlock("")]),
        Message(role="system", content=[TextBlock("second")]),
        system="top",
    )
    result = body(options)
    assert result["system"] == "top\n\nfirst\n\nsecond"
    assert [m["role"] for m in result["messages"]] == ["user"]


def test_tool_round_trip_placement_and_merging() -> None:
    options = opts(
        Message.user("weather?"),
        Message(
            role="assistant",
            content=[
                TextBlock("Let me look."),
                ToolCallBlock("toolu_1", "get_weather", '{"city": "Paris",  "n": 1.50}'),
                ToolCallBlock("toolu_2", "now", "{}"),
                ToolCallBlock("toolu_3", "noop", ""),
            ],
        ),
        Message(role="tool", content=[ToolResultBlock("toolu_1", "sunny")]),
        Message(role="tool", content=[ToolResultBlock("toolu_2", "boom", is_error=True)]),
        Message(role="user", content=[TextBlock("and?"), ToolResultBlock("toolu_3", "")]),
    )
    raw = build_body(options, max_tokens_default=10, budgets={})
    # tool_use input is the raw arguments text, byte-exact
    assert b'"input":{"city": "Paris",  "n": 1.50}' in raw
    messages = json.loads(raw)["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "n": 1.5}},
            {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
            {"type": "tool_use", "id": "toolu_3", "name": "noop", "input": {}},
        ],
    }
    # consecutive tool results and the user text form one user turn, results first
    assert messages[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": True},
            {"type": "tool_result", "tool_use_id": "toolu_3"},
            {"type": "text", "text": "and?"},
        ],
    }
    assert len(messages) == 3


@pytest.mark.parametrize("arguments", ['{"a": ', "[1, 2]", '"text"', "null"])
def test_invalid_tool_arguments_are_bad_request(arguments: str) -> None:
    options = opts(Message(role="assistant", content=[ToolCallBlock("t", "f", arguments)]))
    with pytest.raises(LlmError) as info:
        body(options)
    assert info.value.code == "BAD_REQUEST"
    assert "'t'" in info.value.message


def test_reasoning_is_replayed_with_signature_and_redacted_data() -> None:
    assistant = Message(
        role="assistant",
        content=[
            ReasoningBlock("thought \u00e9", signed=True),
            ReasoningBlock("", signed=True),
            ReasoningBlock("unsigned"),
            TextBlock("answer"),
        ],
        replay_state=STATE,
    )
    raw = build_body(opts(Message.user("q"), assistant, Message.user("more")), max_tokens_default=10, budgets={})
    assert SIGNATURE.encode() in raw  # byte-exact
    assert json.loads(raw)["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "thought \u00e9", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
        {"type": "text", "text": "answer"},
    ]


@pytest.mark.parametrize(
    "state",
    [
        None,
        {**STATE, "model": "claude-other"},
        {**STATE, "provider": "openai"},
        {**STATE, "v": 2},
        {**STATE, "blocks": "nope"},
        {**STATE, "blocks": {"0": "nope", "1": {"other": 1}}},
        "a string",
    ],
)
def test_reasoning_without_usable_replay_state_is_dropped(state: Any) -> None:
    assistant = Message(
        role="assistant",
        content=[ReasoningBlock("t", signed=True), ReasoningBlock("", signed=True), TextBlock("answer")],
        replay_state=state,
    )
    result = body(opts(Message.user("q"), assistant))
    assert result["messages"][1]["content"] == [{"type": "text", "text": "answer"}]


def test_replay_blocks() -> None:
    assert replay_blocks(Message(role="assistant", content=[], replay_state=STATE), MODEL) == STATE["blocks"]
    assert replay_blocks(Message(role="assistant", content=[], replay_state=STATE), "other") == {}


def test_empty_assistant_and_user_messages_are_skipped() -> None:
    options = opts(
        Message.user("q"),
        Message(role="assistant", content=[TextBlock(""), ReasoningBlock("x")]),
        Message(role="user", content=[TextBlock("")]),
        Message.user("again"),
    )
    assert body(options)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "again"}]}
    ]


@pytest.mark.parametrize(
    ("message", "text"),
    [
        (Message(role="assistant", content=[ToolResultBlock("t", "x")]), "assistant message cannot hold a tool result"),
        (Message(role="user", content=[ReasoningBlock("x")]), "user message cannot hold a reasoning block"),
        (Message(role="tool", content=[ToolCallBlock("t", "f", "{}")]), "tool message cannot hold a tool-call block"),
    ],
)
def test_blocks_in_the_wrong_message_are_bad_request(message: Message, text: str) -> None:
    with pytest.raises(LlmError) as info:
        body(opts(message))
    assert info.value.code == "BAD_REQUEST"
    assert text in info.value.message


def test_seed_is_unsupported() -> None:
    with pytest.raises(LlmError) as info:
        body(opts(Message.user("x"), seed=1))
    assert info.value.code == "UNSUPPORTED"
    assert "seed" in info.value.message


def test_model_is_required() -> None:
    with pytest.raises(LlmError) as info:
        body(GenerateOptions(messages=[Message.user("x")]))
    assert info.value.code == "BAD_REQUEST"


@pytest.mark.parametrize(
    ("effort", "max_tokens", "default", "expected_max", "budget"),
    [
        ("low", None, 4096, 4096, 1024),
        ("high", None, 4096, 16384 + 4096, 16384),
        ("medium", 5000, 4096, 5000, 4096),
        ("off", None, 4096, 4096, None),
        (None, None, 4096, 4096, None),
    ],
)
def test_thinking_budget(
    effort: str | None, max_tokens: int | None, default: int, expected_max: int, budget: int | None
) -> None:
    result = body(opts(Message.user("x"), reasoning_effort=effort, max_tokens=max_tokens), max_tokens_default=default)
    assert result["max_tokens"] == expected_max
    if budget is None:
        assert "thinking" not in result
    else:
        assert result["thinking"] == {"type": "enabled", "budget_tokens": budget}


def test_default_effort_applies_when_the_request_names_none() -> None:
    result = body(opts(Message.user("x")), default_effort="low")
    assert result["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert "thinking" not in body(opts(Message.user("x"), reasoning_effort="off"), default_effort="low")


def test_unknown_effort_is_unsupported() -> None:
    with pytest.raises(LlmError) as info:
        body(opts(Message.user("x"), reasoning_effort="extreme"))
    assert info.value.code == "UNSUPPORTED"
    assert "'extreme'" in info.value.message
    assert "off, low, medium, high" in info.value.message
    assert info.value.field == "reasoning_effort"


def test_explicit_max_tokens_not_above_budget_is_bad_request() -> None:
    with pytest.raises(LlmError) as info:
        body(opts(Message.user("x"), reasoning_effort="medium", max_tokens=4096))
    assert info.value.code == "BAD_REQUEST"
    assert "max_tokens (4096)" in info.value.message


def test_provider_options_are_merged_but_stream_stays_on() -> None:
    options = opts(
        Message.user("x"),
        provider_options={"anthropic": {"top_k": 5, "metadata": {"user_id": "u"}, "stream": False}, "openai": {"n": 2}},
    )
    result = body(options)
    assert result["top_k"] == 5
    assert result["metadata"] == {"user_id": "u"}
    assert result["stream"] is True
    assert "n" not in result


def _result_turn(*files: FileBlock, text: str = "") -> list[Message]:
    call = Message(role="assistant", content=[ToolCallBlock("toolu_9", "draw", "{}")])
    return [Message.user("draw"), call, Message(role="tool", content=[ToolResultBlock("toolu_9", text, files=files)])]


def test_a_tool_result_with_files_sends_image_and_document_blocks() -> None:
    png, pdf = FileBlock("image/png", data=b"\x89PNG"), FileBlock("application/pdf", data=b"%PDF")
    sent = body(opts(*_result_turn(png, pdf, text="two files")))["messages"][2]["content"]
    assert sent == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_9",
            "content": [
                {"type": "text", "text": "two files"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}},
            ],
        }
    ]
    only_image = body(opts(*_result_turn(png)))["messages"][2]["content"][0]["content"]
    assert [part["type"] for part in only_image] == ["image"]


def test_audio_in_a_tool_result_is_unsupported_naming_the_media_type() -> None:
    with pytest.raises(LlmError) as caught:
        body(opts(*_result_turn(FileBlock("audio/wav", data=b"RIFF"))))
    assert caught.value.code == "UNSUPPORTED"
    assert "audio/wav" in str(caught.value)


def test_a_strict_tool_asks_for_strict_tool_use() -> None:
    sent = body(opts(Message.user("hi"), tools=[ToolSpec("exact", "d", strict=True), ToolSpec("loose")]))
    assert sent["tools"] == [
        {"name": "exact", "description": "d", "input_schema": {"type": "object", "properties": {}}, "strict": True},
        {"name": "loose", "input_schema": {"type": "object", "properties": {}}},
    ]
