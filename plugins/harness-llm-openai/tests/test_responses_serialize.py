"""The Responses API request serializer: every mapping of ``GenerateOptions`` onto ``POST /responses``."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from harness_core.errors import LlmError
from harness_core.types import (
    FileBlock,
    GenerateOptions,
    JsonObjectFormat,
    JsonSchemaFormat,
    Message,
    ModelInfo,
    NamedToolChoice,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from harness_llm_openai.responses_serialize import ResponsesSerializer, replay_entries
from harness_llm_openai.serialize import MAX_FILE_BYTES

MODEL = "o4-mini"
INFO = ModelInfo(model=MODEL, reasoning_efforts=["off", "low", "high"])
PLAIN = ModelInfo(model="gpt-4.1-mini")
ENCRYPTED = "gAAAAABenc=="
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8


def body(
    *messages: Message,
    info: ModelInfo = INFO,
    serializer: ResponsesSerializer | None = None,
    reasoning: bool = False,
    **options: Any,
) -> dict[str, Any]:
    serializer = serializer or ResponsesSerializer()
    options_ = GenerateOptions(model=info.model, messages=list(messages), **options)
    result: dict[str, Any] = json.loads(serializer.encode(options_, info, reasoning=reasoning))
    return result


def error(*messages: Message, info: ModelInfo = INFO, **options: Any) -> LlmError:
    with pytest.raises(LlmError) as caught:
        ResponsesSerializer().encode(GenerateOptions(model=info.model, messages=list(messages), **options), info)
    return caught.value


def state(reasoning: dict[str, Any], **over: Any) -> dict[str, Any]:
    return {"v": 1, "provider": "openai", "api": "responses", "model": MODEL, "reasoning": reasoning, **over}


# --------------------------------------------------------------------------- top-level fields


def test_plain_request() -> None:
    sent = body(Message.user("hi"), info=PLAIN, system="Be brief.", max_tokens=50, temperature=0.2, top_p=0.9)
    assert sent == {
        "model": "gpt-4.1-mini",
        "input": [{"role": "user", "content": "hi"}],
        "stream": True,
        "store": False,
        "instructions": "Be brief.",
        "max_output_tokens": 50,
        "temperature": 0.2,
        "top_p": 0.9,
    }


def test_tools_are_flat_and_not_strict_and_tool_choice() -> None:
    tools = [
        ToolSpec("lookup", "Find a thing", {"type": "object", "properties": {"q": {"type": "string"}}}),
        ToolSpec("ping"),
    ]
    sent = body(Message.user("hi"), tools=tools, tool_choice=NamedToolChoice("lookup"))
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find a thing",
            "parameters": tools[0].parameters,
            "strict": False,
        },
        {"type": "function", "name": "ping", "parameters": {"type": "object", "properties": {}}, "strict": False},
    ]
    assert sent["tool_choice"] == {"type": "function", "name": "lookup"}
    assert body(Message.user("hi"), tools=tools, tool_choice="required")["tool_choice"] == "required"


@pytest.mark.parametrize(("option", "value"), [("seed", 7), ("stop", ["END"])])
def test_options_without_a_field_are_unsupported(option: str, value: object) -> None:
    extra: dict[str, Any] = {option: value}
    failure = error(Message.user("hi"), **extra)
    assert failure.code == "UNSUPPORTED"
    assert option in str(failure)


def test_provider_options_are_merged_but_stream_stays_true() -> None:
    sent = body(Message.user("hi"), provider_options={"openai": {"service_tier": "flex", "truncation": "auto"}})
    assert (sent["service_tier"], sent["truncation"]) == ("flex", "auto")
    failure = error(Message.user("hi"), provider_options={"openai": {"stream": False}})
    assert failure.code == "UNSUPPORTED"
    assert "stream" in str(failure)


# --------------------------------------------------------------------------- reasoning and format


def test_effort_and_summary_and_encrypted_reasoning() -> None:
    sent = body(Message.user("hi"), reasoning_effort="high")
    assert sent["reasoning"] == {"effort": "high", "summary": "auto"}
    assert sent["include"] == ["reasoning.encrypted_content"]
    off = body(Message.user("hi"), reasoning_effort="off")
    assert off["reasoning"] == {"effort": "none"}
    model_default = body(Message.user("hi"), reasoning=True)
    assert model_default["reasoning"] == {"summary": "auto"}
    assert "reasoning" not in body(Message.user("hi"))
    stored = body(Message.user("hi"), serializer=ResponsesSerializer(store=True), reasoning_effort="low")
    assert stored["store"] is True
    assert "include" not in stored
    quiet = ResponsesSerializer(reasoning_summary=None, encrypted_reasoning=False)
    assert body(Message.user("hi"), serializer=quiet, reasoning_effort="low")["reasoning"] == {"effort": "low"}
    assert "include" not in body(Message.user("hi"), serializer=quiet, reasoning_effort="low")


def test_effort_the_model_does_not_list_is_unsupported() -> None:
    failure = error(Message.user("hi"), info=PLAIN, reasoning_effort="high")
    assert failure.code == "UNSUPPORTED"
    assert "'high'" in str(failure)
    assert "gpt-4.1-mini" in str(failure)


def test_structured_output() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    fmt = JsonSchemaFormat("person", schema, strict=True, description="A person")
    assert body(Message.user("hi"), response_format=fmt)["text"] == {
        "format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True, "description": "A person"}
    }
    plain = body(Message.user("hi"), response_format=JsonSchemaFormat("p", schema))["text"]["format"]
    assert "description" not in plain
    assert plain["strict"] is False
    assert body(Message.user("hi"), response_format=JsonObjectFormat())["text"] == {"format": {"type": "json_object"}}


# --------------------------------------------------------------------------- files


def test_file_parts() -> None:
    pdf = b"%PDF-1.7 tiny"
    wav = b"RIFF0000WAVE"
    files = [
        FileBlock("image/png", data=PNG, filename="a.png"),
        FileBlock("image/jpeg", url="https://example.com/cat.jpg", detail="high"),
        FileBlock("application/pdf", data=pdf, filename="report.pdf"),
        FileBlock("application/pdf", data=pdf),
        FileBlock("application/pdf", url="https://example.com/r.pdf"),
        FileBlock("audio/wav", data=wav),
    ]
    parts = body(Message.user("look", *files))["input"][0]["content"]
    assert parts == [
        {"type": "input_text", "text": "look"},
        {
            "type": "input_image",
            "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
            "detail": "auto",
        },
        {"type": "input_image", "image_url": "https://example.com/cat.jpg", "detail": "high"},
        {
            "type": "input_file",
            "filename": "report.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(pdf).decode(),
        },
        {
            "type": "input_file",
            "filename": "document.pdf",
            "file_data": "data:application/pdf;base64," + base64.b64encode(pdf).decode(),
        },
        {"type": "input_file", "file_url": "https://example.com/r.pdf"},
        {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav).decode(), "format": "wav"}},
    ]


@pytest.mark.parametrize(
    ("block", "named"),
    [
        (FileBlock("text/csv", data=b"a,b"), "media type text/csv"),
        (FileBlock("audio/mpeg", url="https://example.com/a.mp3"), "a url source is not accepted for audio/mpeg"),
        (FileBlock("image/png", data=b"\0" * (MAX_FILE_BYTES + 1)), f"{MAX_FILE_BYTES + 1} bytes is over the limit"),
    ],
)
def test_files_the_wire_cannot_take_are_unsupported(block: FileBlock, named: str) -> None:
    failure = error(Message.user("look", block))
    assert failure.code == "UNSUPPORTED"
    assert named in str(failure)


@pytest.mark.parametrize(
    ("message", "named"),
    [
        (Message("system", [FileBlock("image/png", data=PNG)]), "a system message cannot hold a file"),
        (Message("assistant", [FileBlock("image/png", data=PNG)]), "an assistant message cannot hold a file"),
        (Message("assistant", [ToolResultBlock("call_1", "x")]), "an assistant message cannot hold a tool result"),
        (Message("user", [ToolCallBlock("call_1", "f", "{}")]), "a user message cannot hold a tool call"),
        (Message("tool", [ToolResultBlock("call_1", "x"), TextBlock("stray")]), "a tool message holds text"),
    ],
)
def test_messages_the_wire_cannot_express_are_bad_requests(message: Message, named: str) -> None:
    failure = error(message)
    assert failure.code == "BAD_REQUEST"
    assert named in str(failure)


# --------------------------------------------------------------------------- conversation items


def test_conversation_items_in_order() -> None:
    history = [
        Message("system", [TextBlock("Be exact.")]),
        Message.user("weather?"),
        Message(
            "assistant",
            [
                TextBlock("Checking."),
                TextBlock(""),
                TextBlock(" Now."),
                ToolCallBlock("call_1", "weather", '{"city": "Zürich"}'),
                TextBlock("Done?"),
            ],
        ),
        Message("tool", [ToolResultBlock("call_1", "21 °C")]),
        Message("user", [ToolResultBlock("call_2", "late"), TextBlock("thanks"), ReasoningBlock("stray")]),
    ]
    assert body(*history)["input"] == [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}, {"type": "output_text", "text": " Now."}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Zürich"}'},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Done?"}]},
        {"type": "function_call_output", "call_id": "call_1", "output": "21 °C"},
        {"type": "function_call_output", "call_id": "call_2", "output": "late"},
        {"role": "user", "content": "thanks"},
    ]


def test_reasoning_is_replayed_exactly_from_replay_state() -> None:
    text = "**Plan**\n\nstep one\n\nstep two"
    entry = {"id": "rs_1", "encrypted_content": ENCRYPTED, "summary": [len("**Plan**\n\nstep one"), len("step two")]}
    turn = Message(
        "assistant",
        [ReasoningBlock(text, signed=True), ToolCallBlock("call_1", "f", "{}")],
        replay_state=state({"0": entry}),
    )
    items = body(Message.user("go"), turn)["input"][1:]
    assert items == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "**Plan**\n\nstep one"},
                {"type": "summary_text", "text": "step two"},
            ],
            "encrypted_content": ENCRYPTED,
        },
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
    ]


@pytest.mark.parametrize(
    ("entry", "text", "expected"),
    [
        (
            {"id": "rs_1", "encrypted_content": ENCRYPTED, "summary": [99]},
            "altered",
            {"summary": [{"type": "summary_text", "text": "altered"}]},
        ),
        ({"id": "rs_1", "encrypted_content": ENCRYPTED}, "", {"summary": []}),
        (
            {"id": "rs_1", "encrypted_content": ENCRYPTED, "text": True},
            "raw",
            {"summary": [], "content": [{"type": "reasoning_text", "text": "raw"}]},
        ),
        ({"id": "rs_1", "encrypted_content": ENCRYPTED, "text": True}, "", {"summary": [], "content": []}),
    ],
)
def test_reasoning_item_shapes(entry: dict[str, Any], text: str, expected: dict[str, Any]) -> None:
    turn = Message("assistant", [ReasoningBlock(text, signed=True)], replay_state=state({"0": entry}))
    assert body(turn)["input"] == [{"type": "reasoning", "id": "rs_1", **expected, "encrypted_content": ENCRYPTED}]


def test_reasoning_by_id_only_when_stored() -> None:
    turn = Message("assistant", [ReasoningBlock("", signed=True)], replay_state=state({"0": {"id": "rs_1"}}))
    assert body(turn)["input"] == []  # without encrypted content the server would answer 404
    stored = body(turn, serializer=ResponsesSerializer(store=True))["input"]
    assert stored == [{"type": "reasoning", "id": "rs_1", "summary": []}]


@pytest.mark.parametrize(
    "replay",
    [
        None,
        "opaque",
        state({"0": {"id": "rs_1", "encrypted_content": ENCRYPTED}}, model="gpt-5"),
        state({"0": {"id": "rs_1", "encrypted_content": ENCRYPTED}}, provider="openai:other"),
        state({"0": {"id": "rs_1", "encrypted_content": ENCRYPTED}}, v=2),
        state({"0": {"id": "rs_1", "encrypted_content": ENCRYPTED}}, api="chat"),
        state({"1": {"id": "rs_1", "encrypted_content": ENCRYPTED}}),
        state({"0": "rs_1"}),
        state({"0": {"encrypted_content": ENCRYPTED}}),
        state(["not", "a", "mapping"]),  # type: ignore[arg-type]
    ],
)
def test_foreign_or_unusable_reasoning_is_dropped(replay: object) -> None:
    turn = Message("assistant", [ReasoningBlock("thought"), TextBlock("answer")], replay_state=replay)
    assert body(turn)["input"] == [{"role": "assistant", "content": [{"type": "output_text", "text": "answer"}]}]


def test_replay_entries_reads_only_its_own_state() -> None:
    mine = Message("assistant", [], replay_state=state({"0": {"id": "rs_1"}}))
    assert replay_entries(mine, "openai", MODEL) == {"0": {"id": "rs_1"}}
    assert replay_entries(mine, "openai", "o3") == {}
    assert replay_entries(mine, "openai:work", MODEL) == {}


def _result_turn(*files: FileBlock, text: str = "") -> list[Message]:
    call = Message(role="assistant", content=[ToolCallBlock("c9", "draw", "{}")])
    return [call, Message(role="tool", content=[ToolResultBlock("c9", text, files=files)])]


def test_a_tool_result_with_files_sends_an_output_list() -> None:
    png, pdf = FileBlock("image/png", data=PNG), FileBlock("application/pdf", data=b"%PDF", filename="a.pdf")
    items = body(*_result_turn(png, pdf, text="two"), info=PLAIN)["input"]
    assert items[-1] == {
        "type": "function_call_output",
        "call_id": "c9",
        "output": [
            {"type": "input_text", "text": "two"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
                "detail": "auto",
            },
            {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERg=="},
        ],
    }
    only = body(*_result_turn(png), info=PLAIN)["input"][-1]["output"]
    assert [part["type"] for part in only] == ["input_image"]


def test_audio_in_a_tool_result_is_unsupported() -> None:
    failure = error(*_result_turn(FileBlock("audio/wav", data=b"RIFF")), info=PLAIN)
    assert failure.code == "UNSUPPORTED"
    assert "audio/wav" in str(failure)
    assert "function_call_output takes no audio" in str(failure)


def test_a_strict_tool_is_sent_strict() -> None:
    sent = body(Message.user("hi"), tools=[ToolSpec("exact", strict=True)])
    assert sent["tools"] == [
        {"type": "function", "name": "exact", "parameters": {"type": "object", "properties": {}}, "strict": True}
    ]
