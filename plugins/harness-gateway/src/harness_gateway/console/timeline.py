"""A request's chunk timeline and masked messages, as the request inspector shows them.

:class:`Timeline` is fed every chunk of one stream (the harness protocol: ``block-start`` →
deltas → ``block-end``, ``usage`` once, ``finish`` last; see docs/stream-obligations.md) and produces a
JSON-able ``detail``:

* ``timeline``: events with ``t`` (milliseconds since the request was admitted): ``block-start``
  (index, block type, tool name), ``block-end``, ``usage`` (token counts), ``finish`` (kind and
  error); at most :data:`MAX_EVENTS` (``events_cut`` counts the rest);
* ``rates``: deltas and characters per second of the stream, by block type;
* ``first_chunk_ms``: time to the first chunk before the finish (none when the stream failed
  before any); ``tool_calls``: name, id, arguments;
* ``messages``: the request (system prompt, messages) and the reply, every text masked (API-key
  patterns and the configuration's secrets) and cut to :data:`TEXT_LIMIT` characters; files are
  described (media type, name, size), never stored. An embedding call's inputs are one message of
  role ``input`` (one text block per input).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from harness_core import (
    BlockEnd,
    BlockStart,
    EmbedOptions,
    FileBlock,
    Finish,
    GenerateOptions,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    mask_strings,
)
from harness_middleware.redact import PRESET_GROUPS, PRESETS, Masker

__all__ = ["MAX_EVENTS", "TEXT_LIMIT", "Timeline", "mask_text", "usage_counts"]

MAX_EVENTS: Final = 2000
TEXT_LIMIT: Final = 16 * 1024
_MAX_SECONDS: Final = 3600  # rate buckets kept (one per second of the stream)
_DELTA_KINDS: Final[dict[type, str]] = {TextDelta: "text", ReasoningDelta: "reasoning", ToolCallDelta: "tool-call"}

_MASKER: Final = Masker({name: PRESETS[name] for name in PRESET_GROUPS["api-keys"]}, "[REDACTED:{name}]", 256)


def mask_text(text: str, redact: Callable[[str], str]) -> str:
    """``text`` with API-key patterns and the config's secrets (``redact``) masked, cut to
    :data:`TEXT_LIMIT` characters (the cut is said)."""
    masked = redact(_MASKER.mask(text))
    if len(masked) > TEXT_LIMIT:
        return masked[:TEXT_LIMIT] + f"… [{len(masked) - TEXT_LIMIT} more characters not kept]"
    return masked


class Timeline:
    """The timeline of one stream. ``clock`` returns seconds (monotonic); time 0 is construction."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.start = clock()
        self.events: list[dict[str, Any]] = []
        self.events_cut = 0
        self.rates: dict[int, dict[str, int]] = {}
        self.first_chunk_ms: float | None = None
        self.tool_calls: list[ToolCallBlock] = []
        self.reply: list[TextBlock | ReasoningBlock | ToolCallBlock] = []
        self._bucket: dict[str, int] | None = None  # the current second's rates (None: past the last)
        self._second_end = -float("inf")  # the clock's value when the current second ends

    def _event(self, event: dict[str, Any]) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append(event)
        else:
            self.events_cut += 1

    def delta(self, kind: str, size: int) -> None:
        """Count one delta of ``kind`` (``text``, ``reasoning``, ``tool-call``) and ``size``
        characters towards the rates of its second: the common chunk, so one clock read and two
        counts while the second lasts (:meth:`feed` calls it for deltas)."""
        now = self.clock()
        if now >= self._second_end:
            self._next_second(now)
        bucket = self._bucket
        if bucket is not None:
            bucket[kind] = bucket.get(kind, 0) + 1
            bucket["chars"] = bucket.get("chars", 0) + size

    def _next_second(self, now: float) -> None:
        """The rates of the second ``now`` is in (none after :data:`_MAX_SECONDS`)."""
        elapsed = now - self.start
        if self.first_chunk_ms is None:
            self.first_chunk_ms = round(elapsed * 1000, 3)
        second = int(elapsed)
        if second >= _MAX_SECONDS:
            self._bucket, self._second_end = None, float("inf")
            return
        bucket = self.rates.get(second)
        self._bucket = self.rates[second] = {} if bucket is None else bucket
        self._second_end = self.start + second + 1

    def feed(self, chunk: StreamChunk) -> None:
        """Record one chunk (a delta only counts towards its second's rates: :meth:`delta`)."""
        if isinstance(chunk, (TextDelta, ReasoningDelta, ToolCallDelta)):
            size = len(chunk.arguments_delta if isinstance(chunk, ToolCallDelta) else chunk.text)
            self.delta(_DELTA_KINDS[type(chunk)], size)
            return
        elapsed = self.clock() - self.start
        if self.first_chunk_ms is None and not isinstance(chunk, Finish):  # failed before any chunk: none
            self.first_chunk_ms = round(elapsed * 1000, 3)
        t = round(elapsed * 1000, 3)
        if isinstance(chunk, BlockStart):
            start = {"t": t, "event": "block-start", "index": chunk.index, "block": chunk.block_type}
            self._event({**start, "name": chunk.name} if chunk.name else start)
        elif isinstance(chunk, BlockEnd):
            self._event({"t": t, "event": "block-end", "index": chunk.index, "block": _block_type(chunk.block)})
            self.reply.append(chunk.block)
            if isinstance(chunk.block, ToolCallBlock):
                self.tool_calls.append(chunk.block)
        elif isinstance(chunk, Usage):
            counts = {k: v for k, v in usage_counts(chunk.usage).items() if v is not None}
            self._event({"t": t, "event": "usage", **counts})
        else:  # the finish, last
            finish: dict[str, Any] = {"t": t, "event": "finish", "kind": chunk.reason.kind}
            failure = chunk.reason.failure
            if failure is not None:
                finish["error"] = {"code": failure.code, "message": failure.message, "status": failure.status}
            self._event(finish)

    def detail(self, options: GenerateOptions | EmbedOptions, redact: Callable[[str], str]) -> dict[str, Any]:
        """The JSON-able ``detail`` of the request (see the module docs), masked with ``redact``;
        an embedding call's inputs are one ``input`` message of one text block per input."""
        if isinstance(options, EmbedOptions):
            texts = [{"type": "text", "text": mask_text(text, redact)} for text in options.inputs]
            inputs = [{"role": "input", "content": texts}]
            return {"messages": inputs, **self._events(redact), "tool_calls": [], "tools": []}
        messages = [_message(m.role, m.content, redact) for m in options.messages]
        if options.system:
            system = {"type": "text", "text": mask_text(options.system, redact)}
            messages.insert(0, {"role": "system", "content": [system]})
        if self.reply:
            messages.append(_message("assistant", self.reply, redact))
        return {
            "messages": messages,
            **self._events(redact),
            "tool_calls": [
                {"id": c.id, "name": redact(c.name), "arguments": mask_text(c.arguments, redact)}
                for c in self.tool_calls
            ],
            "tools": [redact(t.name) for t in options.tools],
        }

    def _events(self, redact: Callable[[str], str]) -> dict[str, Any]:
        return {
            "timeline": [
                # the text from outside an event carries: a tool's name, a failure message (which
                # may quote the request); every other field is a number or a name of this module
                mask_strings(event, redact) if "name" in event or "error" in event else event
                for event in self.events
            ],
            "events_cut": self.events_cut,
            "rates": [{"second": s, **self.rates[s]} for s in sorted(self.rates)],
            "first_chunk_ms": self.first_chunk_ms,
        }


