"""The dialect translators without a server: request fields at fault, stream encodings, responses."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from harness_core.errors import Failure
from harness_core.types import (
    BlockEnd,
    BlockStart,
    CacheMark,
    FileBlock,
    Finish,
    FinishReason,
    JsonObjectFormat,
    JsonSchemaFormat,
    Message,
    NamedToolChoice,
    ReasoningBlock,
    ReasoningDelta,
    ReasoningSignature,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
)
from harness_gateway.anthropic_messages import MessagesStreamEncoder, messages_response, parse_messages_request
from harness_gateway.errors import DRAINED, GatewayError, finish_error, from_failure, public_abort
from harness_gateway.openai_chat import ChatStreamEncoder, chat_response, parse_chat_request
from harness_gateway.openai_responses import parse_responses_request
from harness_gateway.request import Target, decode_json
from harness_gateway.spend import estimated_usage

USER = [{"role": "user", "content": "hi"}]


def user_part(part: dict[str, Any]) -> dict[str, Any]:
    return chat(messages=[{"role": "user", "content": [part]}])


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "mock/echo", "messages": USER, **fields}


def anth(**fields: Any) -> dict[str, Any]:
    return {"model": "mock/echo", "max_tokens": 5, "messages": USER, **fields}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ([], None),
        ({"messages": USER}, "model"),
        (chat(n=2), "n"),
        (chat(messages=[{"role": "robot", "content": "x"}]), "messages[0].role"),
        (user_part({"type": "image_url", "image_url": {}}), "messages[0].content[0].image_url.url"),
        (user_part({"type": "image_url", "image_url": {"url": "https://h/x"}}), "messages[0].content[0].image_url.url"),
        (
            user_part({"type": "image_url", "image_url": {"url": "data:image/png,abc"}}),
            "messages[0].content[0].image_url.url",
        ),
        (
            user_part({"type": "input_audio", "input_audio": {"data": "***", "format": "wav"}}),
            "messages[0].content[0].input_audio.data",
        ),
        (user_part({"type": "file", "file": {"file_id": "f1"}}), "messages[0].content[0].file.file_id"),
        (user_part({"type": "file", "file": {"file_data": "JVBERi0="}}), "messages[0].content[0].file.file_data"),
        (user_part({"type": "refusal"}), "messages[0].content[0].type"),
        (chat(messages=[{"role": "system", "content": [{"type": "image_url"}]}]), "messages[0].content[0].type"),
        (
            user_part({"type": "image_url", "image_url": {"url": "data:Image/PNG;base64,AAAA"}}),
            "messages[0].content[0].image_url.url",
        ),
        (chat(messages=[{"role": "assistant", "tool_calls": [{"id": "a"}]}]), "messages[0].tool_calls[0].function"),
        (chat(tools=[{"type": "retrieval"}]), "tools[0].type"),
        (chat(tool_choice="sometimes"), "tool_choice"),
        (chat(stop=["a", 3]), "stop[1]"),
        (chat(temperature="hot"), "temperature"),
        (chat(stream="yes"), "stream"),
        (chat(max_tokens=0), "max_tokens"),
        (chat(max_tokens=7, max_completion_tokens=2), "max_tokens"),  # one of them would be dropped
        (chat(stream_options={"include_usage": True, "foo": 1}), "stream_options.foo"),
        (chat(stream_options={"include_obfuscation": "no"}), "stream_options.include_obfuscation"),
        (chat(tool_choice="required"), "tool_choice"),  # no tools sent: no call can be made
        (chat(response_format={"type": "xml"}), "response_format.type"),
        (
            chat(response_format={"type": "json_schema", "json_schema": {"name": "bad name!"}}),
            "response_format.json_schema.name",
        ),
    ],
)
def test_chat_request_errors_name_the_field(body: Any, param: str | None) -> None:
    """A 400 naming the field; the same values given the field's way are read (below)."""
    with pytest.raises(GatewayError) as caught:
        parse_chat_request(body)
    assert caught.value.status == 400
    assert caught.value.param == param
    if param:
        assert caught.value.message.startswith(param)


