"""Builders of OpenAI-style SSE bodies for the openai plugin's tests."""

from __future__ import annotations

import json
from typing import Any, Final

from harness_core.kit.translator import StreamTranslator
from harness_core.sse import SSEDecoder
from harness_core.types import FileBlock, JsonSchemaFormat, StreamChunk
from harness_llm_openai.translate import ChunkTranslator

MEDIA: Final = (
    FileBlock("image/png", data=b"\x89PNG\r\n\x1a\n\x00"),
    FileBlock("image/jpeg", url="https://example.com/cat.jpg"),
    FileBlock("application/pdf", data=b"%PDF-1.7 tiny", filename="report.pdf"),
    FileBlock("audio/wav", data=b"RIFF\x00\x00\x00\x00WAVE"),
)
"""Files both OpenAI wires take (the conformance suites' ``media_options``)."""
SCHEMA: Final = JsonSchemaFormat("person", {"type": "object", "properties": {"name": {"type": "string"}}})
"""A structured-output format both OpenAI wires take."""


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` object with one choice (or the given ``choices``)."""
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    if choices is None:
        choices = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    body["choices"] = choices
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return body


def tool(
    index: int | None, *, id: str | None = None, name: str | None = None, args: str | None = None
) -> dict[str, Any]:
    """A ``delta.tool_calls`` entry."""
    entry: dict[str, Any] = {}
    if index is not None:
        entry["index"] = index
    if id is not None:
        entry["id"] = id
        entry["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    entry["function"] = function
    return entry


def sse(*events: dict[str, Any] | str, done: bool = True) -> bytes:
    """An SSE body: each dict as ``data: <json>``, each str as a raw ``data:`` payload."""
    parts = [f"data: {json.dumps(e, ensure_ascii=False) if isinstance(e, dict) else e}\n\n" for e in events]
    if done:
        parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def ids() -> Any:
    """A deterministic id factory: ``gen_0``, ``gen_1`` …"""
    counter = iter(range(1000))
    return lambda: f"gen_{next(counter)}"


def translate(body: bytes, reads: list[bytes] | None = None, **kwargs: Any) -> list[StreamChunk]:
    """Run ``body`` (optionally cut into ``reads``) through the decoder and a fresh
    :class:`ChunkTranslator` (:func:`run_translator`)."""
    kwargs.setdefault("id_factory", ids())
    return run_translator(ChunkTranslator(**kwargs), body, reads)


def run_translator(translator: StreamTranslator, body: bytes, reads: list[bytes] | None = None) -> list[StreamChunk]:
    """Feed ``body`` (optionally cut into ``reads``) through the SSE decoder into ``translator`` as
    the kit's stream loop does: stop once it is done, else feed the event cut by EOF and call
    ``end_of_input()``."""
    decoder = SSEDecoder()
    out: list[StreamChunk] = []
    for piece in reads if reads is not None else [body]:
        for event in decoder.feed(piece):
            out.extend(translator.feed(event))
            if translator.done:
                return out
    last = decoder.close()
    if last is not None:
        out.extend(translator.feed(last))
    out.extend(translator.end_of_input())
    return out
