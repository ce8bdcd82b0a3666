"""Wire bodies and helpers of the anyllm plugin's tests: the library's providers pointed at a
``ScriptedServer`` that replays OpenAI, Anthropic and Mistral streaming bodies."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from harness_core.errors import LlmError
from harness_core.secret import Secret
from harness_core.testing.check import check_stream
from harness_core.testing.server import ScriptedServer
from harness_core.types import GenerateOptions, Message, StreamChunk
from harness_llm_anyllm.adapter import AnyLLMAdapter
from harness_llm_anyllm.config import AnyLLMConfig

MODEL = "model-1"
SIGNATURE = "EqQBCkYIBxgCKkDx+/=sig\u00e9==" + "A" * 40
UNICODE = ("Caf\u00e9 co\u00fbte 5 \u20ac ", "\U0001f600 ", "\u4f60\u597d\u4e16\u754c")


def key() -> str:
    """A key-shaped secret built at run time (no key-shaped literal in the repository)."""
    return "-".join(["sk", "test", "k3y" * 4, "wxyz"])


def base_url(provider: str, server: ScriptedServer) -> str:
    """The ``base_url`` that makes ``provider``'s SDK request ``server`` (OpenAI's SDK appends
    ``/chat/completions`` to it, Anthropic's ``/v1/messages``, Mistral's ``/v1/chat/completions``)."""
    return server.url + "/v1" if provider == "openai" else server.url


def make_adapter(provider: str, server: ScriptedServer, **fields: Any) -> AnyLLMAdapter:
    """An adapter for ``provider`` pointed at ``server`` with a test key."""
    fields.setdefault("api_key", Secret(key()))
    return AnyLLMAdapter(AnyLLMConfig(provider=provider, base_url=base_url(provider, server), **fields))


def options(**fields: Any) -> GenerateOptions:
    """Request options: model ``model-1``, one user message, 64 tokens."""
    fields.setdefault("model", MODEL)
    fields.setdefault("messages", [Message.user("hi")])
    fields.setdefault("max_tokens", 64)
    return GenerateOptions(**fields)


async def run(
    adapter: AnyLLMAdapter, request: GenerateOptions | None = None
) -> tuple[list[StreamChunk], LlmError | None]:
    """Stream ``request`` to the end; the chunks (checked against the stream obligations) and
    the ``LlmError`` raised, if any."""
    chunks: list[StreamChunk] = []
    error: LlmError | None = None
    try:
        async for chunk in adapter.stream(request or options()):
            chunks.append(chunk)
    except LlmError as exc:
        error = exc
    check_stream(chunks, error)
    return chunks, error


# ---------------------------------------------------------------------- OpenAI Chat Completions


def chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with one choice (no choice when ``delta`` and ``finish`` are None)."""
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    body["choices"] = (
        [] if delta is None and finish is None else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    )
    body.update(extra)
    return body


def openai_sse(*events: dict[str, Any], done: bool = True) -> bytes:
    """An OpenAI/Mistral SSE body: ``data: <json>`` per event, then ``data: [DONE]``."""
    parts = [f"data: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events]
    if done:
        parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


OPENAI_TEXT = openai_sse(
    chunk({"role": "assistant", "content": ""}),
    *(chunk({"content": piece}) for piece in UNICODE),
    chunk(finish="stop"),
    chunk(usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}),
)

MISTRAL_TEXT = openai_sse(
    chunk({"content": UNICODE[0]}),
    chunk({"content": UNICODE[1] + UNICODE[2]}),
    chunk({"content": ""}, finish="stop", usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}),
)
"""Mistral's shape: usage on the chunk that carries the finish reason (a short body: the Mistral
SDK is the slowest of the three per request, and every byte split replays it hundreds of times)."""

OPENAI_REASONING_TOOLS = openai_sse(
    chunk({"role": "assistant", "reasoning_content": "Think \u00e9"}),
    chunk({"reasoning_content": " more."}),
    chunk({"content": "Checking."}),
    chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
    chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "get_time"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
    chunk(finish="tool_calls"),
    chunk(
        usage={
            "prompt_tokens": 120,
            "completion_tokens": 30,
            "total_tokens": 150,
            "prompt_tokens_details": {"cached_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 12},
        }
    ),
)

# ---------------------------------------------------------------------- Anthropic Messages


def anthropic_sse(events: Iterable[dict[str, Any]]) -> bytes:
    """An Anthropic SSE body: ``event: <type>`` and ``data: <json>`` per event."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events).encode()


def message_start(**usage: int) -> dict[str, Any]:
    message = {"id": "msg_01", "type": "message", "role": "assistant", "model": MODEL, "content": []}
    return {"type": "message_start", "message": {**message, "stop_reason": None, "usage": usage}}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": body}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, output_tokens: int) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": output_tokens}}


ANTHROPIC_TEXT = anthropic_sse(
    [
        message_start(input_tokens=9, output_tokens=1),
        block_start(0, {"type": "text", "text": ""}),
        *(delta(0, {"type": "text_delta", "text": piece}) for piece in UNICODE),
        block_stop(0),
        message_delta("end_turn", 4),
        {"type": "message_stop"},
    ]
)

ANTHROPIC_THINKING_TOOL = anthropic_sse(
    [
        message_start(input_tokens=12, output_tokens=3, cache_read_input_tokens=100, cache_creation_input_tokens=20),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me think \u00e9"}),
        delta(0, {"type": "thinking_delta", "thinking": " about it."}),
        delta(0, {"type": "signature_delta", "signature": SIGNATURE}),
        block_stop(0),
        {"type": "ping"},
        block_start(1, {"type": "text", "text": ""}),
        delta(1, {"type": "text_delta", "text": "I'll check."}),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}),
        delta(2, {"type": "input_json_delta", "partial_json": '{"city": "Par'}),
        delta(2, {"type": "input_json_delta", "partial_json": 'is"}'}),
        block_stop(2),
        message_delta("tool_use", 61),
        {"type": "message_stop"},
    ]
)