def test_chat_request_maps_every_field() -> None:
    parsed = parse_chat_request(
        chat(
            messages=[
                {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "input_text", "text": "b"}]},
                {
                    "role": "assistant",
                    "content": "ok",
                    "reasoning_content": "think",
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "done"},
            ],
            tools=[{"type": "function", "function": {"name": "f", "description": "d"}}],
            tool_choice={"type": "function", "function": {"name": "f"}},
            max_completion_tokens=7,
            temperature=1,
            top_p=0.5,
            seed=3,
            stop="END",
            reasoning_effort="low",
            response_format={"type": "json_object"},
            stream=True,
            stream_options={"include_usage": True},
        ),
    )
    options = parsed.options
    assert options.system == "rules"
    assert [m.role for m in options.messages] == ["user", "assistant", "tool"]
    assert options.messages[0].text == "ab"
    assert options.messages[1].content == [
        ReasoningBlock("think"),
        TextBlock("ok"),
        ToolCallBlock("c1", "f", '{"x":1}'),
    ]
    assert options.tools[0].parameters == {"type": "object", "properties": {}}
    assert options.tool_choice == NamedToolChoice("f")
    assert (options.max_tokens, options.temperature, options.top_p, options.seed) == (7, 1, 0.5, 3)
    assert options.stop == ["END"]
    assert options.response_format == JsonObjectFormat()
    assert parsed.stream
    assert parsed.include_usage
    assert parse_chat_request(chat(tool_choice="none", response_format={"type": "text"})).options.tool_choice == "none"
    schema = {"type": "json_schema", "json_schema": {"name": "person", "schema": {"type": "object"}, "strict": True}}
    assert parse_chat_request(chat(response_format=schema)).options.response_format == JsonSchemaFormat(
        name="person", schema={"type": "object"}, strict=True
    )


