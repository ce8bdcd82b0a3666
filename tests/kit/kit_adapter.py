"""A tiny wire for the kit's tests: each SSE event's ``data`` is ``t:<text>``, ``x:<message>``
(an in-band error), ``end`` (the terminal event) and more (see :class:`ToyTranslator`). The
translator is a real state machine, so the stream loop and the conformance suite are exercised
end to end."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Final

import msgspec

from harness_core.errors import LlmError
from harness_core.http import ErrorDetails
from harness_core.kit import HttpAdapter, HttpProviderConfig, HttpProviderPlugin, vendor_api_key
from harness_core.secret import Secret
from harness_core.sse import SSEEvent
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    ModelInfo,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)

TOY_URL: Final = "https://toy.example"


class ToyConfig(HttpProviderConfig, forbid_unknown_fields=True, kw_only=True):
    """The toy plugin's config."""

    base_url: str = TOY_URL
    api_key: Annotated[Secret | None, vendor_api_key("TOY_API_KEY", TOY_URL)] = None
    routes: list[str] = msgspec.field(default_factory=lambda: ["toy"])


class ToyTranslator:
    """The toy wire's translator: ``t:`` text and ``r:`` reasoning pieces (a change of kind
    closes the open block), ``c:<id>,<name>,<arguments>`` one whole tool call, ``u:<in>,<out>``
    usage, ``x:<message>`` an in-band error, ``end`` the terminal event."""

    def __init__(self, request_id: str | None) -> None:
        self.request_id = request_id
        self.done = False
        self._next = 0
        self._open: tuple[int, str, list[str]] | None = None
        self._usage: TokenUsage | None = None
        self._tools = False

    def feed(self, event: SSEEvent) -> Sequence[StreamChunk]:
        if self.done:
            return ()
        kind, _, rest = event.data.partition(":")
        if kind == "end":
            return self._end(FinishReason("tool-calls" if self._tools else "stop"))
        if kind == "x":
            failure = LlmError("SERVER", rest, provider="toy", request_id=self.request_id).to_failure()
            return self._end(FinishReason("error", failure=failure))
        if kind == "u":
            tokens_in, tokens_out = rest.split(",")
            self._usage = TokenUsage(int(tokens_in), int(tokens_out))
            return ()
        if kind == "c":
            call_id, name, arguments = rest.split(",", 2)
            out = self._close()
            index = self._take()
            self._tools = True
            out += [
                BlockStart(index, "tool-call", id=call_id, name=name),
                ToolCallDelta(index, call_id, arguments),
                BlockEnd(index, ToolCallBlock(call_id, name, arguments)),
            ]
            return out
        if kind not in ("t", "r"):
            raise LlmError("PROTOCOL", f"toy: unexpected event {event.data[:50]!r}", provider="toy")
        out = []
        if self._open is None or self._open[1] != kind:
            out = self._close()
            self._open = (self._take(), kind, [])
            out.append(BlockStart(self._open[0], "text" if kind == "t" else "reasoning"))
        index, _, parts = self._open
        parts.append(rest)
        out.append(TextDelta(index, rest) if kind == "t" else ReasoningDelta(index, rest))
        return out

    def abort(self, reason: str) -> Sequence[StreamChunk]:
        if self.done:
            return ()
        failure = LlmError("ABORTED", reason, provider="toy").to_failure()
        return self._end(FinishReason("aborted", failure=failure))

    def end_of_input(self) -> Sequence[StreamChunk]:
        if self.done:
            return ()
        raise LlmError("NETWORK", "toy stream ended before `end`", provider="toy", request_id=self.request_id)

    def _take(self) -> int:
        self._next += 1
        return self._next - 1

    def _close(self) -> list[StreamChunk]:
        if self._open is None:
            return []
        index, kind, parts = self._open
        self._open = None
        text = "".join(parts)
        return [BlockEnd(index, TextBlock(text) if kind == "t" else ReasoningBlock(text))]

    def _end(self, reason: FinishReason) -> Sequence[StreamChunk]:
        self.done = True
        out = self._close()
        if self._usage is not None:
            out.append(Usage(self._usage))
        out.append(Finish(reason))
        return out


class ToyAdapter(HttpAdapter[ToyConfig]):
    """The toy adapter: body ``{"model", "n"}``; rejects ``seed``."""

    provider_name = "toy"
    stream_path = "/stream"
    models_path: ClassVar[str | None] = "/models"

    def encode_request(self, options: GenerateOptions, info: ModelInfo) -> bytes:
        if options.seed is not None:
            raise LlmError("UNSUPPORTED", "toy: seed is not supported", provider=self.provider)
        return json.dumps({"model": info.model, "n": len(options.messages)}).encode()

    def make_translator(self, options: GenerateOptions, request_id: str | None) -> ToyTranslator:
        return ToyTranslator(request_id)

    def classify_error(self, status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
        if body is not None and body.get("error") == "slow down":
            return ErrorDetails(code="RATE_LIMITED")
        return None


class ToyPlugin(HttpProviderPlugin[ToyConfig]):
    """The toy plugin."""

    Config = ToyConfig
    adapter = "kit_adapter:ToyAdapter"
