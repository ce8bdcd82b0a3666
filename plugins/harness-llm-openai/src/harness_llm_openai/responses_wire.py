"""Wire types of the OpenAI Responses API stream (``POST /responses``, ``stream: true``), as msgspec Structs.

Source: the streaming events reference https://platform.openai.com/docs/api-reference/responses-streaming
and the ``ResponseStreamEvent`` union of the official SDK (openai/openai-python:
``src/openai/types/responses/response_stream_event.py``). Every event is one SSE message whose
``event:`` line repeats the ``type`` inside its JSON ``data``; there is no ``[DONE]``.

One flat :class:`ResponseEvent` struct covers every event type this adapter reads (each field is
optional, unknown fields and unknown event types are ignored), so servers that add or omit fields
(vLLM, Ollama, OpenRouter, Azure) still decode, and a server-tool event (``web_search_call`` …)
never breaks the stream. :func:`decode_event` is the per-token hot path: one reusable typed
:class:`msgspec.json.Decoder`.
"""

from __future__ import annotations

from typing import Final

import msgspec

from harness_core.kit import decode_event as kit_decode_event
from harness_llm_openai.wire import WireError

__all__ = [
    "IncompleteDetails",
    "InputTokensDetails",
    "ItemPart",
    "OutputItem",
    "OutputTokensDetails",
    "ResponseError",
    "ResponseEvent",
    "ResponseObject",
    "ResponseUsage",
    "decode_event",
]


class ItemPart(msgspec.Struct, gc=False):
    """A part of a complete item: a message's ``content`` (``output_text`` with ``text``,
    ``refusal`` with ``refusal``), a reasoning item's ``summary`` (``summary_text``) or raw
    ``content`` (``reasoning_text``)."""

    type: str | None = None
    text: str | None = None
    refusal: str | None = None


class OutputItem(msgspec.Struct, gc=False):
    """An ``output`` item (``response.output_item.added`` / ``.done`` ``item``).

    ``type`` is ``message``, ``reasoning``, ``function_call`` or a server tool's item
    (``web_search_call``, ``file_search_call``, ``code_interpreter_call``, ``mcp_call`` …).
    ``id`` is the item id (``msg_…``, ``rs_…``, ``fc_…``; missing on some servers); a function
    call also has ``call_id`` (what a tool result references), ``name`` and the complete
    ``arguments`` text on ``.done``; a reasoning item has ``encrypted_content`` on ``.done`` when
    the request included ``reasoning.encrypted_content``. On ``.done``, ``content`` and
    ``summary`` hold the complete parts.
    """

    type: str | None = None
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    encrypted_content: str | None = None
    content: list[ItemPart] | None = None
    summary: list[ItemPart] | None = None


class InputTokensDetails(msgspec.Struct, gc=False):
    """``usage.input_tokens_details``: ``cached_tokens`` (a subset of ``input_tokens``)."""

    cached_tokens: int | None = None


class OutputTokensDetails(msgspec.Struct, gc=False):
    """``usage.output_tokens_details``: ``reasoning_tokens`` (a subset of ``output_tokens``)."""

    reasoning_tokens: int | None = None


class ResponseUsage(msgspec.Struct, gc=False):
    """``response.usage``: token counts, reported once, on the terminal event."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    input_tokens_details: InputTokensDetails | None = None
    output_tokens_details: OutputTokensDetails | None = None


class ResponseError(msgspec.Struct, gc=False):
    """``response.error`` of a failed response: ``code`` (``server_error``,
    ``rate_limit_exceeded``, ``invalid_prompt`` …) and ``message``."""

    code: str | int | None = None
    message: str | None = None


class IncompleteDetails(msgspec.Struct, gc=False):
    """``response.incomplete_details``: ``reason`` is ``max_output_tokens`` or ``content_filter``."""

    reason: str | None = None


class ResponseObject(msgspec.Struct, gc=False):
    """The ``response`` object carried by ``response.created`` / ``.in_progress`` / ``.completed``
    / ``.incomplete`` / ``.failed`` (only the fields the stream needs)."""

    id: str | None = None
    status: str | None = None
    model: str | None = None
    usage: ResponseUsage | None = None
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None


class ResponseEvent(msgspec.Struct, gc=False):
    """One ``data:`` payload of the stream (every event type in one struct).

    Fields by event type:
        ``response.output_item.added`` / ``.done``: ``output_index``, ``item``.
        ``response.output_text.delta`` / ``response.refusal.delta`` /
        ``response.reasoning_summary_text.delta`` / ``response.reasoning_text.delta`` /
        ``response.function_call_arguments.delta``: ``item_id``, ``output_index``,
        ``content_index`` or ``summary_index``, ``delta``.
        ``response.output_text.done``: ``item_id``, ``content_index``, the whole ``text``.
        ``response.function_call_arguments.done``: ``item_id``, the whole ``arguments``.
        ``response.completed`` / ``.incomplete`` / ``.failed``: ``response``.
        ``error``: ``code``, ``message``, ``param`` at the top level (the documented shape) or
        nested in an ``error`` object with a ``type`` (what OpenAI also sends).
    """

    type: str | None = None
    sequence_number: int | None = None
    response: ResponseObject | None = None
    output_index: int | None = None
    item: OutputItem | None = None
    item_id: str | None = None
    content_index: int | None = None
    summary_index: int | None = None
    delta: str | None = None
    text: str | None = None
    arguments: str | None = None
    code: str | int | None = None
    message: str | None = None
    param: str | None = None
    error: WireError | None = None


_decoder: Final = msgspec.json.Decoder(type=ResponseEvent)


def decode_event(
    data: str | bytes, *, incomplete: bool = False, provider: str | None = None, request_id: str | None = None
) -> ResponseEvent:
    """Decode one ``data:`` payload (:func:`harness_core.kit.decode_event`; ``incomplete``: the
    event was cut by the end of the body).

    Raises:
        LlmError: ``PROTOCOL`` when ``data`` is not JSON or not an event object (``NETWORK`` when
            ``incomplete``); the message quotes at most 200 characters of it.
    """
    return kit_decode_event(
        _decoder, data, "Responses stream event", incomplete=incomplete, provider=provider, request_id=request_id
    )