def test_media_parts_become_file_blocks() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    parts = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
        {"type": "image_url", "image_url": {"url": "https://example.org/cat.jpg?sig=1"}},
        {"type": "input_audio", "input_audio": {"data": png, "format": "mp3"}},
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{png}", "filename": "a.pdf"}},
    ]
    content = parse_chat_request(chat(messages=[{"role": "user", "content": parts}])).options.messages[0].content
    assert content == [
        TextBlock("look"),
        FileBlock("image/png", data=b"\x89PNG\r\n\x1a\n"),
        FileBlock("image/jpeg", url="https://example.org/cat.jpg?sig=1"),
        FileBlock("audio/mpeg", data=b"\x89PNG\r\n\x1a\n"),
        FileBlock("application/pdf", data=b"\x89PNG\r\n\x1a\n", filename="a.pdf"),
    ]
    blocks = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
        {"type": "document", "source": {"type": "url", "url": "https://example.org/a.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}},
        {"type": "text", "text": "what are these?"},
    ]
    anth_content = (
        parse_messages_request(anth(messages=[{"role": "user", "content": blocks}])).options.messages[0].content
    )
    assert anth_content == [
        FileBlock("image/png", data=b"\x89PNG\r\n\x1a\n"),
        FileBlock("application/pdf", url="https://example.org/a.pdf"),
        FileBlock("text/plain", data=b"notes"),
        TextBlock("what are these?"),
    ]


def test_media_in_tool_results_become_the_results_files() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    marked = {**image, "cache_control": {"type": "ephemeral", "ttl": "1h"}}

    def results(*blocks: dict[str, Any]) -> list[Any]:
        turn = [{"role": "user", "content": list(blocks)}]
        content: list[Any] = parse_messages_request(anth(messages=turn)).options.messages[0].content
        return content

    shot = FileBlock("image/png", data=b"\x89PNG\r\n\x1a\n")
    text = {"type": "text", "text": "after", "cache_control": {"type": "ephemeral"}}
    given = {"type": "tool_result", "tool_use_id": "t", "content": [image, {"type": "text", "text": "shot"}, text]}
    assert results(given) == [ToolResultBlock("t", "shot\nafter", files=(shot,), cache=CacheMark())]
    # a mark inside the content marks the result (the last one), unless the result has its own
    assert results({**given, "content": [text, marked]})[0].cache == CacheMark(3600)
    assert results({**given, "content": [marked], "cache_control": {"type": "ephemeral"}})[0].cache == CacheMark()
    assert results({**given, "content": [image]}) == [ToolResultBlock("t", "", files=(shot,))]
    assert results({"type": "tool_result", "tool_use_id": "t", "content": "plain", "is_error": True}) == [
        ToolResultBlock("t", "plain", is_error=True)
    ]
    assert results({"type": "tool_result", "tool_use_id": "t"}) == [ToolResultBlock("t", "")]
    # the media adds nothing to the input estimate: only the text is counted
    big = base64.b64encode(b"x" * 40_000).decode()
    huge = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": big}}
    turn = [{"role": "user", "content": [{**given, "content": [{"type": "text", "text": "abcd"}, huge]}]}]
    assert estimated_usage(parse_messages_request(anth(messages=turn)).options, 0).input_tokens == 1

    def outputs(*parts: dict[str, Any]) -> list[Any]:
        item = {"type": "function_call_output", "call_id": "c1", "output": list(parts)}
        content: list[Any] = parse_responses_request({"model": "m", "input": [item]}).options.messages[0].content
        return content

    url = f"data:image/png;base64,{png}"
    pdf = {"type": "input_file", "file_url": "https://example.org/a.pdf"}
    assert outputs(
        {"type": "input_image", "image_url": url, "detail": "low"},
        {"type": "input_text", "text": "a"},
        {"type": "output_text", "text": "b"},
        {"type": "refusal", "refusal": "c"},
        pdf,
    ) == [
        ToolResultBlock(
            "c1",
            "a\nb\nc",
            files=(
                FileBlock("image/png", data=b"\x89PNG\r\n\x1a\n", detail="low"),
                FileBlock("application/pdf", url="https://example.org/a.pdf"),
            ),
        )
    ]
    item = {"type": "function_call_output", "call_id": "c1", "output": "done"}
    assert parse_responses_request({"model": "m", "input": [item]}).options.messages[0].content == [
        ToolResultBlock("c1", "done")
    ]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (anth(max_tokens=None), "max_tokens"),
        (anth(messages=[{"role": "system", "content": "x"}]), "messages[0].role"),
        (
            anth(messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "file"}}]}]),
            "messages[0].content[0].source.type",
        ),
        (anth(messages=[{"role": "user", "content": [{"type": "video"}]}]), "messages[0].content[0].type"),
        (anth(system=[{"type": "image"}]), "system[0].type"),
        (anth(stop_sequences=[1]), "stop_sequences[0]"),
        (anth(tool_choice={"type": "sometimes"}), "tool_choice.type"),
        (anth(thinking={"type": "maybe"}), "thinking.type"),
        (anth(thinking={"type": "enabled"}), "thinking.budget_tokens"),
        (
            anth(
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "t", "content": "r"},
                            {"type": "text", "text": "and"},
                        ],
                    }
                ]
            ),
            "messages[0].content",
        ),
        (
            anth(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "video"}]}],
                    }
                ]
            ),
            "messages[0].content[0].content[0].type",
        ),
        (
            anth(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image"}]}],
                    }
                ]
            ),
            "messages[0].content[0].content[0].source",
        ),
        (anth(temperature=-1), "temperature"),
    ],
)
def test_messages_request_errors_name_the_field(body: Any, param: str | None) -> None:
    with pytest.raises(GatewayError) as caught:
        parse_messages_request(body)
    assert caught.value.param == param