def usage_counts(usage: TokenUsage | None) -> dict[str, int | None]:
    """Every token count of ``usage`` by field name (``input_tokens`` …), ``None`` when unknown."""
    return {name: getattr(usage, name) if usage is not None else None for name in TokenUsage.__struct_fields__}


def _block_type(block: TextBlock | ReasoningBlock | ToolCallBlock) -> str:
    return "text" if isinstance(block, TextBlock) else "reasoning" if isinstance(block, ReasoningBlock) else "tool-call"


def _message(role: str, content: Any, redact: Callable[[str], str]) -> dict[str, Any]:
    """One message as the inspector shows it: every text masked, files described."""
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextBlock | ReasoningBlock):
            blocks.append({"type": _block_type(block), "text": mask_text(block.text, redact)})
        elif isinstance(block, ToolCallBlock):
            blocks.append(
                {
                    "type": "tool-call",
                    "name": redact(block.name),
                    "id": block.id,
                    "text": mask_text(block.arguments, redact),
                }
            )
        elif isinstance(block, ToolResultBlock):
            text = mask_text(block.content, redact)
            blocks.append({"type": "tool-result", "id": block.tool_call_id, "text": text, "error": block.is_error})
        else:
            assert isinstance(block, FileBlock)
            blocks.append({"type": "file", "text": mask_text(block.describe(), redact)})
    return {"role": role, "content": blocks}
