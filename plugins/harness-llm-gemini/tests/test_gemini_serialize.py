"""The request serializer: options → a ``generateContent`` body, before any I/O."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from gemini_fixtures import MODEL, SIGNATURE

from harness_core.errors import LlmError
from harness_core.types import (
    FileBlock,
    GenerateOptions,
    JsonObjectFormat,
    JsonSchemaFormat,
    Message,
    NamedToolChoice,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from harness_llm_gemini.config import DEFAULT_THINKING_BUDGETS, DEFAULT_THINKING_LEVELS
from harness_llm_gemini.serialize import build_body, replay_of

WEATHER = ToolSpec("get_weather", "Weather by city", {"type": "object", "properties": {"city": {"type": "string"}}})


def body(
    options: GenerateOptions | None = None, *, efforts: dict[str, int | str] | None = None, **fields: Any
) -> dict[str, Any]:
    opts = options or GenerateOptions(model=MODEL, **fields)
    raw = build_body(opts, efforts=DEFAULT_THINKING_BUDGETS if efforts is None else efforts)
    decoded: dict[str, Any] = json.loads(raw)
    return decoded


def state(**blocks: dict[str, Any]) -> dict[str, Any]:
    return {"v": 1, "provider": "gemini", "model": MODEL, "blocks": {k.strip("_"): v for k, v in blocks.items()}}


def test_minimal_body() -> None:
    assert body(messages=[Message.user("hi")]) == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def test_system_sampling_and_tools() -> None:
    got = body(
        messages=[Message(role="system", content=[TextBlock("Be brief.")]), Message.user("hi")],
        system="You are terse.",
        tools=[WEATHER, ToolSpec("ping")],
        tool_choice="required",
        max_tokens=64,
        temperature=0.2,
        top_p=0.9,
        seed=7,
        stop=["END"],
    )
    assert got["systemInstruction"] == {"parts": [{"text": "You are terse.\n\nBe brief."}]}
    assert got["tools"] == [
        {
            "functionDeclarations": [
                {"name": "get_weather", "description": "Weather by city", "parametersJsonSchema": WEATHER.parameters},
                {"name": "ping", "parametersJsonSchema": {"type": "object", "properties": {}}},
            ]
        }
    ]
    assert got["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert got["generationConfig"] == {
        "maxOutputTokens": 64,
        "temperature": 0.2,
        "topP": 0.9,
        "seed": 7,
        "stopSequences": ["END"],
    }


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        (NamedToolChoice("get_weather"), {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
    ],
)
def test_tool_choice(choice: Any, config: dict[str, Any]) -> None:
    assert body(messages=[Message.user("x")], tools=[WEATHER], tool_choice=choice)["toolConfig"] == {
        "functionCallingConfig": config
    }


def test_reasoning_efforts() -> None:
    budget = body(messages=[Message.user("x")], reasoning_effort="low")["generationConfig"]
    assert budget == {"thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True}}
    off = body(messages=[Message.user("x")], reasoning_effort="off")["generationConfig"]
    assert off == {"thinkingConfig": {"thinkingBudget": 0, "includeThoughts": False}}
    level = body(messages=[Message.user("x")], reasoning_effort="high", efforts=dict(DEFAULT_THINKING_LEVELS))
    assert level["generationConfig"] == {"thinkingConfig": {"thinkingLevel": "high", "includeThoughts": True}}
    quiet = build_body(
        GenerateOptions(model=MODEL, messages=[Message.user("x")]),
        efforts={"low": 512},
        default_effort="low",
        include_thoughts=False,
    )
    assert json.loads(quiet)["generationConfig"] == {
        "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": False}
    }
    with pytest.raises(LlmError) as info:
        body(messages=[Message.user("x")], reasoning_effort="max")
    assert info.value.code == "UNSUPPORTED"
    assert "'max'" in info.value.message
    assert "off, low, medium, high" in info.value.message
    assert info.value.field == "reasoning_effort"
    with pytest.raises(LlmError, match="known: none"):
        body(messages=[Message.user("x")], reasoning_effort="low", efforts={})


def test_provider_options_are_merged() -> None:
    got = body(
        messages=[Message.user("x")],
        max_tokens=5,
        provider_options={
            "gemini": {"generationConfig": {"topK": 3}, "safetySettings": [{"category": "X", "threshold": "Y"}]},
            "openai": {"ignored": True},
        },
    )
    assert got["generationConfig"] == {"maxOutputTokens": 5, "topK": 3}
    replaced = body(messages=[Message.user("x")], provider_options={"gemini": {"generationConfig": None}})
    assert replaced["generationConfig"] is None
    assert got["safetySettings"] == [{"category": "X", "threshold": "Y"}]
    assert "ignored" not in got


HISTORY_CALL = ToolCallBlock("call_resp1_1", "get_weather", '{"city": "Paris", "deep": {"b": 1, "a": [1]}}')


def conversation(assistant: Message) -> list[Message]:
    return [
        Message.user("Weather?"),
        assistant,
        Message(role="tool", content=[ToolResultBlock("call_resp1_1", "21 C"), ToolResultBlock("fc-2", "no", True)]),
        Message.user("Thanks"),
    ]


def test_replay_puts_signatures_back_exactly_and_merges_user_turns() -> None:
    replay = {
        "v": 1,
        "provider": "gemini",
        "model": MODEL,
        "blocks": {"0": {"signature": "SIG-R"}, "1": {"signature": SIGNATURE}, "2": {"native_id": True}},
        "parts": [
            {"after": -1, "part": {"executableCode": {"code": "1"}, "thoughtSignature": "SIG-X"}},
            {"after": 3, "part": {"text": "", "thoughtSignature": "SIG-END"}},
            {"after": 9, "part": {"text": "", "thoughtSignature": "SIG-LOST-BLOCK"}},
            {"after": "bad", "part": {"codeExecutionResult": {"output": "1"}}},
            {"after": 0, "part": "not a part"},
        ],
    }
    assistant = Message(
        role="assistant",
        content=[
            ReasoningBlock("thinking\u2026"),
            HISTORY_CALL,
            ToolCallBlock("fc-2", "get_time", ""),
            TextBlock(""),
            ReasoningBlock("unsigned: dropped"),
        ],
        replay_state=replay,
    )
    got = body(messages=conversation(assistant))
    assert got["contents"] == [
        {"role": "user", "parts": [{"text": "Weather?"}]},
        {
            "role": "model",
            "parts": [
                {"executableCode": {"code": "1"}, "thoughtSignature": "SIG-X"},
                {"codeExecutionResult": {"output": "1"}},
                {"text": "thinking\u2026", "thought": True, "thoughtSignature": "SIG-R"},
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Paris", "deep": {"b": 1, "a": [1]}}},
                    "thoughtSignature": SIGNATURE,
                },
                {"functionCall": {"name": "get_time", "args": {}, "id": "fc-2"}},
                {"text": "", "thoughtSignature": "SIG-END"},
                {"text": "", "thoughtSignature": "SIG-LOST-BLOCK"},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "21 C"}}},
                {"functionResponse": {"name": "get_time", "response": {"error": "no"}, "id": "fc-2"}},
                {"text": "Thanks"},
            ],
        },
    ]


@pytest.mark.parametrize(
    "replay",
    [
        None,
        {"v": 1, "provider": "gemini", "model": "another-model", "blocks": {"0": {"signature": "S"}}},
        {"v": 2, "provider": "gemini", "model": MODEL, "blocks": {"0": {"signature": "S"}}},
        {"v": 1, "provider": "anthropic", "model": MODEL, "blocks": {"0": {"signature": "S"}}},
        ["not", "a", "dict"],
    ],
)
def test_foreign_replay_state_sends_no_signature(replay: Any) -> None:
    assistant = Message(role="assistant", content=[ReasoningBlock("r"), HISTORY_CALL], replay_state=replay)
    got = body(messages=[Message.user("Weather?"), assistant])
    model_turn = got["contents"][1]
    assert model_turn == {
        "role": "model",
        "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris", "deep": {"b": 1, "a": [1]}}}}],
    }


def test_replay_of_tolerates_odd_shapes() -> None:
    odd = Message(role="assistant", content=[], replay_state={"v": 1, "provider": "gemini", "model": MODEL, "parts": 3})
    assert replay_of(odd, MODEL) == ({}, [])
    odd = Message(
        role="assistant", content=[], replay_state={"v": 1, "provider": "gemini", "model": MODEL, "blocks": []}
    )
    assert replay_of(odd, MODEL) == ({}, [])


def test_empty_turns_are_skipped_and_text_is_kept() -> None:
    got = body(
        messages=[
            Message(role="system", content=[]),
            Message.user("a"),
            Message(role="assistant", content=[TextBlock("")]),
            Message(role="user", content=[TextBlock(""), TextBlock("b")]),
            Message(role="assistant", content=[TextBlock("c")]),
        ]
    )
    assert "systemInstruction" not in got
    assert got["contents"] == [
        {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
        {"role": "model", "parts": [{"text": "c"}]},
    ]


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([Message(role="assistant", content=[ToolCallBlock("c", "f", "[1]")])], "not a JSON object"),
        ([Message(role="assistant", content=[ToolCallBlock("c", "f", "{oops")])], "not a JSON object"),
        ([Message(role="tool", content=[ToolResultBlock("nowhere", "x")])], "'nowhere'"),
        ([Message(role="assistant", content=[ToolResultBlock("c", "x")])], "cannot hold a tool-result block"),
        ([Message(role="user", content=[ReasoningBlock("x")])], "cannot hold a reasoning block"),
    ],
)
def test_bad_history_is_a_bad_request(messages: list[Message], fragment: str) -> None:
    with pytest.raises(LlmError) as info:
        body(messages=messages)
    assert info.value.code == "BAD_REQUEST"
    assert fragment in info.value.message
    assert info.value.provider == "gemini"


def test_a_model_is_required() -> None:
    with pytest.raises(LlmError, match="no model given"):
        build_body(GenerateOptions(messages=[Message.user("x")]), efforts={})


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


def test_files_go_inline_or_by_uri() -> None:
    message = Message(
        role="user",
        content=[
            TextBlock("Describe these."),
            FileBlock("image/png", data=PNG, filename="photo.png"),
            FileBlock("application/pdf", url="https://generativelanguage.googleapis.com/v1beta/files/abc123"),
            FileBlock("text/markdown", data="# Title \u00e9".encode()),
            FileBlock("audio/mpeg", url="gs://bucket/clip.mp3"),
        ],
    )
    assert body(messages=[message])["contents"][0]["parts"] == [
        {"text": "Describe these."},
        {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(PNG).decode()}},
        {
            "fileData": {
                "mimeType": "application/pdf",
                "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc123",
            }
        },
        {"inlineData": {"mimeType": "text/markdown", "data": base64.b64encode("# Title \u00e9".encode()).decode()}},
        {"fileData": {"mimeType": "audio/mpeg", "fileUri": "gs://bucket/clip.mp3"}},
    ]


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        (FileBlock("application/zip", data=b"PK"), "Gemini does not take application/zip"),
        (FileBlock("image/png", url="ftp://example.com/a.png"), "only https, http and gs URLs"),
        (FileBlock("image/png", data=PNG), f"{len(PNG)} bytes is over the inline limit of 16 bytes"),
        (FileBlock("image/png", url="https://h/a.png", detail="low"), "detail 'low' (an image resolution hint)"),
    ],
)
def test_files_gemini_cannot_take_are_unsupported(block: FileBlock, fragment: str) -> None:
    options = GenerateOptions(model=MODEL, messages=[Message(role="user", content=[block])])
    with pytest.raises(LlmError) as info:
        build_body(options, efforts={}, max_inline_bytes=16)
    assert info.value.code == "UNSUPPORTED"
    assert fragment in info.value.message
    assert block.media_type in info.value.message
    assert "\\x89PNG" not in info.value.message


def test_a_file_outside_a_user_message_is_a_bad_request() -> None:
    for role in ("assistant", "tool"):
        with pytest.raises(LlmError, match=f"{role} message cannot hold a file block") as info:
            body(messages=[Message(role=role, content=[FileBlock("image/png", data=PNG)])])  # type: ignore[arg-type]
        assert info.value.code == "BAD_REQUEST"


def test_structured_output() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
    strict = body(messages=[Message.user("x")], response_format=JsonSchemaFormat("person", schema, strict=True))
    assert strict["generationConfig"] == {"responseMimeType": "application/json", "responseJsonSchema": schema}
    plain = body(messages=[Message.user("x")], response_format=JsonObjectFormat(), max_tokens=9)
    assert plain["generationConfig"] == {"maxOutputTokens": 9, "responseMimeType": "application/json"}


def test_unsigned_calls_get_the_placeholder_when_asked() -> None:
    foreign = Message(
        role="assistant",
        content=[TextBlock("Let me look."), HISTORY_CALL, ToolCallBlock("c2", "get_time", "{}")],
        replay_state={"v": 1, "provider": "openai", "model": "gpt-x"},
    )
    ours = Message(
        role="assistant", content=[ToolCallBlock("c3", "get_time", "{}")], replay_state=state(_0_={"signature": "OWN"})
    )
    messages = [
        Message.user("Weather?"),
        foreign,
        Message(role="tool", content=[ToolResultBlock(HISTORY_CALL.id, "18 C"), ToolResultBlock("c2", "14:00")]),
        Message(role="assistant", content=[TextBlock("Anything else?")]),
        Message.user("Time again?"),
        ours,
        Message(role="tool", content=[ToolResultBlock("c3", "14:01")]),
    ]
    options = GenerateOptions(model=MODEL, messages=messages)
    signed = json.loads(build_body(options, efforts={}, unsigned_call_signature="PLACEHOLDER"))["contents"]
    assert [part.get("thoughtSignature") for part in signed[1]["parts"]] == [None, "PLACEHOLDER", None]
    assert signed[5]["parts"] == [{"functionCall": {"name": "get_time", "args": {}}, "thoughtSignature": "OWN"}]
    plain = json.loads(build_body(options, efforts={}))["contents"]
    assert all("thoughtSignature" not in part for part in plain[1]["parts"])


def _result_turn(*files: FileBlock) -> list[Message]:
    call = Message(role="assistant", content=[ToolCallBlock("c9", "draw", "{}")])
    return [Message.user("draw"), call, Message(role="tool", content=[ToolResultBlock("c9", "drawn", files=files)])]


def test_a_tool_result_with_files_puts_them_in_the_function_response_parts() -> None:
    png = FileBlock("image/png", data=b"\x89PNG")
    sent = body(GenerateOptions(model=MODEL, messages=_result_turn(png)))["contents"][-1]["parts"]
    assert sent == [
        {
            "functionResponse": {
                "name": "draw",
                "response": {"output": "drawn"},
                "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}}],
            }
        }
    ]


def test_a_media_type_a_function_response_does_not_take_is_unsupported() -> None:
    with pytest.raises(LlmError) as caught:
        body(GenerateOptions(model=MODEL, messages=_result_turn(FileBlock("audio/wav", data=b"RIFF"))))
    assert caught.value.code == "UNSUPPORTED"
    assert "audio/wav" in str(caught.value)
    assert "a functionResponse takes only" in str(caught.value)


def test_a_strict_tool_is_unsupported_by_name() -> None:
    with pytest.raises(LlmError) as refused:
        body(messages=[Message.user("hi")], tools=[ToolSpec("loose"), ToolSpec("exact", strict=True)])
    assert refused.value.code == "UNSUPPORTED"
    assert "tool 'exact' is strict" in refused.value.message