def test_messages_request_maps_thinking_signatures_and_tools() -> None:
    parsed = parse_messages_request(
        anth(
            system=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            messages=[
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
                        {"type": "redacted_thinking", "data": "opaque"},
                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "r"}],
                            "is_error": True,
                        }
                    ],
                },
            ],
            tools=[{"name": "f", "input_schema": {"type": "object", "properties": {}}}],
            tool_choice={"type": "any"},
            stop_sequences=["S"],
            top_p=0.2,
            thinking={"type": "enabled", "budget_tokens": 10000},
        ),
        "anthropic:work",
        "claude-x",
        target=Target("work", "anthropic-messages", "anthropic"),
    )
    options = parsed.options
    assert options.system == "a\n\nb"
    assistant = options.messages[1]
    assert (assistant.source, assistant.replay_state) == (None, None)  # no adapter-private state is written
    assert assistant.content[:2] == [
        ReasoningBlock("hmm", signed=True, signature=ReasoningSignature("anthropic", "claude-x", "sig-1")),
        ReasoningBlock("", signed=True, signature=ReasoningSignature("anthropic", "claude-x", "opaque", redacted=True)),
    ]
    assert assistant.content[2] == ToolCallBlock("t1", "f", '{"x":1}')
    assert options.messages[2].role == "tool"
    assert options.messages[2].content[0].is_error  # type: ignore[union-attr]
    assert (options.tool_choice, options.stop, options.reasoning_effort) == ("required", ["S"], "medium")
    effort = {
        b: parse_messages_request(anth(thinking={"type": "enabled", "budget_tokens": b})).options.reasoning_effort
        for b in (1024, 50000)
    }
    assert effort == {1024: "low", 50000: "high"}
    assert parse_messages_request(anth(thinking={"type": "disabled"})).options.reasoning_effort == "off"
    assert parse_messages_request(
        anth(tool_choice={"type": "tool", "name": "f"}, tools=[{"name": "f", "input_schema": {"type": "object"}}])
    ).options.tool_choice == NamedToolChoice("f")
    with pytest.raises(GatewayError, match=r"tool_choice: forces the tool 'f', which is not among the tools sent"):
        parse_messages_request(anth(tool_choice={"type": "tool", "name": "f"}))  # no such tool sent


def test_messages_request_binds_signatures_to_the_owner_without_a_target_and_keeps_none_without_either() -> None:
    signed = {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig-1"}]}
    (message,) = parse_messages_request(anth(messages=[signed]), "anthropic:work", "claude-x").options.messages
    assert message.content == [
        ReasoningBlock("hmm", signed=True, signature=ReasoningSignature("anthropic", "claude-x", "sig-1"))
    ]
    (message,) = parse_messages_request(anth(messages=[signed])).options.messages
    assert message.content == [ReasoningBlock("hmm", signed=True)]  # no route could take it
    unsigned = {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}]}
    (message,) = parse_messages_request(anth(messages=[unsigned]), "anthropic:work", "claude-x").options.messages
    assert message.content == [ReasoningBlock("hmm")]


def events(raw: bytes) -> list[tuple[str | None, Any]]:
    out = []
    for block in raw.decode().split("\n\n"):
        if not block:
            continue
        name = None
        data = None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        out.append((name, json.loads(data) if data and data != "[DONE]" else data))
    return out


STREAM: list[StreamChunk] = [
    BlockStart(index=0, block_type="reasoning", signed=True),
    ReasoningDelta(index=0, text="th"),
    BlockEnd(index=0, block=ReasoningBlock("th", signed=True, signature=ReasoningSignature("anthropic", "m", "S"))),
    BlockStart(index=1, block_type="text"),
    TextDelta(index=1, text="hi"),
    BlockEnd(index=1, block=TextBlock("hi")),
    BlockStart(index=2, block_type="tool-call", id="t", name="f"),
    ToolCallDelta(index=2, id="t", arguments_delta="{}"),
    BlockEnd(index=2, block=ToolCallBlock("t", "f", "{}")),
    Usage(usage=TokenUsage(10, 5, cache_read_tokens=4, reasoning_tokens=1)),
    Finish(reason=FinishReason(kind="tool-calls", raw="tool_use"), replay_state={"opaque": "not read here"}),
]


