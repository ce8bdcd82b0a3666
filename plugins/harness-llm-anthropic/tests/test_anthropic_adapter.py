"""The adapter end to end against a scripted HTTP server on 127.0.0.1 (docs/testing.md)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import msgspec
import pytest
from anthropic_wire_fixtures import (
    API_KEY,
    INBAND_ERROR_BODY,
    MODEL,
    REDACTED,
    REDACTED_BODY,
    SIGNATURE,
    SUCCESS_BODIES,
    TEXT_BODY,
    THINKING_TOOL_BODY,
    UNICODE_TEXT,
    block_start,
    make_config,
    message_start,
    sse,
    text_body,
    text_delta,
    translate,
)

from harness_core.abort import AbortSignal
from harness_core.assembler import BlockAssembler
from harness_core.errors import LlmError
from harness_core.secret import Secret
from harness_core.testing.check import CheckedStream, check_stream
from harness_core.testing.server import Reply, ScriptedServer
from harness_core.testing.splits import split_at
from harness_core.types import (
    BlockEnd,
    Finish,
    GenerateOptions,
    Message,
    ModelInfo,
    ReasoningBlock,
    ReasoningSignature,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
)
from harness_llm_anthropic.adapter import AnthropicAdapter
from harness_llm_anthropic.config import ModelConfig, Timeout

pytestmark = pytest.mark.anyio

OPTIONS = GenerateOptions(route="anthropic", model=MODEL, messages=[Message.user("hi")], max_tokens=64)


def reads_of(body: bytes) -> list[bytes | float]:
    """One read per SSE event."""
    return [part + b"\n\n" for part in body.split(b"\n\n") if part]


async def collect(adapter: AnthropicAdapter, options: GenerateOptions = OPTIONS) -> list[StreamChunk]:
    """Run a stream to its end, checking docs/stream-obligations.md on the way (``CheckedStream``)."""
    checked = CheckedStream(adapter.stream(options))
    async for _ in checked:
        pass
    return checked.chunks


async def failure(adapter: AnthropicAdapter, options: GenerateOptions = OPTIONS) -> tuple[LlmError, list[StreamChunk]]:
    """Run a stream that must raise ``LlmError``; the raise is checked to be legal (no finish before it)."""
    checked = CheckedStream(adapter.stream(options))

    async def consume() -> None:
        async for _ in checked:
            pass

    with pytest.raises(LlmError) as info:
        await consume()
    return info.value, checked.chunks


def finish_of(chunks: list[StreamChunk]) -> Finish:
    last = chunks[-1]
    assert isinstance(last, Finish)
    return last


# ---------------------------------------------------------------------------- happy paths


async def test_text_stream_and_request(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=reads_of(TEXT_BODY), headers={"request-id": "req_1"}))
    chunks = await collect(adapter)
    assert chunks == translate([TEXT_BODY])[0]
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "".join(UNICODE_TEXT)
    request = server.requests[0]
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == API_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    assert request.json() == {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": True,
    }


@pytest.mark.parametrize("name", sorted(SUCCESS_BODIES))
async def test_success_fixtures_over_http(server: ScriptedServer, adapter: AnthropicAdapter, name: str) -> None:
    body = SUCCESS_BODIES[name]
    expected = translate([body])[0]
    # one read per event, 1-byte reads, and cuts inside multi-byte characters
    middle = body.index("\u20ac".encode()) + 1 if "\u20ac".encode() in body else len(body) // 2
    deliveries: list[list[bytes | float]] = [
        reads_of(body),
        [body[i : i + 1] for i in range(len(body))],
        list(split_at(body, [middle, middle + 1])),
    ]
    for reads in deliveries:
        server.add(Reply(reads=reads))
        assert await collect(adapter) == expected


async def test_extra_headers_version_and_no_key(server: ScriptedServer) -> None:
    server.add(Reply(reads=[TEXT_BODY]))
    adapter = AnthropicAdapter(
        make_config(server, api_key=None, anthropic_version="2024-01-01", headers={"anthropic-beta": "x-1"})
    )
    try:
        await collect(adapter)
    finally:
        await adapter.aclose()
    headers = server.requests[0].headers
    assert "x-api-key" not in headers
    assert headers["anthropic-version"] == "2024-01-01"
    assert headers["anthropic-beta"] == "x-1"


async def test_connection_is_reused_after_message_stop(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=[TEXT_BODY]), Reply(reads=[TEXT_BODY]))
    await collect(adapter)
    await collect(adapter)
    assert server.connections_opened == 1


async def test_events_after_message_stop_are_drained_not_yielded(
    server: ScriptedServer, adapter: AnthropicAdapter
) -> None:
    server.add(Reply(reads=[TEXT_BODY, sse([text_delta(0, "late")])]))
    chunks = await collect(adapter)
    assert isinstance(chunks[-1], Finish)
    assert all(not (isinstance(c, TextDelta) and c.text == "late") for c in chunks)


@pytest.mark.parametrize("end", ["abrupt", "reset"])
async def test_fault_after_message_stop_is_ignored(server: ScriptedServer, adapter: AnthropicAdapter, end: str) -> None:
    server.add(Reply(reads=[TEXT_BODY], end=end))  # type: ignore[arg-type]
    assert await collect(adapter) == translate([TEXT_BODY])[0]


async def test_final_event_without_blank_line_is_accepted(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=[TEXT_BODY.rstrip(b"\n")]))
    assert finish_of(await collect(adapter)).reason.kind == "stop"


async def test_final_event_cut_mid_json_is_network(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=[TEXT_BODY[: TEXT_BODY.rindex(b"message_stop") + 5]]))
    error, chunks = await failure(adapter)
    assert error.code == "NETWORK"
    assert not any(isinstance(c, Finish) for c in chunks)


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "body", "headers", "code"),
    [
        (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad field"}}, {}, "BAD_REQUEST"),
        (
            400,
            {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "prompt is too long: 205351 tokens > 200000"},
            },
            {},
            "CONTEXT_LENGTH",
        ),
        (401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}, {}, "AUTH"),
        (401, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad key"}}, {}, "AUTH"),
        (404, {"type": "error", "error": {"type": "invalid_request_error", "message": "no model"}}, {}, "NOT_FOUND"),
        (402, {"type": "error", "error": {"type": "billing_error", "message": "credit"}}, {}, "QUOTA"),
        (403, {"type": "error", "error": {"type": "permission_error", "message": "no"}}, {}, "PERMISSION"),
        (404, {"type": "error", "error": {"type": "not_found_error", "message": "model: x"}}, {}, "NOT_FOUND"),
        (413, {"type": "error", "error": {"type": "request_too_large", "message": "big"}}, {}, "CONTEXT_LENGTH"),
        (
            429,
            {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
            {"retry-after": "7"},
            "RATE_LIMITED",
        ),
        (500, {"type": "error", "error": {"type": "api_error", "message": "oops"}}, {}, "SERVER"),
        (504, {"type": "error", "error": {"type": "timeout_error", "message": "slow"}}, {}, "TIMEOUT"),
        (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, {}, "OVERLOADED"),
        (418, {"type": "error", "error": {"type": "brand_new_error", "message": "?"}}, {}, "BAD_REQUEST"),
        (503, {"error": "not anthropic's shape"}, {}, "OVERLOADED"),
    ],
)
async def test_http_error_statuses(
    server: ScriptedServer, adapter: AnthropicAdapter, status: int, body: Any, headers: dict[str, str], code: str
) -> None:
    server.add(Reply.json(status, body, headers={"request-id": "req_e", **headers}))
    error, chunks = await failure(adapter)
    assert chunks == []
    assert (error.code, error.status, error.request_id, error.provider) == (code, status, "req_e", "anthropic")
    if isinstance(body.get("error"), dict):
        assert body["error"]["message"] in error.message
        assert error.provider_type == body["error"]["type"]
    if "retry-after" in headers:
        assert error.retry_after == 7.0
        assert error.retryable


@pytest.mark.parametrize(
    ("status", "content_type", "body", "code", "text"),
    [
        (502, "text/html", b"<html><title>502 Bad Gateway</title><body>nginx</body></html>", "SERVER", "Bad Gateway"),
        (529, "text/plain", b"", "OVERLOADED", "529"),
        (500, "application/json", b'[{"error": {"message": "wrapped"}}]', "SERVER", "wrapped"),
        (401, "application/json", b"{not json", "AUTH", "not json"),
    ],
)
async def test_non_json_error_bodies(
    server: ScriptedServer, adapter: AnthropicAdapter, status: int, content_type: str, body: bytes, code: str, text: str
) -> None:
    reads: list[bytes | float] = [body] if body else []
    server.add(Reply(status=status, headers={"content-type": content_type}, reads=reads, chunked=False))
    error, _ = await failure(adapter)
    assert (error.code, error.status) == (code, status)
    assert text in error.message


async def test_non_sse_success_is_protocol(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply.json(200, {"id": "msg", "content": []}))
    error, _ = await failure(adapter)
    assert error.code == "PROTOCOL"
    assert "application/json" in error.message


async def test_inband_error_finishes_with_error(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=reads_of(INBAND_ERROR_BODY), headers={"request-id": "req_ib"}))
    chunks = await collect(adapter)
    assert chunks[:-1] == translate([INBAND_ERROR_BODY])[0][:-1]
    reason = finish_of(chunks).reason
    assert reason.kind == "error"
    assert reason.failure is not None
    assert (reason.failure.code, reason.failure.status, reason.failure.request_id) == ("OVERLOADED", None, "req_ib")


async def test_malformed_json_is_protocol_and_closes(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    body = sse([message_start(), block_start(0, {"type": "text"}), text_delta(0, "ok")])
    server.add(Reply(reads=[body, b'event: content_block_delta\ndata: {"type": "content_blo\n\n'], end="stall"))
    error, chunks = await failure(adapter)
    assert error.code == "PROTOCOL"
    assert "content_blo" in error.message
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta"]
    assert server.wait_idle()


@pytest.mark.parametrize("end", ["eof", "abrupt", "reset"])
async def test_stream_ending_before_message_stop_is_network(
    server: ScriptedServer, adapter: AnthropicAdapter, end: str
) -> None:
    body = sse([message_start(), block_start(0, {"type": "text"}), text_delta(0, "par")])
    server.add(Reply(reads=[body], end=end))  # type: ignore[arg-type]
    error, chunks = await failure(adapter)
    assert error.code == "NETWORK"
    assert error.retryable
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta"]


async def test_empty_stream_is_network(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=[b": keep-alive\n\n"]))
    error, chunks = await failure(adapter)
    assert (error.code, chunks) == ("NETWORK", [])


async def test_read_timeout(server: ScriptedServer) -> None:
    server.add(Reply(reads=[sse([message_start()])], end="stall"))
    adapter = AnthropicAdapter(make_config(server, timeout=Timeout(connect=5.0, read=0.05)))
    try:
        error, _ = await failure(adapter)
    finally:
        await adapter.aclose()
    assert error.code == "TIMEOUT"


async def test_connect_error_is_network() -> None:
    with ScriptedServer() as gone:
        url = gone.url
    adapter = AnthropicAdapter(make_config_url(url))
    try:
        error, _ = await failure(adapter)
    finally:
        await adapter.aclose()
    assert error.code == "NETWORK"


def make_config_url(url: str) -> Any:
    from harness_llm_anthropic.config import AnthropicConfig

    return AnthropicConfig(base_url=url, api_key=Secret(API_KEY))


@pytest.mark.parametrize(
    ("options", "code"),
    [
        (GenerateOptions(model=MODEL, messages=[Message.user("x")], seed=3), "UNSUPPORTED"),
        (GenerateOptions(model=MODEL, messages=[Message.user("x")], reasoning_effort="max"), "UNSUPPORTED"),
        (
            GenerateOptions(model=MODEL, messages=[Message(role="assistant", content=[ToolCallBlock("t", "f", "{")])]),
            "BAD_REQUEST",
        ),
    ],
)
async def test_invalid_options_raise_before_io(
    server: ScriptedServer, adapter: AnthropicAdapter, options: GenerateOptions, code: str
) -> None:
    error, _ = await failure(adapter, options)
    assert error.code == code
    assert server.requests == []


# ---------------------------------------------------------------------------- abort / cancel


async def test_abort_before_start_sends_nothing(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    abort = AbortSignal()
    abort.fire("not needed")
    chunks = await collect(adapter, GenerateOptions(model=MODEL, messages=[Message.user("x")], abort=abort))
    assert len(chunks) == 1
    reason = finish_of(chunks).reason
    assert reason.kind == "aborted"
    assert reason.failure is not None
    assert reason.failure.message == "not needed"
    assert server.requests == []


async def test_abort_while_server_stalls(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    body = sse([message_start(7, 1), block_start(0, {"type": "text"}), text_delta(0, "partial")])
    server.add(Reply(reads=[body], end="stall"))
    abort = AbortSignal()
    options = GenerateOptions(model=MODEL, messages=[Message.user("x")], abort=abort)
    chunks: list[StreamChunk] = []
    async for chunk in adapter.stream(options):
        chunks.append(chunk)
        if isinstance(chunk, TextDelta):
            abort.fire()  # the next read would block forever
    assert chunks[2] == BlockEnd(0, TextBlock("partial"))
    reason = finish_of(chunks).reason
    assert reason.kind == "aborted"
    assert reason.failure is not None
    assert reason.failure.code == "ABORTED"
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta", "BlockEnd", "Usage", "Finish"]
    check_stream(chunks)
    assert server.wait_idle()


async def test_abort_from_another_task_during_a_stalled_read(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=[sse([message_start(), block_start(0, {"type": "text"}), text_delta(0, "p")])], end="stall"))
    abort = AbortSignal()
    started = anyio.Event()
    chunks: list[StreamChunk] = []

    async def consume() -> None:
        async for chunk in adapter.stream(GenerateOptions(model=MODEL, messages=[Message.user("x")], abort=abort)):
            chunks.append(chunk)
            started.set()

    with anyio.fail_after(30):  # a hang guard, not a timing assertion
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await started.wait()  # the adapter is now blocked reading a stalled body
            abort.fire()
    assert check_stream(chunks) == chunks
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta", "BlockEnd", "Usage", "Finish"]
    assert finish_of(chunks).reason.kind == "aborted"
    assert server.wait_idle()


async def test_cancellation_propagates_and_closes(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=[sse([message_start(), block_start(0, {"type": "text"}), text_delta(0, "a")])], end="stall"))
    chunks: list[StreamChunk] = []
    with anyio.CancelScope() as scope:
        async for chunk in adapter.stream(OPTIONS):
            chunks.append(chunk)
            if isinstance(chunk, TextDelta):
                scope.cancel()
    assert scope.cancelled_caught
    assert not any(isinstance(c, Finish) for c in chunks)
    assert server.wait_idle()


async def test_consumer_stopping_early_closes_the_response(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(Reply(reads=[sse([message_start(), block_start(0, {"type": "text"}), text_delta(0, "a")])], end="stall"))
    stream = adapter.stream(OPTIONS)
    async for chunk in stream:
        if isinstance(chunk, TextDelta):
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert server.wait_idle()


# ---------------------------------------------------------------------------- replay


TOOLS = [ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})]


def legacy(message: Message, *, replay: bool = True) -> Message:
    """``message`` as a conversation stored before the typed signature holds it: no signature on
    its blocks, the signatures only in its ``replay_state`` (none with ``replay=False``)."""
    content = [
        msgspec.structs.replace(block, signature=None) if isinstance(block, ReasoningBlock) else block
        for block in message.content
    ]
    return msgspec.structs.replace(message, content=content, replay_state=message.replay_state if replay else None)


async def two_turns(
    server: ScriptedServer,
    adapter: AnthropicAdapter,
    *,
    strip_replay: bool = False,
    old: bool = False,
    model: str = MODEL,
) -> dict[str, Any]:
    server.add(Reply(reads=reads_of(THINKING_TOOL_BODY)), Reply(reads=[text_body("Sunny.")]))
    first = GenerateOptions(
        model=MODEL, messages=[Message.user("Weather in Paris?")], tools=TOOLS, reasoning_effort="low"
    )
    assembler = BlockAssembler()
    for chunk in await collect(adapter, first):
        assembler.feed(chunk)
    reply = assembler.message(route="anthropic", source="anthropic")
    assert reply.content[0] == ReasoningBlock(
        "Let me think \u00e9 about it.", signed=True, signature=ReasoningSignature("anthropic", MODEL, SIGNATURE)
    )
    if strip_replay or old:
        reply = legacy(reply, replay=not strip_replay)
    result = Message(role="tool", content=[ToolResultBlock("toolu_01", '{"temp": 21}')])
    second = GenerateOptions(
        model=model, messages=[*first.messages, reply, result], tools=TOOLS, reasoning_effort="low"
    )
    chunks = await collect(adapter, second)
    assert finish_of(chunks).reason.kind == "stop"
    raw = server.requests[1].body
    assert isinstance(raw, bytes)
    body: dict[str, Any] = json.loads(raw)
    body["_raw"] = raw
    return body


TWO_TURNS = [
    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me think \u00e9 about it.", "signature": SIGNATURE},
            {"type": "text", "text": "I'll check."},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris", "unit": "c"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": '{"temp": 21}'}]},
]


async def test_two_turns_replay_signature_tool_use_and_result(
    server: ScriptedServer, adapter: AnthropicAdapter
) -> None:
    body = await two_turns(server, adapter)
    assert b'"signature":"' + SIGNATURE.encode() + b'"' in body["_raw"]  # byte-exact
    assert b'"input":{"city": "Paris", "unit":  "c"}' in body["_raw"]  # the raw arguments text
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["messages"] == TWO_TURNS


async def test_a_stored_conversation_without_typed_signatures_replays_its_replay_state(
    server: ScriptedServer, adapter: AnthropicAdapter
) -> None:
    body = await two_turns(server, adapter, old=True)
    assert b'"signature":"' + SIGNATURE.encode() + b'"' in body["_raw"]  # byte-exact
    assert body["messages"] == TWO_TURNS


async def test_two_turns_without_signature_or_replay_state_drop_thinking(
    server: ScriptedServer, adapter: AnthropicAdapter
) -> None:
    body = await two_turns(server, adapter, strip_replay=True)
    assert SIGNATURE.encode() not in body["_raw"]
    assert [block["type"] for block in body["messages"][1]["content"]] == ["text", "tool_use"]


async def test_legacy_replay_state_of_another_model_is_dropped(
    server: ScriptedServer, adapter: AnthropicAdapter
) -> None:
    body = await two_turns(server, adapter, old=True, model="claude-other")
    assert [block["type"] for block in body["messages"][1]["content"]] == ["text", "tool_use"]


@pytest.mark.parametrize("old", [False, True], ids=["typed", "legacy"])
async def test_redacted_thinking_round_trip(server: ScriptedServer, adapter: AnthropicAdapter, old: bool) -> None:
    server.add(Reply(reads=[REDACTED_BODY]), Reply(reads=[TEXT_BODY]))
    assembler = BlockAssembler()
    for chunk in await collect(adapter):
        assembler.feed(chunk)
    reply = assembler.message(route="anthropic", source="anthropic")
    signature = ReasoningSignature("anthropic", MODEL, REDACTED, redacted=True)
    assert reply.content[0] == ReasoningBlock("", signed=True, signature=signature)
    assert reply.replay_state["blocks"] == {"0": {"redacted": REDACTED}}  # repeated for the finish-only consumers
    if old:
        reply = legacy(reply)
    await collect(adapter, GenerateOptions(model=MODEL, messages=[Message.user("hi"), reply, Message.user("more")]))
    content = server.requests[1].json()["messages"][1]["content"]
    assert content[0] == {"type": "redacted_thinking", "data": REDACTED}


# ---------------------------------------------------------------------------- models


async def test_resolve_model(server: ScriptedServer) -> None:
    adapter = AnthropicAdapter(
        make_config(
            server,
            models={
                "big": ModelConfig(context_window=200000, max_output_tokens=64000, default_effort="medium"),
                "plain": ModelConfig(thinking_budgets={}),
            },
        )
    )
    assert adapter.resolve_model("big") == ModelInfo(
        model="big",
        context_window=200000,
        max_output_tokens=64000,
        reasoning_efforts=["off", "low", "medium", "high"],
        default_effort="medium",
    )
    assert adapter.resolve_model("plain") == ModelInfo(model="plain")
    assert adapter.resolve_model("other").reasoning_efforts == ["off", "low", "medium", "high"]
    await adapter.aclose()


async def test_list_models_pages(server: ScriptedServer) -> None:
    server.add(
        Reply.json(
            200,
            {"data": [{"id": "m1", "max_input_tokens": 1000, "max_tokens": 100}], "has_more": True, "last_id": "m1"},
        ),
        Reply.json(200, {"data": [{"id": "m2", "type": "model"}], "has_more": False, "last_id": "m2"}),
    )
    adapter = AnthropicAdapter(make_config(server, models={"m2": ModelConfig(context_window=5)}))
    try:
        models = await adapter.list_models()
    finally:
        await adapter.aclose()
    assert [(m.model, m.context_window, m.max_output_tokens) for m in models] == [("m1", 1000, 100), ("m2", 5, None)]
    assert server.requests[0].path == "/v1/models?limit=1000"
    assert server.requests[1].path == "/v1/models?limit=1000&after_id=m1"
    assert server.requests[0].headers["x-api-key"] == API_KEY


async def test_list_models_errors(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    server.add(
        Reply.json(401, {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}),
        Reply.json(200, {"data": "nope"}),
    )
    with pytest.raises(LlmError) as info:
        await adapter.list_models()
    assert info.value.code == "AUTH"
    with pytest.raises(LlmError) as info:
        await adapter.list_models()
    assert info.value.code == "PROTOCOL"


async def test_list_models_network_error() -> None:
    with ScriptedServer() as gone:
        url = gone.url
    adapter = AnthropicAdapter(make_config_url(url))
    try:
        with pytest.raises(LlmError) as info:
            await adapter.list_models()
    finally:
        await adapter.aclose()
    assert info.value.code == "NETWORK"


async def test_aclose_is_idempotent_and_reopens(server: ScriptedServer, adapter: AnthropicAdapter) -> None:
    await adapter.aclose()
    await adapter.aclose()
    server.add(Reply(reads=[TEXT_BODY]))
    assert finish_of(await collect(adapter)).reason.kind == "stop"
