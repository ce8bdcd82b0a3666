"""Wire types of the Gemini ``streamGenerateContent`` API, decoded with msgspec.

Source: the REST reference of ``GenerateContentResponse``
(https://ai.google.dev/api/generate-content#generatecontentresponse) and the SDK types
(googleapis/python-genai: ``google/genai/types.py``); REST field names are camelCase.

Every SSE ``data:`` payload is one :class:`WireResponse` (a ``GenerateContentResponse``, or an
in-band ``{"error": …}``). Unknown fields are skipped, so new part kinds and metadata decode fine
and the translator ignores what it does not know. Server-side tool parts (``executableCode``,
``codeExecutionResult``, ``toolCall``, ``toolResponse``) are kept raw: the translator replays them
untouched on the next turn. One module-level decoder per shape is reused for every event.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "MODELS_DECODER",
    "RESPONSE_DECODER",
    "SERVER_TOOL_FIELDS",
    "SIGNED_ONLY_FIELDS",
    "WireCandidate",
    "WireContent",
    "WireError",
    "WireFunctionCall",
    "WireModel",
    "WireModelList",
    "WirePart",
    "WirePartialArg",
    "WirePromptFeedback",
    "WireResponse",
    "WireUsage",
]

SERVER_TOOL_FIELDS = ("executableCode", "codeExecutionResult", "toolCall", "toolResponse")
"""Part fields of tools the server runs itself (code execution, built-in tools): no block of
ours, but part of the model turn that must be sent back."""

SIGNED_ONLY_FIELDS = ("inlineData",)
"""Part fields kept for replay only when the part carries a ``thoughtSignature`` (a generated
image the next turn must see with its signature; unsigned ones are not kept: they can be large)."""


class WirePartialArg(msgspec.Struct, gc=False):
    """One piece of streamed function-call arguments (``PartialArg``, Vertex AI only).

    ``jsonPath`` names the leaf (``$.location``, ``$.items[0].name``); exactly one of the value
    fields is set (``nullValue`` is kept raw: present means JSON ``null``); ``willContinue``
    means more of this string value follows.
    """

    jsonPath: str = ""
    stringValue: str | None = None
    numberValue: int | float | None = None
    boolValue: bool | None = None
    nullValue: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    willContinue: bool | None = None


class WireFunctionCall(msgspec.Struct, gc=False):
    """``functionCall``: usually complete in one part (``name`` + ``args`` object, ``id`` often
    absent); with streamed arguments a part with ``name`` and ``willContinue``, then parts with
    ``partialArgs``, then an empty ``{}`` part that ends the call."""

    name: str | None = None
    args: Any = None
    id: str | None = None
    partialArgs: list[WirePartialArg] | None = None
    willContinue: bool | None = None


class WirePart(msgspec.Struct, gc=False):
    """One ``Part`` of a candidate's content. ``thoughtSignature`` (base64 text) may sit on any
    part, including an empty-text one."""

    text: str | None = None
    thought: bool | None = None
    thoughtSignature: str | None = None
    functionCall: WireFunctionCall | None = None
    executableCode: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    codeExecutionResult: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    toolCall: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    toolResponse: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    inlineData: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class WireContent(msgspec.Struct, gc=False):
    """``Content``: ``role`` (``model``) and its ``parts``."""

    parts: list[WirePart] | None = None
    role: str | None = None


class WireCandidate(msgspec.Struct, gc=False):
    """One ``Candidate``; the adapter reads the first (index 0) only."""

    content: WireContent | None = None
    finishReason: str | None = None
    finishMessage: str | None = None
    index: int | None = None


class WireUsage(msgspec.Struct, gc=False):
    """``usageMetadata`` (token counts, cumulative: the last one wins, never summed).

    ``promptTokenCount`` includes cached tokens; ``candidatesTokenCount`` excludes thoughts.
    """

    promptTokenCount: int | None = None
    candidatesTokenCount: int | None = None
    thoughtsTokenCount: int | None = None
    cachedContentTokenCount: int | None = None
    toolUsePromptTokenCount: int | None = None
    totalTokenCount: int | None = None


class WirePromptFeedback(msgspec.Struct, gc=False):
    """``promptFeedback``: ``blockReason`` set when the prompt itself was blocked."""

    blockReason: str | None = None
    blockReasonMessage: str | None = None


class WireError(msgspec.Struct, gc=False):
    """A ``google.rpc.Status`` error: ``code`` (HTTP status), ``message``, ``status``
    (``RESOURCE_EXHAUSTED`` …) and ``details``."""

    code: int | None = None
    message: str | None = None
    status: str | None = None
    details: list[Any] | None = None


class WireResponse(msgspec.Struct, gc=False):
    """One streamed ``GenerateContentResponse``, or an in-band ``{"error": …}``."""

    candidates: list[WireCandidate] | None = None
    usageMetadata: WireUsage | None = None
    promptFeedback: WirePromptFeedback | None = None
    modelVersion: str | None = None
    responseId: str | None = None
    error: WireError | None = None


class WireModel(msgspec.Struct, gc=False):
    """One entry of ``GET /models`` (https://ai.google.dev/api/models#Model)."""

    name: str
    inputTokenLimit: int | None = None
    outputTokenLimit: int | None = None
    supportedGenerationMethods: list[str] = msgspec.field(default_factory=list)
    thinking: bool | None = None


class WireModelList(msgspec.Struct, gc=False):
    """A page of ``GET /models``: ``models`` and ``nextPageToken`` (absent on the last page)."""

    models: list[WireModel] = msgspec.field(default_factory=list)
    nextPageToken: str | None = None


RESPONSE_DECODER: msgspec.json.Decoder[WireResponse] = msgspec.json.Decoder(WireResponse)
"""Decodes one SSE ``data:`` payload into a :class:`WireResponse`."""

MODELS_DECODER: msgspec.json.Decoder[WireModelList] = msgspec.json.Decoder(WireModelList)
"""Decodes a ``GET /models`` page into a :class:`WireModelList`."""