def test_anthropic_stream_events() -> None:
    encoder = MessagesStreamEncoder("msg_1", "route/m")
    raw = encoder.start() + b"".join(encoder.feed(chunk) for chunk in STREAM)
    seen = events(raw)
    names = [name for name, _ in seen]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-2:] == ["message_delta", "message_stop"]
    deltas = [data["delta"] for name, data in seen if name == "content_block_delta"]
    assert deltas == [
        {"type": "thinking_delta", "thinking": "th"},
        {"type": "signature_delta", "signature": "S"},  # just before its block's stop, as Anthropic sends it
        {"type": "text_delta", "text": "hi"},
        {"type": "input_json_delta", "partial_json": "{}"},
    ]
    assert names[2:6] == ["content_block_start", "content_block_delta", "content_block_delta", "content_block_stop"]
    final = seen[-2][1]
    assert final["delta"]["stop_reason"] == "tool_use"
    assert final["usage"] == {
        "input_tokens": 6,
        "output_tokens": 5,
        "cache_read_input_tokens": 4,
        "cache_creation_input_tokens": 0,
    }
    failure = Failure(code="OVERLOADED", message="busy")
    assert (
        events(encoder.feed(Finish(reason=FinishReason(kind="error", failure=failure))))[0][1]["error"]["type"]
        == "overloaded_error"
    )


def test_anthropic_stream_of_redacted_signature_only_and_unsigned_thinking() -> None:
    redacted = ReasoningSignature("anthropic", "m", "DATA", redacted=True)
    chunks: list[StreamChunk] = [
        BlockStart(index=0, block_type="reasoning", signed=True),
        BlockEnd(index=0, block=ReasoningBlock("", signed=True, signature=redacted)),
        BlockStart(index=1, block_type="reasoning", signed=True),
        BlockEnd(index=1, block=ReasoningBlock("", signed=True, signature=ReasoningSignature("anthropic", "m", "S"))),
        BlockStart(index=2, block_type="reasoning", signed=True),
        BlockEnd(index=2, block=ReasoningBlock("", signed=True)),
        BlockStart(index=3, block_type="reasoning"),
        ReasoningDelta(index=3, text="plain"),
        BlockEnd(index=3, block=ReasoningBlock("plain")),
        Finish(reason=FinishReason(kind="stop")),
    ]
    encoder = MessagesStreamEncoder("msg_1", "route/m")
    seen = [data for _, data in events(b"".join(encoder.feed(chunk) for chunk in chunks))]
    assert seen[:10] == [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "DATA"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "signature_delta", "signature": "S"}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_delta", "index": 3, "delta": {"type": "thinking_delta", "thinking": "plain"}},
        {"type": "content_block_stop", "index": 3},
    ]
    message = Message(
        role="assistant",
        content=[ReasoningBlock("", signed=True, signature=redacted), ReasoningBlock("plain")],
    )
    body = messages_response("msg_1", "m", message, None, Finish(reason=FinishReason(kind="stop")))
    assert body["content"] == [
        {"type": "redacted_thinking", "data": "DATA"},
        {"type": "thinking", "thinking": "plain", "signature": ""},
    ]


def test_openai_stream_chunks() -> None:
    encoder = ChatStreamEncoder("chatcmpl-1", "route/m", include_usage=True)
    seen = events(encoder.start() + b"".join(encoder.feed(chunk) for chunk in STREAM))
    deltas = [data["choices"][0]["delta"] for _, data in seen if isinstance(data, dict) and data["choices"]]
    assert deltas[1:4] == [
        {"reasoning_content": "th"},
        {"content": "hi"},
        {"tool_calls": [{"index": 0, "id": "t", "type": "function", "function": {"name": "f", "arguments": ""}}]},
    ]
    assert seen[-3][1]["choices"][0]["finish_reason"] == "tool_calls"
    assert seen[-2][1]["usage"]["prompt_tokens_details"] == {"cached_tokens": 4}
    assert seen[-1][1] == "[DONE]"


