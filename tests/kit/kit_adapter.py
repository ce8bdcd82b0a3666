"""A tiny wire for the kit's tests: each SSE event's ``data`` is ``t:<text>``, ``x:<message>``
(an in-band error) or ``end`` (the terminal event). The translator is a real state machine
(one text block, usage never), so the stream loop is exercised end to end."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, Final

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
    StreamChunk,
    TextBlock,
    TextDelta,
)

TOY_URL: Final = "https://toy.example"


class ToyConfig(HttpProviderConfig, forbid_unknown_fields=True, kw_only=True):
    """The toy plugin's config."""

    base_url: str = TOY_URL
    api_key: Annotated[Secret | None, vendor_api_key("TOY_API_KEY", TOY_URL)] = None
    routes: list[str] = msgspec.field(default_factory=lambda: ["toy"])


class ToyTranslator:
    """The toy wire's translator."""

    def __init__(self, request_id: str | None) -> None:
        self.request_id = request_id
        self.done = False
        self._parts: list[str] | None = None

    def feed(self, event: SSEEvent) -> Sequence[StreamChunk]:
        if self.done:
            return ()
        data = event.data
        if data == "end":
            return self._end(FinishReason("stop"))
        if data.startswith("x:"):
            failure = LlmError("SERVER", data[2:], provider="toy", request_id=self.request_id).to_failure()
            return self._end(FinishReason("error", failure=failure))
        if not data.startswith("t:"):
            raise LlmError("PROTOCOL", f"toy: unexpected event {data[:50]!r}", provider="toy")
        out: list[StreamChunk] = []
        if self._parts is None:
            self._parts = []
            out.append(BlockStart(0, "text"))
        self._parts.append(data[2:])
        out.append(TextDelta(0, data[2:]))
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

    def _end(self, reason: FinishReason) -> Sequence[StreamChunk]:
        self.done = True
        out: list[StreamChunk] = []
        if self._parts is not None:
            out.append(BlockEnd(0, TextBlock("".join(self._parts))))
        out.append(Finish(reason))
        return out


class ToyAdapter(HttpAdapter[ToyConfig]):
    """The toy adapter: body ``{"model", "n"}``; rejects ``seed``."""

    provider_name = "toy"
    stream_path = "/stream"
    models_path = "/models"

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
