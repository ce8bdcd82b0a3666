"""The Responses API translation state machine: Responses stream events in, harness stream chunks out.

Pure (no I/O): the adapter feeds it the decoded SSE events of one response
(https://platform.openai.com/docs/api-reference/responses-streaming) and yields what it returns.
Rules (the stream obligations: ``docs/stream-obligations.md``):

- Output items are tracked by their ``item_id`` and by ``output_index`` (a delta may arrive
  before its ``response.output_item.added``, and some servers omit item ids).
- ``message`` items: every ``output_text`` content part is a text block, a ``refusal`` its own
  text block; a block opens at its first non-empty delta (or at ``output_text.done`` when the
  server streamed no delta) and ends at its ``.done`` event or the item's
  ``response.output_item.done``.
- ``reasoning`` items: one reasoning block per item. Summary parts
  (``response.reasoning_summary_text.delta``) are joined with a blank line; servers that stream
  raw ``response.reasoning_text.delta`` instead (vLLM) fill the block with that, and an item never
  gets both (the first kind seen wins). Summaries that never arrive are not invented: a reasoning
  item without text but with state to replay (``encrypted_content``, or an id when the server
  stores responses) becomes an empty block. Blocks are ``signed`` when the translator was told
  their state is replayed (middleware must not alter them).
- ``function_call`` items: a tool-call block whose ``id`` is the item's ``call_id`` (what the tool
  result must reference), not its ``fc_…`` item id, by which the argument deltas are keyed.
  Arguments pass through as raw text; a call whose arguments were only sent whole
  (``.done``) gets them as one delta; a call with none ends with ``"{}"``.
- Parts a server sent only inside the complete item (``response.output_item.done``: a message's
  ``content``, a reasoning item's ``summary`` or raw ``content``) and never streamed become their
  blocks there; streamed parts are never repeated.
- Server-tool items (``web_search_call`` …) and unknown events are passed by.
- ``replay_state``: ``{"v": 1, "provider": <plugin name>, "api": "responses", "model":
  <requested model>, "reasoning": {"<our block index>": {"id", "encrypted_content"?,
  "summary"?: [part lengths] | "text"?: true}}}`` from each reasoning item's
  ``response.output_item.done``; ``None`` when there is no reasoning to replay.
- Terminal events: ``response.completed`` → ``tool-calls`` when a tool-call block was emitted,
  else ``stop``; ``response.incomplete`` → ``length`` (``max_output_tokens``),
  ``content-filter`` (``content_filter``) or ``other``; ``response.failed`` and ``error`` →
  ``finish{error}`` classified by the error's code (:func:`~harness_llm_openai.errors.inband_code`).
  Usage (``input_tokens`` with ``cached_tokens``, ``output_tokens`` with ``reasoning_tokens``)
  comes from the terminal event's ``response.usage`` only, and is never invented.
- EOF before a terminal event raises ``LlmError("NETWORK")``; a malformed payload
  ``LlmError("PROTOCOL")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal

from harness_core import ErrorCode, FinishKind, FinishReason, LlmError, StreamChunk, TokenUsage
from harness_core.kit import DEFAULT_ABORT_REASON, Block, BlockWriter, SSEEvent
from harness_llm_openai.errors import inband_code
from harness_llm_openai.responses_wire import OutputItem, ResponseEvent, ResponseObject, ResponseUsage, decode_event

__all__ = ["INCOMPLETE_REASONS", "REPLAY_API", "REPLAY_VERSION", "ResponsesTranslator", "usage_from_response"]

REPLAY_VERSION: Final = 1
"""Version tag ``v`` of the ``replay_state`` this translator writes and the serializer reads."""
REPLAY_API: Final = "responses"
"""The ``api`` tag of that ``replay_state`` (Chat Completions writes none)."""
INCOMPLETE_REASONS: Final[dict[str, FinishKind]] = {
    "max_output_tokens": "length",
    "content_filter": "content-filter",
}
"""``response.incomplete_details.reason`` → finish kind; anything else is ``other`` (raw kept)."""

_NOTHING: Final[list[StreamChunk]] = []
_SUMMARY_SEPARATOR: Final = "\n\n"


def usage_from_response(usage: ResponseUsage) -> TokenUsage:
    """Convert ``response.usage`` (``input_tokens_details.cached_tokens`` →
    ``cache_read_tokens``, ``output_tokens_details.reasoning_tokens`` → ``reasoning_tokens``)."""
    cached = usage.input_tokens_details
    reasoning = usage.output_tokens_details
    return TokenUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=cached.cached_tokens if cached is not None else None,
        reasoning_tokens=reasoning.reasoning_tokens if reasoning is not None else None,
    )


class _Item:
    """One output item: its wire identity and the blocks it produced."""

    __slots__ = (
        "call_id",
        "done",
        "kind",
        "name",
        "pending",
        "reasoning",
        "reasoning_source",
        "summary_index",
        "summary_lengths",
        "texts",
        "tool",
        "wire_id",
    )

    def __init__(self, kind: str | None, wire_id: str | None) -> None:
        self.kind = kind
        self.wire_id = wire_id
        self.call_id: str | None = None
        self.name: str | None = None
        self.done = False
        self.texts: dict[tuple[str, int], Block] = {}  # (text | refusal, content_index) → block
        self.reasoning: Block | None = None
        self.reasoning_source: str | None = None  # summary | text: the first kind seen wins
        self.summary_index: int | None = None
        self.summary_lengths: list[int] = []
        self.tool: Block | None = None
        self.pending: list[str] = []  # argument deltas that arrived before the call's id


class ResponsesTranslator:
    """Translate one Responses API stream into harness :data:`StreamChunk` lists.

    Args:
        provider: the plugin name stamped on failures and on ``replay_state``.
        model: the model id the request named; it tags ``replay_state`` (encrypted reasoning is
            bound to its model, so the serializer drops it for another one).
        signed_reasoning: mark reasoning blocks ``signed`` (their state is replayed on the next
            turn, so middleware must not alter them).
        stored: the request had ``store: true``: a reasoning item is replayable by its id alone.
        request_id: the response's request id, copied onto in-band failures.
        id_factory: ``(block index) -> id`` for a function call the server sent without
            ``call_id`` (default ``call_<index>``).

    A :class:`~harness_core.kit.StreamTranslator`: :meth:`feed` per SSE event, then
    :meth:`end_of_input` at the end of the body, or :meth:`abort`. :attr:`done` becomes true
    once ``finish`` has been returned. Blocks, held usage and the terminal step are the kit's
    :class:`~harness_core.kit.BlockWriter`.
    """

    def __init__(
        self,
        *,
        provider: str = "openai",
        model: str = "",
        signed_reasoning: bool = True,
        stored: bool = False,
        request_id: str | None = None,
        id_factory: Callable[[int], str] = lambda index: f"call_{index}",
    ) -> None:
        self.provider = provider
        self.model = model
        self.signed_reasoning = signed_reasoning
        self.stored = stored
        self._writer = BlockWriter(provider, request_id=request_id, replay_state=lambda: self.replay_state)
        self._id_factory = id_factory
        self._items: list[_Item] = []
        self._by_id: dict[str, _Item] = {}
        self._by_output: dict[int, _Item] = {}
        self._replay: dict[str, dict[str, Any]] = {}
        self.response_id: str | None = None

    @property
    def done(self) -> bool:
        """True once ``finish`` was returned; stop reading then."""
        return self._writer.done

    @property
    def request_id(self) -> str | None:
        """The response's request id, copied onto in-band and abort failures."""
        return self._writer.request_id

    # ------------------------------------------------------------------ entry points

    def feed(self, event: SSEEvent) -> list[StreamChunk]:
        """Translate one SSE event.

        An event cut by EOF (``event.incomplete``) counts when its JSON is complete; a cut JSON
        payload raises ``NETWORK`` (the body was truncated).

        Raises:
            LlmError: ``PROTOCOL`` for a malformed payload, ``NETWORK`` for a truncated one.
        """
        if self.done or not event.data or event.data.startswith("[DONE]"):
            return _NOTHING
        # cut by EOF (``incomplete``): a payload that does not decode is a truncated body (NETWORK)
        wire = decode_event(event.data, incomplete=event.incomplete, provider=self.provider, request_id=self.request_id)
        if wire.type is None:
            wire.type = event.event
        return self.feed_event(wire)

    def feed_event(self, event: ResponseEvent) -> list[StreamChunk]:
        """Translate one decoded event; returns the chunks it produces (possibly none)."""
        if self.done:
            return _NOTHING
        handler = _HANDLERS.get(event.type or "")
        if handler is None:
            return _NOTHING  # lifecycle, annotation and server-tool events: nothing to emit
        out: list[StreamChunk] = []
        handler(self, event, out)
        return out

    def end_of_input(self) -> list[StreamChunk]:
        """The body ended before a terminal event (the Responses API always sends one).

        Raises:
            LlmError: ``NETWORK`` (retryable), unless :attr:`done`.
        """
        if self.done:
            return _NOTHING
        raise LlmError(
            "NETWORK",
            "stream ended before its terminal event (response.completed / .incomplete / .failed)",
            provider=self.provider,
            request_id=self.request_id,
        )

    def abort(self, reason: str = DEFAULT_ABORT_REASON) -> list[StreamChunk]:
        """The caller aborted: close open blocks, emit usage when known, ``finish{aborted}``
        carrying ``reason`` and :attr:`replay_state`."""
        return self._writer.abort(reason)

    @property
    def replay_state(self) -> dict[str, Any] | None:
        """The ``replay_state`` of the reasoning items completed so far (module docstring), or
        ``None`` when there is none."""
        if not self._replay:
            return None
        return {
            "v": REPLAY_VERSION,
            "provider": self.provider,
            "api": REPLAY_API,
            "model": self.model,
            "reasoning": dict(self._replay),
        }

    # ------------------------------------------------------------------ items

    def _item(self, event: ResponseEvent, kind: str) -> _Item:
        """The item a delta belongs to (created when the delta came before ``output_item.added``)."""
        return self._lookup(event.item_id, event.output_index, kind)

    def _lookup(self, item_id: str | None, output_index: int | None, kind: str | None) -> _Item:
        """The item known by ``item_id``, else by ``output_index`` (it learns the id then), else a
        new one of ``kind``."""
        item = self._by_id.get(item_id) if item_id else None
        if item is None and output_index is not None:
            item = self._by_output.get(output_index)
        if item is None:
            item = _Item(kind, item_id)
            self._items.append(item)
            if output_index is not None:
                self._by_output[output_index] = item
        if item_id and item.wire_id is None:
            item.wire_id = item_id
        if item.wire_id:
            self._by_id[item.wire_id] = item
        return item

    def _item_added(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        wire = event.item or OutputItem()
        item = self._lookup(wire.id, event.output_index, wire.type)
        item.kind = wire.type or item.kind
        self._learn(item, wire)
        if item.kind == "function_call" and item.call_id and item.name:
            self._open_call(item, out)

    def _learn(self, item: _Item, wire: OutputItem) -> None:
        item.call_id = item.call_id or wire.call_id
        item.name = item.name or wire.name

    def _item_done(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        wire = event.item or OutputItem()
        item = self._lookup(wire.id, event.output_index, wire.type)
        item.kind = item.kind or wire.type
        self._learn(item, wire)
        if item.done:
            return
        item.done = True
        if item.kind == "function_call":
            block = self._open_call(item, out)
            if not block.parts and wire.arguments:
                self._append(block, wire.arguments, out)  # a server that sent the arguments only whole
            self._end(block, out)
        elif item.kind == "reasoning":
            self._reasoning_done(item, wire, out)
        elif item.kind == "message":
            self._message_parts(item, wire, out)
        for block in item.texts.values():
            self._end(block, out)

    # ------------------------------------------------------------------ text

    def _text_delta(self, event: ResponseEvent, out: list[StreamChunk], kind: str = "text") -> None:
        if not event.delta:
            return
        item = self._item(event, "message")
        key = (kind, event.content_index or 0)
        block = item.texts.get(key)
        if block is None:
            block = item.texts[key] = self._open("text", out)
        if block.open:
            self._append(block, event.delta, out)

    def _refusal_delta(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        self._text_delta(event, out, "refusal")

    def _text_done(self, event: ResponseEvent, out: list[StreamChunk], kind: str = "text") -> None:
        item = self._item(event, "message")
        key = (kind, event.content_index or 0)
        block = item.texts.get(key)
        if block is None and kind == "text" and event.text:
            block = item.texts[key] = self._open("text", out)
            self._append(block, event.text, out)  # a server that sent the text only whole
        if block is not None:
            self._end(block, out)

    def _refusal_done(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        self._text_done(event, out, "refusal")

    def _message_parts(self, item: _Item, wire: OutputItem, out: list[StreamChunk]) -> None:
        """The parts of a completed message that were never streamed (servers that send the
        text only whole): each non-empty one becomes its block."""
        for position, part in enumerate(wire.content or ()):
            kind = "refusal" if part.type == "refusal" else "text"
            text = part.refusal if kind == "refusal" else part.text
            if text and (kind, position) not in item.texts:
                block = item.texts[(kind, position)] = self._open("text", out)
                self._append(block, text, out)

    # ------------------------------------------------------------------ reasoning

    def _summary_delta(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        self._reasoning_delta(event, out, "summary")

    def _raw_reasoning_delta(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        self._reasoning_delta(event, out, "text")

    def _reasoning_delta(self, event: ResponseEvent, out: list[StreamChunk], source: str) -> None:
        if event.delta:
            self._add_reasoning(self._item(event, "reasoning"), source, event.summary_index or 0, event.delta, out)

    def _add_reasoning(self, item: _Item, source: str, part: int, text: str, out: list[StreamChunk]) -> None:
        """Add ``text`` from ``source`` (``summary`` part ``part``, or raw ``text``) to the item's
        reasoning block."""
        if item.reasoning_source is None:
            item.reasoning_source = source
        elif item.reasoning_source != source:
            return  # a server sending summary and raw text: keep one, never duplicate
        block = item.reasoning
        if block is None:
            block = item.reasoning = self._open("reasoning", out)
        if not block.open:
            return
        if source == "summary":
            if item.summary_index is None:
                item.summary_index = part
                item.summary_lengths.append(0)
            elif part != item.summary_index:
                item.summary_index = part
                item.summary_lengths.append(0)
                self._append(block, _SUMMARY_SEPARATOR, out)
            item.summary_lengths[-1] += len(text)
        self._append(block, text, out)

    def _reasoning_done(self, item: _Item, wire: OutputItem, out: list[StreamChunk]) -> None:
        if item.reasoning is None:  # nothing streamed: the complete item may still hold the text
            for position, part in enumerate(wire.summary or ()):
                if part.text:
                    self._add_reasoning(item, "summary", position, part.text, out)
            for part in wire.content or ():
                if part.type == "reasoning_text" and part.text:
                    self._add_reasoning(item, "text", 0, part.text, out)
        block = item.reasoning
        replayable = bool(item.wire_id) and (wire.encrypted_content is not None or self.stored)
        if block is None:
            if not replayable:
                return
            block = item.reasoning = self._open("reasoning", out)
        self._end(block, out)
        if not replayable:
            return
        entry: dict[str, Any] = {"id": item.wire_id}
        if wire.encrypted_content is not None:
            entry["encrypted_content"] = wire.encrypted_content
        if item.reasoning_source == "summary":
            entry["summary"] = list(item.summary_lengths)
        elif item.reasoning_source == "text":
            entry["text"] = True
        self._replay[str(block.index)] = entry

    # ------------------------------------------------------------------ function calls

    def _arguments_delta(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        if not event.delta:
            return
        item = self._item(event, "function_call")
        block = item.tool
        if block is None:
            item.pending.append(event.delta)  # before output_item.added: the call_id is not known yet
        elif block.open:
            self._append(block, event.delta, out)

    def _arguments_done(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        item = self._item(event, "function_call")
        if event.arguments and not item.pending and (item.tool is None or not item.tool.parts):
            if item.tool is None:
                item.pending.append(event.arguments)
            elif item.tool.open:
                self._append(item.tool, event.arguments, out)

    def _open_call(self, item: _Item, out: list[StreamChunk]) -> Block:
        """The call's block, opened (with the arguments held so far) once its name is known.

        Raises:
            LlmError: ``PROTOCOL`` when the call ended without a name.
        """
        block = item.tool
        if block is None:
            if not item.name:
                raise LlmError(
                    "PROTOCOL",
                    f"function call {item.wire_id or item.call_id or '(no id)'} ended without a name",
                    provider=self.provider,
                    request_id=self.request_id,
                )
            call_id = item.call_id or self._id_factory(self._writer.next_index)
            block = item.tool = self._writer.open("tool-call", out, id=call_id, name=item.name)
            pending, item.pending = item.pending, []
            for piece in pending:
                self._append(block, piece, out)
        return block

    # ------------------------------------------------------------------ blocks

    def _open(self, kind: Literal["text", "reasoning"], out: list[StreamChunk]) -> Block:
        return self._writer.open(kind, out, signed=kind == "reasoning" and self.signed_reasoning)

    def _append(self, block: Block, text: str, out: list[StreamChunk]) -> None:
        out.append(self._writer.delta(block, text))

    def _end(self, block: Block, out: list[StreamChunk]) -> None:
        self._writer.close(block, out)

    # ------------------------------------------------------------------ terminal events

    def _take_response(self, response: ResponseObject | None) -> ResponseObject:
        response = response or ResponseObject()
        if response.usage is not None:
            self._writer.usage = usage_from_response(response.usage)
        self.response_id = response.id or self.response_id
        return response

    def _open_pending_calls(self, out: list[StreamChunk]) -> None:
        """Open the calls whose arguments came but whose item never completed (a terminal event
        completes them; an abort drops what never started)."""
        for item in self._items:
            if item.kind == "function_call" and item.tool is None:
                self._open_call(item, out)

    def _completed(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        response = self._take_response(event.response)
        self._open_pending_calls(out)
        kind: FinishKind = "tool-calls" if self._writer.tool_calls else "stop"
        self._writer.finish(FinishReason(kind, raw=response.status or "completed"), out)

    def _incomplete(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        response = self._take_response(event.response)
        self._open_pending_calls(out)
        details = response.incomplete_details
        raw = details.reason if details is not None and details.reason else "incomplete"
        self._writer.finish(FinishReason(INCOMPLETE_REASONS.get(raw, "other"), raw=raw), out)

    def _failed(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        response = self._take_response(event.response)
        error = response.error
        code = error.code if error is not None else None
        message = error.message if error is not None else None
        out.extend(self._error(None, code, message or "the response failed", raw=response.status or "failed"))

    def _error_event(self, event: ResponseEvent, out: list[StreamChunk]) -> None:
        nested = event.error
        if nested is not None:
            error_type, code, message = nested.type, nested.code, nested.message
        else:
            error_type, code, message = None, event.code, event.message
        out.extend(self._error(error_type, code, message or "the provider reported an error in the stream", raw=None))

    def _error(
        self, error_type: str | None, code: str | int | None, message: str, *, raw: str | None
    ) -> list[StreamChunk]:
        classified: ErrorCode = inband_code(error_type, code, message)
        failure = LlmError(
            classified,
            message,
            provider=self.provider,
            provider_type=error_type,
            provider_code=None if code is None else str(code),
            request_id=self.request_id,
        ).to_failure()
        return self._writer.finish(FinishReason("error", raw=raw, failure=failure))


_Handler = Callable[[ResponsesTranslator, ResponseEvent, list[StreamChunk]], None]

_HANDLERS: Final[dict[str, _Handler]] = {
    "response.output_item.added": ResponsesTranslator._item_added,
    "response.output_item.done": ResponsesTranslator._item_done,
    "response.output_text.delta": ResponsesTranslator._text_delta,
    "response.output_text.done": ResponsesTranslator._text_done,
    "response.refusal.delta": ResponsesTranslator._refusal_delta,
    "response.refusal.done": ResponsesTranslator._refusal_done,
    "response.reasoning_summary_text.delta": ResponsesTranslator._summary_delta,
    "response.reasoning_text.delta": ResponsesTranslator._raw_reasoning_delta,
    "response.function_call_arguments.delta": ResponsesTranslator._arguments_delta,
    "response.function_call_arguments.done": ResponsesTranslator._arguments_done,
    "response.completed": ResponsesTranslator._completed,
    "response.incomplete": ResponsesTranslator._incomplete,
    "response.failed": ResponsesTranslator._failed,
    "error": ResponsesTranslator._error_event,
}
"""Event type → handler; every other type (``response.created``, ``response.in_progress``,
``response.content_part.*``, ``response.reasoning_summary_part.*``, annotations, server-tool
progress) produces nothing."""