def test_non_streaming_responses() -> None:
    signature = ReasoningSignature("anthropic", "m", "S")
    message = Message(
        role="assistant",
        content=[ReasoningBlock("th", signed=True, signature=signature), TextBlock("hi"), ToolCallBlock("t", "f", "")],
    )
    finish = STREAM[-1]
    assert isinstance(finish, Finish)
    body = messages_response("msg_1", "m", message, None, finish)
    assert body["content"][0] == {"type": "thinking", "thinking": "th", "signature": "S"}
    assert body["content"][2]["input"] == {}
    assert body["usage"] == {"input_tokens": 0, "output_tokens": 0}
    stop = Finish(reason=FinishReason(kind="stop", raw="stop_sequence"))
    assert (
        messages_response("m", "m", Message(role="assistant", content=[]), None, stop)["stop_reason"] == "stop_sequence"
    )
    bad = Message(role="assistant", content=[ToolCallBlock("t", "f", "[1]")])
    with pytest.raises(GatewayError) as caught:
        messages_response("m", "m", bad, None, finish)
    assert caught.value.status == 502
    reply = chat_response("c", "m", message, None, FinishReason(kind="length"))
    assert reply["choices"][0]["message"]["reasoning_content"] == "th"
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"] is None


def test_errors_and_json() -> None:
    with pytest.raises(GatewayError) as caught:
        decode_json(b"{nope")
    assert "not valid JSON" in caught.value.message
    for lone in (rb'{"a": "\ud800"}', rb'{"a": "x\uD83Dy"}'):  # msgspec itself says "truncated"
        with pytest.raises(GatewayError) as caught:
            decode_json(lone)
        assert "is a lone UTF-16 surrogate escape, not a character" in caught.value.message
        assert "truncated" not in caught.value.message
    assert decode_json(rb'{"a": "\ud83d\ude00"}') == {"a": "\U0001f600"}  # a whole pair is one character
    auth = from_failure(Failure(code="AUTH", message="bad key", retry_after=2.5))
    assert auth.status == 502
    assert "gateway's credentials" in auth.message
    assert auth.headers() == {"retry-after": "3"}
    assert GatewayError(418, "tea").openai_body()["error"]["type"] == "server_error"


def test_an_aborted_finish_ends_every_encoder_with_its_error_never_a_normal_end() -> None:
    """``finish{aborted}`` (the relay's public failure: :func:`public_abort`) is the dialect's
    in-stream error: OpenAI's error chunk as the last event (no finish_reason, no ``[DONE]``),
    Anthropic's ``event: error`` (no ``end_turn`` / ``message_stop``); Responses in
    test_gw_responses.py."""
    drained = Finish(FinishReason(kind="aborted", failure=public_abort("shutting", "up", "r1", drained=True)))
    chat = ChatStreamEncoder("chatcmpl-1", "route/m", include_usage=True)
    chat.feed(TextDelta(0, "par"))
    end = chat.feed(drained).decode()
    assert end == f'data: {{"error":{{"message":"{DRAINED}","type":"server_error","param":null,"code":"ABORTED"}}}}\n\n'
    assert chat.failure is not None
    assert chat.failure.status == 503
    operator = public_abort("aborted by an operator", "up", "r1", drained=False)
    console = Finish(FinishReason(kind="aborted", failure=operator))
    messages = MessagesStreamEncoder("msg_1", "route/m")
    end = messages.feed(console).decode()
    assert end == (
        'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"aborted by an operator"}}\n\n'
    )
    assert messages.failure is not None
    assert messages.failure.status == 499


