"""Pre-generated server-sent event streams for the benchmarks, in two wire formats.

A *scenario* is named by the ``model`` field of the request, so every client (httpx, the openai
SDK, harness adapters) selects it without special headers:

- ``text-N``   N text deltas, then the finish and a usage chunk;
- ``tool-N``   one tool call whose JSON arguments arrive in N small pieces;
- ``paced-N``  like ``text-N`` but the server waits ~1 ms before every event;
- ``paced-NxMms`` like ``text-N`` but the server sends one event every M milliseconds (event ``i``
  at M·i ms after the first, on the server loop's timers: a late write does not delay the next
  ones), a slow model's stream: the gateway bench's hold check (:func:`bench.gateway.hold`);
- ``stall-N``  the first text delta at once, then a 200 ms stall, then the other N-1.

Formats: ``openai`` (Chat Completions chunks as OpenAI sends them, ``data: [DONE]`` last;
https://platform.openai.com/docs/api-reference/chat-streaming), ``anthropic`` (Messages API
events with ``event:`` lines, https://docs.anthropic.com/en/api/messages-streaming) and
``gemini`` (``GenerateContentResponse`` objects of ``streamGenerateContent?alt=sse``, CRLF
framed, ``usageMetadata`` on every event as Gemini sends it, the body ending after the event
with ``finishReason``; https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent).
Gemini sends a function call's arguments whole, so ``tool-N`` has no Gemini form.

The token pieces are short words like a real tokenizer's output, a few of them non-ASCII, so the
consumers decode UTF-8 like they would in production.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

__all__ = ["PACE_S", "STALL_S", "Scenario", "events", "expected", "parse_scenario", "pieces"]

PACE_S: Final = 0.001
"""Pause before every event of a ``paced`` stream (seconds)."""
STALL_S: Final = 0.2
"""Stall after the first delta of a ``stall`` stream (seconds)."""

_WORDS: Final = (
    " the", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ",", " and",
    " then", " it", " runs", " to", " the", " café", " near", " the", " river", ".", " It",
    " was", " a", " sunny", " day", " in", " 東京", " and", " everyone", " smiled", "!",
)  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario name: ``kind`` (text / tool / paced / stall), ``n`` deltas and, for
    ``paced-NxMms``, ``gap_ms`` = M (milliseconds between two events; 0 for every other name)."""

    kind: str
    n: int
    gap_ms: int = 0


def parse_scenario(name: str) -> Scenario:
    """``"text-2000"`` → ``Scenario("text", 2000)``, ``"paced-50x20ms"`` → ``Scenario("paced", 50,
    20)``. Raises ``ValueError`` for unknown names (and a gap that is not a whole number ≥ 1 ms)."""
    kind, _, count = name.partition("-")
    gap = 0
    if kind == "paced" and "x" in count:
        count, _, every = count.partition("x")
        digits = every.removesuffix("ms")
        if not every.endswith("ms") or not digits.isdigit() or int(digits) < 1:
            raise ValueError(f"unknown scenario {name!r}: the gap of paced-NxMms is M whole milliseconds, M >= 1")
        gap = int(digits)
    if kind not in ("text", "tool", "paced", "stall") or not count.isdigit() or int(count) < 1:
        raise ValueError(f"unknown scenario {name!r}")
    return Scenario(kind, int(count), gap)


def pieces(scenario: Scenario) -> list[str]:
    """The delta texts (text scenarios) or argument pieces (tool scenario), in order."""
    if scenario.kind == "tool":
        # '{"values": [' + '0, ' '1, ' ... + '0]}': valid JSON in N pieces of about 3 characters.
        if scenario.n == 1:
            return ['{"values": []}']
        return ['{"values": [', *(f"{i % 10}, " for i in range(scenario.n - 2)), "0]}"]
    return [_WORDS[i % len(_WORDS)] for i in range(scenario.n)]


def expected(name: str) -> tuple[int, int]:
    """(number of deltas, total characters) a consumer must see for scenario ``name``."""
    parts = pieces(parse_scenario(name))
    return len(parts), sum(len(p) for p in parts)


def _dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _openai(scenario: Scenario, model: str) -> list[bytes]:
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model}
    head["system_fingerprint"] = "fp_bench"

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return f"data: {_dump({**head, 'choices': [choice]})}\n\n".encode()

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    parts = pieces(scenario)
    if scenario.kind == "tool":
        first = {"index": 0, "id": "call_bench", "type": "function", "function": {"name": "lookup", "arguments": ""}}
        out[0] = chunk({"role": "assistant", "content": None, "tool_calls": [first]})
        out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in parts]
        finish = "tool_calls"
    else:
        out += [chunk({"content": p}) for p in parts]
        finish = "stop"
    out.append(chunk({}, finish))
    usage = {"prompt_tokens": 12, "completion_tokens": len(parts), "total_tokens": 12 + len(parts)}
    out.append(f"data: {_dump({**head, 'choices': [], 'usage': usage})}\n\n".encode())
    out.append(b"data: [DONE]\n\n")
    return out


def _anthropic(scenario: Scenario, model: str) -> list[bytes]:
    def event(name: str, data: dict[str, object]) -> bytes:
        return f"event: {name}\ndata: {_dump(data)}\n\n".encode()

    message = {"id": "msg_bench", "type": "message", "role": "assistant", "model": model, "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 1}}
    out = [event("message_start", {"type": "message_start", "message": message})]
    parts = pieces(scenario)
    if scenario.kind == "tool":
        block: dict[str, object] = {"type": "tool_use", "id": "toolu_bench", "name": "lookup", "input": {}}
        kind, field = "input_json_delta", "partial_json"
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        kind, field = "text_delta", "text"
        stop = "end_turn"
    out.append(event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}))
    out.append(event("ping", {"type": "ping"}))
    for p in parts:
        out.append(
            event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": kind, field: p}})
        )
    out.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    out.append(event("message_delta", {**delta, "usage": {"output_tokens": len(parts)}}))
    out.append(event("message_stop", {"type": "message_stop"}))
    return out


def _gemini(scenario: Scenario, model: str) -> list[bytes]:
    if scenario.kind == "tool":
        raise ValueError("Gemini streams no tool-call arguments in pieces: no tool scenario")
    parts = pieces(scenario)
    meta = {"modelVersion": model, "responseId": "bench-response"}

    def event(text: str, done: int, finish: str | None = None) -> bytes:
        candidate: dict[str, object] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        usage = {"promptTokenCount": 12, "candidatesTokenCount": done, "totalTokenCount": 12 + done}
        return f"data: {_dump({'candidates': [candidate], 'usageMetadata': usage, **meta})}\r\n\r\n".encode()

    out = [event(p, i + 1) for i, p in enumerate(parts[:-1])]
    out.append(event(parts[-1], len(parts), "STOP"))
    return out


def events(fmt: str, name: str) -> list[bytes]:
    """The SSE events (each a complete ``bytes`` frame) of scenario ``name`` in format ``fmt``
    (``"openai"``, ``"anthropic"`` or ``"gemini"``). Raises ``ValueError`` for an unknown
    format or name, and for a tool scenario in Gemini's format."""
    scenario = parse_scenario(name)
    if fmt == "openai":
        return _openai(scenario, name)
    if fmt == "anthropic":
        return _anthropic(scenario, name)
    if fmt == "gemini":
        return _gemini(scenario, name)
    raise ValueError(f"unknown format {fmt!r}")
