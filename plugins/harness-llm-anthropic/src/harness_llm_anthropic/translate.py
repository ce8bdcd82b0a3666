"""The event translation state machine: decoded Anthropic SSE events in, :data:`StreamChunk` out.

Pure and synchronous (no I/O), so it is tested on its own and reused by anything that holds
Anthropic events. Wire format: https://docs.anthropic.com/en/api/messages-streaming
(``shared/wire/PROTOCOLS.md`` §2.1-2.4). What it does, per event (dispatched on the JSON ``type``,
falling back to the SSE event name when a proxy dropped one of them):

- ``message_start``: keeps the response id, model and initial usage. Complete content blocks
  it carries (programmatic tool calling puts a whole ``tool_use`` there, with ``stop_reason:
  "tool_use"`` and ``message_stop`` next) are emitted at once, each as ``block-start``, its
  content as one delta, ``block-end``, and a ``stop_reason`` found there is kept like one from
  ``message_delta``. A tool call's ``caller`` (the code-execution tool that made it) is not
  kept: the vocabulary has no slot for it.
- ``content_block_start``: opens a block at our next index (0, 1, 2 … in order of appearance)
  for ``thinking`` / ``redacted_thinking`` (reasoning, ``signed=True``) and ``tool_use`` (tool
  call with id and name; a missing id is synthesized, a missing name is ``PROTOCOL``). A
  ``text`` block opens with its first non-empty piece, so an empty one never appears. Other
  block types (server tools, their results, future types) are ignored with their deltas and
  consume no index.
- ``content_block_delta``: ``text_delta`` / ``thinking_delta`` / ``input_json_delta`` become
  deltas (empty pieces are dropped); ``signature_delta`` is kept for the block's signature;
  other delta types are ignored.
- ``content_block_stop``: ``block-end`` with the complete block. A tool call whose input stayed
  empty ends with ``arguments == "{}"`` (emitted as a last ``tool-call-delta`` so the deltas
  concatenate to the block). A thinking block ends with its signature on the block
  (:class:`~harness_core.types.ReasoningSignature`, tagged ``anthropic`` and the requested
  model). Redacted thinking has no deltas: it ends as ``ReasoningBlock(text="", signed=True)``
  whose signature holds the ``data`` (``redacted=True``).
- ``message_delta``: stop reason; cumulative usage (replaces, never adds).
- ``message_stop``: any block still open is closed, then ``usage`` (when reported) and
  ``finish``. ``ping`` and unknown event types produce nothing.
- ``error`` (in-band, after HTTP 200): open blocks closed, ``usage`` when known,
  ``finish{error}`` classified by the error type (``overloaded_error`` → ``OVERLOADED``).

Faults raised as :class:`LlmError`: malformed JSON or impossible sequences → ``PROTOCOL``; an
event cut by EOF that does not decode, and :meth:`Translator.end_of_input` before
``message_stop`` → ``NETWORK``.

Usage follows docs/vocabulary.md: ``input_tokens`` = Anthropic's ``input_tokens`` + cache reads + cache
writes; cache reads/writes are also reported as ``cache_read_tokens`` / ``cache_write_tokens``
(the one-hour writes of ``cache_creation.ephemeral_1h_input_tokens`` as ``cache_write_1h_tokens``);
``output_tokens`` is the last reported (cumulative) value.

``replay_state`` (docs/stream-obligations.md#9-replay-state) repeats those signatures for the
consumers that carry only a stream's ``finish`` (the gateway's Responses dialect, conversations
stored before the typed signature): ``{"v": 1, "provider": "anthropic", "model": <requested
model>, "blocks": {"<our index>": {"signature": ...} | {"redacted": ...}}}``, byte-exact
signatures and redacted data, present only when the response had thinking blocks carrying them.
The serializer reads the block's signature first (:func:`harness_llm_anthropic.serialize.replay_blocks`).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from harness_core import FinishKind, FinishReason, LlmError, ReasoningSignature, StreamChunk, TokenUsage
from harness_core.kit import DEFAULT_ABORT_REASON, Block, BlockWriter, SSEEvent, decode_event
from harness_llm_anthropic.errors import PROVIDER, inband_error
from harness_llm_anthropic.wire import EVENT_DECODER, WireBlock, WireEvent, WireUsage

__all__ = ["REPLAY_VERSION", "STOP_REASONS", "Translator"]

REPLAY_VERSION: Final = 1
"""Version tag ``v`` of the ``replay_state`` this adapter writes and reads."""

STOP_REASONS: Final[dict[str, FinishKind]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content-filter",
}
"""Anthropic ``stop_reason`` → our finish kind; anything else is ``other`` (raw kept)."""

_NOTHING: Final[tuple[StreamChunk, ...]] = ()

_Kind = Literal["text", "thinking", "redacted", "tool"]


class _Wire:
    """What a block holds beyond the kit's :class:`~harness_core.kit.Block` (its ``extra``)."""

    __slots__ = ("kind", "replay", "start_input")

    def __init__(self, kind: _Kind, replay: str | None = None, start_input: bytes = b"") -> None:
        self.kind: _Kind = kind
        self.replay = replay  # thinking signature or redacted data, byte-exact
        self.start_input = start_input  # a tool_use block's input on its start event