def test_finish_error_is_the_one_rule_of_a_failed_or_aborted_end() -> None:
    assert finish_error(FinishReason(kind="stop")) is None
    assert finish_error(FinishReason(kind="error")) is None  # no failure to show: ends as it is
    bare = finish_error(FinishReason(kind="aborted"))  # an adapter's abort without a failure
    assert bare is not None
    assert (bare.status, bare.code, bare.message) == (499, "ABORTED", "the generation was aborted")
    failed = finish_error(FinishReason(kind="error", failure=Failure(code="OVERLOADED", message="busy")))
    assert failed is not None
    assert (failed.status, failed.code) == (503, "OVERLOADED")
    drained = from_failure(public_abort("the gateway is shutting down", "up", "r1", drained=True))
    assert (drained.status, drained.code, drained.message, drained.headers()) == (503, "ABORTED", DRAINED, {})
    upstream = public_abort(None, "up", "r1", drained=False)
    assert upstream.message == "route 'up' aborted the generation; details are in the gateway's log (request r1)"
    assert from_failure(upstream).status == 499


def test_equal_token_limits_stream_options_and_a_required_tool_call_are_read() -> None:
    parsed = parse_chat_request(
        chat(
            max_tokens=4, max_completion_tokens=4, stream=True,
            stream_options={"include_usage": True, "include_obfuscation": False},
            tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            tool_choice="required",
        )
    )  # fmt: skip
    assert (parsed.options.max_tokens, parsed.include_usage, parsed.options.tool_choice) == (4, True, "required")
    with pytest.raises(GatewayError) as caught:  # Messages' "any" is the same choice
        parse_messages_request(anth(tool_choice={"type": "any"}))
    assert (caught.value.param, caught.value.message) == (
        "tool_choice",
        "tool_choice: requires a tool call, but no tools were sent",
    )


def test_a_refused_field_is_named_in_each_dialect_s_own_terms() -> None:
    """A route's refusal naming a vocabulary field: the dialect's spelling in ``param`` and the
    message; Messages (whose errors carry no ``param``) names the ``thinking`` the effort came
    from (it quoted ``reasoning_effort``, a field a Messages client never sent) and its
    ``output_config.format`` for ``response_format``."""
    from harness_gateway.anthropic_messages import ANTHROPIC_MESSAGES
    from harness_gateway.openai_chat import OPENAI_CHAT

    def refused() -> GatewayError:
        return GatewayError(
            400, "reasoning_effort 'max' is not one of ['low']", code="UNSUPPORTED", field="reasoning_effort"
        )

    chat = json.loads(bytes(OPENAI_CHAT.error_response(refused()).body))
    assert (chat["error"]["param"], chat["error"]["message"]) == (
        "reasoning_effort",
        "reasoning_effort 'max' is not one of ['low']",
    )
    messages = json.loads(bytes(ANTHROPIC_MESSAGES.error_response(refused()).body))
    assert messages["error"]["message"] == (
        "thinking is not one of ['low']; the gateway passes thinking on as a reasoning effort: budget_tokens up"
        " to 4096 is 'low', up to 16384 'medium', more 'high', and type disabled is 'off'"
    )  # ('max': no thinking the client can send becomes it)
    assert "param" not in messages["error"]
    unquoted = GatewayError(400, "reasoning_effort is not supported", code="UNSUPPORTED", field="reasoning_effort")
    message = json.loads(bytes(ANTHROPIC_MESSAGES.error_response(unquoted).body))["error"]["message"]
    assert message.startswith("thinking is not supported; the gateway passes thinking on")
    schema = GatewayError(
        400, "response_format with a JSON schema is not supported", code="UNSUPPORTED", field="response_format"
    )
    message = json.loads(bytes(ANTHROPIC_MESSAGES.error_response(schema).body))["error"]["message"]
    assert message == "output_config.format with a JSON schema is not supported"
    # a field the dialect has no spelling of (the client's own name): no param, the message as it is
    unspelled = GatewayError(400, "max_tokens must be at most 8192", code="BAD_REQUEST", field="max_tokens")
    chat = json.loads(bytes(OPENAI_CHAT.error_response(unspelled).body))
    assert (chat["error"]["param"], chat["error"]["message"]) == (None, "max_tokens must be at most 8192")
