"""Gemini SSE bodies and helpers for the adapter tests (wire shapes of
https://ai.google.dev/api/generate-content#generatecontentresponse)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from harness_core.errors import LlmError
from harness_core.secret import Secret
from harness_core.sse import SSEDecoder
from harness_core.testing.check import check_stream
from harness_core.testing.server import ScriptedServer
from harness_core.types import StreamChunk
from harness_llm_gemini.config import GeminiConfig
from harness_llm_gemini.translate import Translator

API_KEY = "AIza" + "SyTest0123456789abcdefghijklmnopqrs"  # built at run time: no key-shaped literal
MODEL = "gemini-2.5-flash"
SIGNATURE = "CiIBjz1rX2/+signature\u00e9==" + "Q" * 40
SIGNATURE_2 = "EqsFCqgFAb4+second/signature=="


def sse(*responses: dict[str, Any] | str, crlf: bool = True) -> bytes:
    """An ``alt=sse`` body: one ``data:`` event per response (a str is sent as is), CRLF framed
    like Google's servers (``crlf=False`` for LF)."""
    end = "\r\n" if crlf else "\n"
    out = []
    for response in responses:
        data = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
        out.append(f"data: {data}{end}{end}")
    return "".join(out).encode()


def chunk(
    *parts: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """One ``GenerateContentResponse`` with a single candidate."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    response: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL, "responseId": "resp1", **extra}
    if usage is not None:
        response["usageMetadata"] = usage
    return response


def usage(prompt: int = 10, candidates: int | None = 5, thoughts: int | None = None, **more: int) -> dict[str, Any]:
    body: dict[str, Any] = {"promptTokenCount": prompt, **more}
    if candidates is not None:
        body["candidatesTokenCount"] = candidates
    if thoughts is not None:
        body["thoughtsTokenCount"] = thoughts
    return body


def text_body(text: str = "Hello.", finish: str = "STOP") -> bytes:
    return sse(chunk({"text": text}), chunk({"text": ""}, finish=finish, usage=usage()))


THINKING_TOOL_BODY = sse(
    chunk({"text": "Let me think \u00e9.", "thought": True}),
    chunk({"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": SIGNATURE}),
    chunk({"functionCall": {"name": "get_time", "args": {}}}),
    chunk({"text": "", "thoughtSignature": SIGNATURE_2}, finish="STOP", usage=usage(20, 8, 30)),
)
"""Thoughts, two parallel calls (signature on the first only), a trailing signature-only part."""


def google_error(code: int, status: str, message: str, *details: dict[str, Any]) -> bytes:
    """A ``google.rpc.Status`` error body as the API sends it
    (https://ai.google.dev/gemini-api/docs/troubleshooting)."""
    return json.dumps(
        {"error": {"code": code, "message": message, "status": status, "details": list(details)}}
    ).encode()


def make_config(server: ScriptedServer, **fields: object) -> GeminiConfig:
    """A config pointing at ``server`` with a test key; ``fields`` override."""
    fields.setdefault("api_key", Secret(API_KEY))
    return GeminiConfig(base_url=server.url + "/v1beta", **fields)  # type: ignore[arg-type]


def translate(
    body: bytes, reads: Sequence[bytes] | None = None, *, model: str = MODEL
) -> tuple[list[StreamChunk], LlmError | None]:
    """Decoder + translator over ``body`` delivered as ``reads``; the stream obligations are
    checked. Returns the chunks and the raised error, if any."""
    decoder = SSEDecoder()
    translator = Translator(model=model)
    chunks: list[StreamChunk] = []
    try:
        for piece in reads if reads is not None else [body]:
            for event in decoder.feed(piece):
                chunks.extend(translator.feed(event))
        last = decoder.close()
        if last is not None:
            chunks.extend(translator.feed(last))
        chunks.extend(translator.end_of_input())
    except LlmError as exc:
        check_stream(chunks, exc)
        return chunks, exc
    check_stream(chunks)
    return chunks, None