_PENDING_TEXT: Final = Block(-1, "text", None, None, False, _Wire("text"))
"""Stands for a text block that has no non-empty piece yet (so no index, no ``block-start``)."""


class Translator:
    """Translates one response's events into chunks; create one per request.

    Args:
        model: the model id the request named; it tags ``replay_state`` and the blocks'
            signatures (signatures are bound to the model, and the next request compares against
            the model it names).
        provider: the plugin name the signatures are bound to (the adapter's ``provider``;
            default ``"anthropic"``), compared with the target route's plugin by
            :func:`harness_core.boundary.strip_replay`.

    Attributes:
        done: true once a terminal event (``message_stop`` or ``error``) produced ``finish``.
        response_id / response_model: from ``message_start`` (``None`` until then).
        request_id: the provider request id (set by the transport from the ``request-id``
            header), attached to in-band errors.

    A :class:`~harness_core.kit.StreamTranslator`: use :meth:`feed` for each SSE event (or
    :meth:`feed_data` with an event name and payload), then :meth:`end_of_input` at the end of
    the body; on abort use :meth:`abort`.
    """

    __slots__ = (
        "_blocks",
        "_cache_read",
        "_cache_write",
        "_cache_write_1h",
        "_input",
        "_output",
        "_replay",
        "_stop_reason",
        "_usage_seen",
        "_writer",
        "model",
        "provider",
        "response_id",
        "response_model",
    )

    def __init__(self, *, model: str | None = None, provider: str = PROVIDER) -> None:
        self.model = model
        self.provider = provider
        self._writer = BlockWriter(PROVIDER, replay_state=lambda: self.replay_state, on_close=self._on_close)
        self.response_id: str | None = None
        self.response_model: str | None = None
        # provider index -> open block (or _PENDING_TEXT), or None for an ignored block type
        self._blocks: dict[int, Block | None] = {}
        self._stop_reason: str | None = None
        self._usage_seen = False
        self._input: int | None = None
        self._output: int | None = None
        self._cache_read: int | None = None
        self._cache_write: int | None = None
        self._cache_write_1h: int | None = None
        self._replay: dict[str, dict[str, str]] = {}

    @property
    def done(self) -> bool:
        """True once a terminal event (``message_stop`` or ``error``) or :meth:`abort` produced
        ``finish``."""
        return self._writer.done

    @property
    def request_id(self) -> str | None:
        """The provider request id, attached to in-band errors and the abort failure."""
        return self._writer.request_id

    @request_id.setter
    def request_id(self, value: str | None) -> None:
        self._writer.request_id = value

    # ------------------------------------------------------------------ entry points

    def feed(self, event: SSEEvent) -> tuple[StreamChunk, ...]:
        """Translate one server-sent event (see :meth:`feed_data`).

        Raises:
            LlmError: as :meth:`feed_data` (``NETWORK`` when the event was cut by EOF,
                ``event.incomplete``, and does not decode: the body was truncated).
        """
        return self.feed_data(event.event, event.data, incomplete=event.incomplete)

    def feed_data(self, event_name: str, data: str | bytes, *, incomplete: bool = False) -> tuple[StreamChunk, ...]:
        """Translate one SSE event (its ``event:`` name and ``data:`` text; ``incomplete``: it
        was cut by the end of the body).

        Returns the chunks it produces (often none). Raises ``LlmError("PROTOCOL")`` for a
        payload that is not a JSON object of the expected shape, or an impossible sequence;
        ``LlmError("NETWORK")`` for a cut payload that does not decode (a truncated body).
        Events after :attr:`done` produce nothing.
        """
        if self.done:
            return _NOTHING
        event = decode_event(
            EVENT_DECODER,
            data,
            "Anthropic event",
            event=event_name,
            incomplete=incomplete,
            provider=PROVIDER,
            request_id=self.request_id,
        )
        if event.type == "content_block_delta":
            return self._delta(event)
        return self.handle(event, event_name)

    def handle(self, event: WireEvent, event_name: str = "") -> tuple[StreamChunk, ...]:
        """Translate one decoded event; ``event_name`` is used when ``event.type`` is missing."""
        if self.done:
            return _NOTHING
        kind = event.type or event_name
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_stop":
            return self._stop(event)
        if kind == "message_delta":
            self._message_delta(event)
            return _NOTHING
        if kind == "message_start":
            return self._message_start(event)
        if kind == "message_stop":
            kind_, raw = self._finish_kind()
            return self._end(FinishReason(kind_, raw))
        if kind == "error":
            failure = inband_error(event.error, event.request_id or self.request_id).to_failure()
            return self._end(FinishReason("error", event.error.type if event.error else None, failure))
        return _NOTHING  # ping and event types added after this adapter was written

    def abort(self, reason: str = DEFAULT_ABORT_REASON) -> tuple[StreamChunk, ...]:
        """End the stream because ``options.abort`` fired: open blocks are closed with what they
        hold, then ``usage`` (when reported) and ``finish{aborted}``. Nothing when already done."""
        if self.done:
            return _NOTHING
        self._writer.usage = self.usage
        return tuple(self._writer.abort(reason))

    def end_of_input(self) -> tuple[StreamChunk, ...]:
        """The body ended: nothing more after ``message_stop`` (or ``error``).

        Raises:
            LlmError: ``NETWORK`` (retryable) when the stream ended before ``message_stop``.
        """
        if self.done:
            return _NOTHING
        raise self._eof_error()

    def _eof_error(self) -> LlmError:
        return LlmError(
            "NETWORK",
            "Anthropic stream ended before message_stop (connection closed early)",
            provider=PROVIDER,
            request_id=self.request_id,
        )

    @property
    def usage(self) -> TokenUsage | None:
        """The usage reported so far in docs/vocabulary.md terms, or ``None`` when none was reported."""
        if not self._usage_seen:
            return None
        total = self._input
        if total is not None:
            total += (self._cache_read or 0) + (self._cache_write or 0)
        return TokenUsage(
            total,
            self._output,
            cache_read_tokens=self._cache_read,
            cache_write_tokens=self._cache_write,
            cache_write_1h_tokens=self._cache_write_1h,
        )

    @property
    def replay_state(self) -> dict[str, Any] | None:
        """The ``replay_state`` of the blocks ended so far, or ``None`` when there is nothing to
        replay (no signed thinking)."""
        if not self._replay:
            return None
        return {"v": REPLAY_VERSION, "provider": PROVIDER, "model": self.model, "blocks": dict(self._replay)}

    # ------------------------------------------------------------------ events

    def _message_start(self, event: WireEvent) -> tuple[StreamChunk, ...]:
        message = event.message
        if message is None:
            return _NOTHING
        self.response_id = message.id
        self.response_model = message.model
        if message.usage is not None:
            self._take_usage(message.usage)
        if message.stop_reason is not None:
            self._stop_reason = message.stop_reason
        if not message.content:
            return _NOTHING
        chunks: list[StreamChunk] = []
        for provider_index, content in enumerate(message.content):
            chunks.extend(self._open(provider_index, content))
            block = self._blocks.pop(provider_index)
            if block is not None and block is not _PENDING_TEXT:  # an empty text block never opened
                self._writer.close(block, chunks)
        return tuple(chunks)

    def _message_delta(self, event: WireEvent) -> None:
        if event.delta is not None and event.delta.stop_reason is not None:
            self._stop_reason = event.delta.stop_reason
        if event.usage is not None:
            self._take_usage(event.usage)

    def _take_usage(self, usage: WireUsage) -> None:
        # cumulative counts: a reported field replaces the previous value, a missing one keeps it
        self._usage_seen = True
        if usage.input_tokens is not None:
            self._input = usage.input_tokens
        if usage.output_tokens is not None:
            self._output = usage.output_tokens
        if usage.cache_read_input_tokens is not None:
            self._cache_read = usage.cache_read_input_tokens
        if usage.cache_creation_input_tokens is not None:
            self._cache_write = usage.cache_creation_input_tokens
        if usage.cache_creation is not None and usage.cache_creation.ephemeral_1h_input_tokens is not None:
            self._cache_write_1h = usage.cache_creation.ephemeral_1h_input_tokens

    def _start(self, event: WireEvent) -> tuple[StreamChunk, ...]:
        provider_index = self._index_of(event)
        if provider_index in self._blocks:
            raise self._protocol(f"content_block_start for index {provider_index}, which is already open")
        return self._open(provider_index, event.content_block)

    def _open(self, provider_index: int, content: WireBlock | None) -> tuple[StreamChunk, ...]:
        """Open the block ``content`` at ``provider_index`` (from ``content_block_start`` or a
        complete block of ``message_start``) and return its first chunks."""
        block_type = content.type if content is not None else ""
        if content is None or block_type not in ("text", "thinking", "redacted_thinking", "tool_use"):
            self._blocks[provider_index] = None  # ignored type: no index consumed
            return _NOTHING
        if block_type == "text":
            # opened by its first non-empty piece: an empty text block never opens (docs/stream-obligations.md#1-blocks)
            self._blocks[provider_index] = _PENDING_TEXT
            return self._text(provider_index, _PENDING_TEXT, content.text)
        out: list[StreamChunk] = []
        if block_type == "tool_use":
            if not content.name:
                raise self._protocol(f"tool_use block {provider_index} without a name")
            call_id = content.id or f"toolu_harness_{self._writer.next_index}"
            wire = _Wire("tool", start_input=bytes(content.input))
            self._blocks[provider_index] = self._writer.open(
                "tool-call", out, id=call_id, name=content.name, extra=wire
            )
            return tuple(out)
        if block_type == "thinking":
            wire = _Wire("thinking", content.signature or None)
            block = self._blocks[provider_index] = self._writer.open("reasoning", out, signed=True, extra=wire)
            if content.thinking:
                out.append(self._writer.delta(block, content.thinking))
            return tuple(out)
        wire = _Wire("redacted", content.data or None)
        self._blocks[provider_index] = self._writer.open("reasoning", out, signed=True, extra=wire)
        return tuple(out)

    def _delta(self, event: WireEvent) -> tuple[StreamChunk, ...]:
        # the hot path: one call per token piece, so the checks are inlined
        try:
            block = self._blocks[event.index]  # type: ignore[index]
        except KeyError:
            raise self._protocol(f"content_block_delta for index {event.index}, which is not open") from None
        delta = event.delta
        if block is None or delta is None:
            return _NOTHING
        delta_type = delta.type
        kind = block.kind
        if delta_type == "text_delta":
            if kind != "text":
                raise self._mismatch(delta_type, block)
            return self._text(event.index, block, delta.text)  # type: ignore[arg-type]
        if delta_type == "input_json_delta":
            if kind != "tool-call":
                raise self._mismatch(delta_type, block)
            piece = delta.partial_json
            if not piece:
                return _NOTHING
            return (self._writer.delta(block, piece),)
        if delta_type == "thinking_delta":
            if block.extra.kind != "thinking":
                raise self._mismatch(delta_type, block)
            piece = delta.thinking
            if not piece:
                return _NOTHING
            return (self._writer.delta(block, piece),)
        if delta_type == "signature_delta":
            wire = block.extra
            if wire.kind != "thinking":
                raise self._mismatch(delta_type, block)
            if delta.signature:
                wire.replay = (wire.replay or "") + delta.signature
        return _NOTHING  # citations_delta and delta types added later

    def _stop(self, event: WireEvent) -> tuple[StreamChunk, ...]:
        provider_index = self._index_of(event)
        if provider_index not in self._blocks:
            raise self._protocol(f"content_block_stop for index {provider_index}, which is not open")
        block = self._blocks.pop(provider_index)
        if block is None or block is _PENDING_TEXT:
            return _NOTHING
        out: list[StreamChunk] = []
        self._writer.close(block, out)
        return tuple(out)

    # ------------------------------------------------------------------ helpers

    def _index_of(self, event: WireEvent) -> int:
        if event.index is None:
            raise self._protocol(f"{event.type or 'content block'} event without an index")
        return event.index

    def _mismatch(self, delta_type: str, block: Block) -> LlmError:
        kind: _Kind = block.extra.kind
        return self._protocol(f"{delta_type} inside a {kind} block")

    def _text(self, provider_index: int, block: Block, piece: str | None) -> tuple[StreamChunk, ...]:
        """A text piece: the delta, preceded by the block-start when it is the block's first."""
        if not piece:
            return _NOTHING
        if block is not _PENDING_TEXT:
            return (self._writer.delta(block, piece),)
        out: list[StreamChunk] = []
        block = self._blocks[provider_index] = self._writer.open("text", out, extra=_PENDING_TEXT.extra)
        out.append(self._writer.delta(block, piece))
        return tuple(out)

    def _on_close(self, block: Block, out: list[StreamChunk]) -> None:
        """The writer closes ``block``: a tool call without ``input_json_delta`` gets the start
        event's input (a proxy may send it whole there) or ``"{}"`` as its one delta; a signed
        thinking block's signature or a redacted block's data becomes the block's
        :class:`~harness_core.types.ReasoningSignature` and goes to ``replay_state``."""
        wire: _Wire = block.extra
        if wire.kind == "tool":
            if not block.parts:
                arguments = "{}"  # docs/stream-obligations.md#1-blocks
                if wire.start_input.strip() not in (b"{}", b"", b"null"):
                    arguments = wire.start_input.decode("utf-8")
                out.append(self._writer.delta(block, arguments))
        elif wire.replay is not None:
            redacted = wire.kind == "redacted"
            block.signature = ReasoningSignature(self.provider, self.model, wire.replay, redacted=redacted)
            self._replay[str(block.index)] = {"redacted" if redacted else "signature": wire.replay}

    def _finish_kind(self) -> tuple[FinishKind, str | None]:
        raw = self._stop_reason
        kind: FinishKind = STOP_REASONS.get(raw, "other") if raw is not None else "other"
        tool_calls = self._writer.tool_calls > 0
        if tool_calls and kind in ("stop", "other"):
            return "tool-calls", raw
        if kind == "tool-calls" and not tool_calls:
            return "stop", raw
        return kind, raw

    def _end(self, reason: FinishReason) -> tuple[StreamChunk, ...]:
        self._blocks.clear()
        self._writer.usage = self.usage
        return tuple(self._writer.finish(reason))

    def _protocol(self, message: str) -> LlmError:
        return LlmError("PROTOCOL", f"Anthropic stream: {message}", provider=PROVIDER, request_id=self.request_id)
