"""Wire types of the Anthropic Messages streaming API, decoded with msgspec.

Source: https://docs.anthropic.com/en/api/messages-streaming and the SDK types
(anthropics/anthropic-sdk-python: ``src/anthropic/types/raw_*.py``). Summary in
``shared/wire/PROTOCOLS.md`` §2.

Every SSE ``data:`` payload decodes into one flat :class:`WireEvent` whose fields are the union of
what the event kinds carry. This keeps the decoder tolerant: unknown event types, unknown
content-block / delta types and unknown fields decode fine (unknown fields are skipped) and the
translator ignores what it does not know. One module-level :data:`EVENT_DECODER` is reused for
every event (no per-event decoder construction).
"""

from __future__ import annotations

import msgspec

__all__ = [
    "ERROR_BODY_DECODER",
    "EVENT_DECODER",
    "MODELS_DECODER",
    "WireBlock",
    "WireCacheCreation",
    "WireDelta",
    "WireError",
    "WireErrorBody",
    "WireEvent",
    "WireMessage",
    "WireModel",
    "WireModelList",
    "WireUsage",
]


class WireCacheCreation(msgspec.Struct, gc=False):
    """``usage.cache_creation``: the cache writes by TTL
    (https://docs.anthropic.com/en/api/messages#response-usage-cache-creation)."""

    ephemeral_5m_input_tokens: int | None = None
    ephemeral_1h_input_tokens: int | None = None


class WireUsage(msgspec.Struct, gc=False):
    """``usage`` of ``message_start.message`` (``Usage``) or ``message_delta`` (``MessageDeltaUsage``).

    Token counts; in ``message_delta`` they are cumulative (replace, never add). Anthropic's
    ``input_tokens`` excludes cache reads and writes; ``cache_creation`` splits the writes by TTL.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation: WireCacheCreation | None = None


class WireBlock(msgspec.Struct, gc=False):
    """``content_block_start.content_block``: one of ``text``, ``thinking``, ``redacted_thinking``,
    ``tool_use`` or a type we ignore (server tools, tool results …).

    ``input`` is kept raw (its JSON text; empty when absent) and used only when a proxy sends a
    tool call's whole input on the start event instead of ``input_json_delta`` pieces.
    """

    type: str = ""
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    id: str | None = None
    name: str | None = None
    input: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class WireMessage(msgspec.Struct, gc=False):
    """``message_start.message``: the response's id, model and initial usage.

    ``content`` is normally empty; a response continuing programmatic tool calling
    (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/programmatic-tool-calling)
    carries complete blocks there (a ``tool_use`` with its whole ``input`` and a ``caller``),
    with ``stop_reason`` already set and ``message_stop`` following directly.
    """

    id: str | None = None
    model: str | None = None
    usage: WireUsage | None = None
    content: list[WireBlock] = msgspec.field(default_factory=list)
    stop_reason: str | None = None


class WireDelta(msgspec.Struct, gc=False):
    """``content_block_delta.delta`` (``text_delta``, ``input_json_delta``, ``thinking_delta``,
    ``signature_delta`` …) and ``message_delta.delta`` (``stop_reason``, ``stop_sequence``)."""

    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None
    signature: str | None = None
    stop_reason: str | None = None


class WireError(msgspec.Struct, gc=False):
    """``error`` of an in-band ``error`` event or of an HTTP error body: ``type`` and ``message``."""

    type: str | None = None
    message: str | None = None


class WireEvent(msgspec.Struct, gc=False):
    """Any streaming event: ``type`` selects which of the other fields are meaningful.

    ``type`` may be missing when a proxy keeps only the SSE ``event:`` name; the translator
    then falls back to that name.
    """

    type: str | None = None
    index: int | None = None
    message: WireMessage | None = None
    content_block: WireBlock | None = None
    delta: WireDelta | None = None
    usage: WireUsage | None = None
    error: WireError | None = None
    request_id: str | None = None


class WireErrorBody(msgspec.Struct, gc=False):
    """A non-2xx response body: ``{"type": "error", "error": {"type", "message"}, "request_id"}``."""

    error: WireError | None = None
    request_id: str | None = None


class WireModel(msgspec.Struct, gc=False):
    """One entry of ``GET /v1/models`` (https://docs.anthropic.com/en/api/models-list)."""

    id: str
    display_name: str | None = None
    max_input_tokens: int | None = None
    max_tokens: int | None = None


class WireModelList(msgspec.Struct, gc=False):
    """A page of ``GET /v1/models``: ``data``, ``has_more``, ``last_id`` (cursor for ``after_id``)."""

    data: list[WireModel] = msgspec.field(default_factory=list)
    has_more: bool = False
    last_id: str | None = None


EVENT_DECODER: msgspec.json.Decoder[WireEvent] = msgspec.json.Decoder(WireEvent)
"""Decodes one SSE ``data:`` payload (``str`` or ``bytes``) into a :class:`WireEvent`."""

ERROR_BODY_DECODER: msgspec.json.Decoder[WireErrorBody] = msgspec.json.Decoder(WireErrorBody)
"""Decodes an HTTP error body into a :class:`WireErrorBody`."""

MODELS_DECODER: msgspec.json.Decoder[WireModelList] = msgspec.json.Decoder(WireModelList)
"""Decodes a ``GET /v1/models`` page into a :class:`WireModelList`."""
