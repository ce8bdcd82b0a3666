"""Anthropic SSE bodies for the adapter tests, built from event dicts (wire shapes of
https://docs.anthropic.com/en/api/messages-streaming)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from harness_core.errors import LlmError
from harness_core.secret import Secret
from harness_core.sse import SSEDecoder
from harness_core.testing.check import check_stream
from harness_core.testing.server import ScriptedServer
from harness_core.types import StreamChunk
from harness_llm_anthropic.config import AnthropicConfig
from harness_llm_anthropic.translate import Translator

API_KEY = "sk-ant-test-key-0123456789"
MODEL = "claude-test-1"
SIGNATURE = "EqQBCkYIBxgCKkDx+/=sig\u00e9==" + "A" * 40
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP=="


def sse(events: Iterable[dict[str, Any] | tuple[str, str]], *, crlf: bool = False) -> bytes:
    """Encode events as an SSE body: dicts get ``event: <type>``; ``(name, data)`` pairs are raw."""
    out: list[str] = []
    for event in events:
        if isinstance(event, tuple):
            name, data = event
        else:
            name, data = event["type"], json.dumps(event, ensure_ascii=False)
        out.append(f"event: {name}\ndata: {data}\n\n")
    text = "".join(out)
    if crlf:
        text = text.replace("\n", "\r\n")
    return text.encode()


def message_start(input_tokens: int = 10, output_tokens: int = 1, **usage: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens, **usage},
        },
    }


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": body}


def text_delta(index: int, text: str) -> dict[str, Any]:
    return delta(index, {"type": "text_delta", "text": text})


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str | None, output_tokens: int = 5, **usage: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens, **usage},
    }


MESSAGE_STOP: dict[str, Any] = {"type": "message_stop"}
PING: dict[str, Any] = {"type": "ping"}


def text_body(*pieces: str, stop_reason: str = "end_turn") -> bytes:
    """One text block made of ``pieces``."""
    return sse(
        [
            message_start(),
            block_start(0, {"type": "text", "text": ""}),
            *(text_delta(0, p) for p in pieces),
            block_stop(0),
            message_delta(stop_reason),
            MESSAGE_STOP,
        ]
    )


UNICODE_TEXT = ("Caf\u00e9 co\u00fbte 5 \u20ac ", "\U0001f600 ", "\u4f60\u597d\u4e16\u754c")

TEXT_BODY = text_body(*UNICODE_TEXT)

THINKING_TOOL_BODY = sse(
    [
        message_start(12, 3, cache_read_input_tokens=100, cache_creation_input_tokens=20),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me think \u00e9"}),
        delta(0, {"type": "thinking_delta", "thinking": " about it."}),
        delta(0, {"type": "signature_delta", "signature": SIGNATURE}),
        block_stop(0),
        PING,
        block_start(1, {"type": "text", "text": ""}),
        text_delta(1, "I'll check."),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}),
        delta(2, {"type": "input_json_delta", "partial_json": ""}),
        delta(2, {"type": "input_json_delta", "partial_json": '{"city": "Par'}),
        delta(2, {"type": "input_json_delta", "partial_json": 'is", "unit":  "c"}'}),
        block_stop(2),
        message_delta("tool_use", 61),
        MESSAGE_STOP,
    ]
)

REDACTED_BODY = sse(
    [
        message_start(),
        block_start(0, {"type": "redacted_thinking", "data": REDACTED}),
        block_stop(0),
        block_start(1, {"type": "text", "text": ""}),
        text_delta(1, "ok"),
        block_stop(1),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]
)

PARALLEL_TOOLS_BODY = sse(
    [
        message_start(),
        block_start(0, {"type": "tool_use", "id": "toolu_a", "name": "now", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": ""}),
        block_stop(0),
        PING,
        block_start(1, {"type": "tool_use", "id": "toolu_b", "name": "add", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"a": 1,'}),
        PING,
        delta(1, {"type": "input_json_delta", "partial_json": ' "b": 2}'}),
        block_stop(1),
        message_delta("tool_use", 30),
        MESSAGE_STOP,
    ]
)

SERVER_TOOL_BODY = sse(
    [
        message_start(),
        block_start(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"query": "x"}'}),
        block_stop(0),
        block_start(1, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}),
        block_stop(1),
        block_start(2, {"type": "text", "text": ""}),
        text_delta(2, "Found."),
        delta(2, {"type": "citations_delta", "citation": {"type": "web_search_result_location"}}),
        block_stop(2),
        {"type": "brand_new_event", "payload": 1},
        message_delta("pause_turn"),
        MESSAGE_STOP,
    ]
)

INBAND_ERROR_BODY = sse(
    [
        message_start(20, 1),
        block_start(0, {"type": "text", "text": ""}),
        PING,
        text_delta(0, "partial \u20ac"),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
)

CALLER = {"type": "code_execution_20250825", "tool_id": "srvtoolu_01"}
PROGRAMMATIC_TOOL_BODY = sse(
    [
        # programmatic tool calling: complete blocks inside message_start, stop reason set there,
        # then message_stop directly (no content_block_* and no message_delta events)
        {
            "type": "message_start",
            "message": {
                "id": "msg_02",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [
                    {"type": "text", "text": "Querying the café table \u2026"},
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_01",
                        "name": "code_execution",
                        "input": {"code": "q()"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "query_database",
                        "input": {"sql": "SELECT name FROM caf\u00e9 WHERE p > 5 \u20ac", "limit": 10},
                        "caller": CALLER,
                    },
                    {"type": "tool_use", "id": "toolu_02", "name": "now", "input": {}, "caller": CALLER},
                ],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "container": {"id": "container_01", "expires_at": "2026-12-01T15:00:00Z"},
                "usage": {"input_tokens": 40, "output_tokens": 25},
            },
        },
        MESSAGE_STOP,
    ]
)

SUCCESS_BODIES: dict[str, bytes] = {
    "programmatic_tool": PROGRAMMATIC_TOOL_BODY,
    "text": TEXT_BODY,
    "thinking_tool": THINKING_TOOL_BODY,
    "redacted": REDACTED_BODY,
    "parallel_tools": PARALLEL_TOOLS_BODY,
    "server_tool": SERVER_TOOL_BODY,
}


def translate(reads: Sequence[bytes], *, model: str = MODEL) -> tuple[list[StreamChunk], Translator]:
    """Decode ``reads`` with the kit's SSE decoder and translate them (no HTTP).

    The chunks are checked against docs/stream-obligations.md (``check_stream``); a stream without a terminal event
    is checked as ending with the adapter's ``NETWORK`` error.
    """
    decoder = SSEDecoder()
    translator = Translator(model=model)
    chunks: list[StreamChunk] = []
    for read in reads:
        for event in decoder.feed(read):
            chunks.extend(translator.feed(event))
    tail = decoder.close()
    if tail is not None:
        chunks.extend(translator.feed_data(tail.event, tail.data))
    error: LlmError | None = None
    try:
        chunks.extend(translator.end_of_input())
    except LlmError as exc:
        error = exc
    check_stream(chunks, error)
    return chunks, translator


def make_config(server: ScriptedServer, **fields: object) -> AnthropicConfig:
    """A config pointing at ``server`` with a test key; ``fields`` override."""
    return make_config_for(server.url, **fields)


def make_config_for(base_url: str, **fields: object) -> AnthropicConfig:
    """A config pointing at ``base_url`` with a test key; ``fields`` override."""
    fields.setdefault("api_key", Secret(API_KEY))
    return AnthropicConfig(base_url=base_url, **fields)  # type: ignore[arg-type]
