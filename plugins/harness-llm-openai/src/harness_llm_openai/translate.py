"""The chunk translation state machine: OpenAI stream chunks in, harness stream chunks out.

Pure (no I/O): the adapter feeds it the decoded SSE events of one response and yields what it
returns. Rules (PROTOCOLS §1.5, §1.6, checklist 1-31 and 37-38; docs/stream-obligations.md):

- ``delta.reasoning_content`` / ``delta.reasoning`` (and Mistral ``thinking`` parts) form
  reasoning blocks, ``delta.content`` text blocks, ``delta.refusal`` its own text block; a switch
  between these segments closes the open block and opens a new index. Empty or null fields
  never open a block.
- Tool calls (``delta.tool_calls``, deprecated ``delta.function_call``) are tracked by ``id``
  (a new id is a new call, even at an index already used), then by ``index``, then as the last
  call; a call without an id gets a synthesized unique one. Arguments are passed through as raw
  text, never parsed; a call that ends with no arguments ends with ``"{}"``. Calls keyed by an
  index stay open until the stream ends (fragments of parallel calls may interleave); a call
  that can no longer be addressed (no index, or its index taken by a newer call) ends when the
  next call starts.
- ``usage`` (also on a chunk with choices, or in ``x_groq.usage``) is held, last wins, and
  emitted once after every block ended, before ``finish``; it is never invented.
- Terminal signal: ``data: [DONE]`` (also without its blank line at EOF), or EOF after a
  ``finish_reason``. ``[DONE]`` without a finish reason finishes as ``tool-calls`` when tool
  calls were seen, else ``stop``, with ``raw`` ``None``. EOF without either raises
  ``LlmError("NETWORK")`` (retryable), as does an empty stream.
- In-band errors (``data: {"error": …}``, top-level ``object: "error"``, ``choices[0].error``,
  ``finish_reason: "error"``, llama.cpp's legacy SSE ``error:`` field) close the open blocks,
  emit usage when known and end with ``finish{error}`` classified by the error's type/code
  (:func:`harness_llm_openai.errors.inband_code`), never by the HTTP status.
- Malformed JSON raises ``LlmError("PROTOCOL")`` quoting at most 200 characters.

Errors follow stream obligation 6 (docs/stream-obligations.md#6-errors-raise-or-finish-never-both):
transport/protocol faults raise, in-band faults finish.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import msgspec

from harness_core import ErrorCode, FinishKind, FinishReason, LlmError, StreamChunk, TokenUsage
from harness_core.kit import DEFAULT_ABORT_REASON, Block, BlockWriter, SSEEvent
from harness_llm_openai.errors import inband_code
from harness_llm_openai.wire import (
    ChatCompletionChunk,
    Delta,
    ToolCallFragment,
    WireError,
    WireUsage,
    decode_chunk,
)

__all__ = ["DEFAULT_ERROR_FINISH_REASONS", "ChunkTranslator", "map_finish_reason"]

DEFAULT_ERROR_FINISH_REASONS: Final[Mapping[str, ErrorCode]] = {"error": "SERVER"}
"""Raw finish reasons that mean an in-band error, with the code used when no error object
accompanies them (OpenRouter's ``finish_reason: "error"``)."""

_Segment = Literal["text", "reasoning", "refusal"]
_wire_error_decoder: Final = msgspec.json.Decoder(type=WireError)


def map_finish_reason(raw: str | None, *, has_tool_calls: bool) -> FinishKind:
    """Map a raw OpenAI ``finish_reason`` to a finish kind (PROTOCOLS §1.6).

    ``stop`` (or none) → ``tool-calls`` when a tool call was emitted, else ``stop``;
    ``tool_calls`` / ``function_call`` → ``tool-calls``, or ``stop`` when no call was emitted;
    ``length`` / ``model_length`` → ``length`` (never upgraded); ``content_filter`` →
    ``content-filter``; anything else → ``other`` (the caller keeps the raw string).
    """
    if raw is None or raw == "stop" or raw in ("tool_calls", "function_call"):
        return "tool-calls" if has_tool_calls else "stop"
    if raw in ("length", "model_length"):
        return "length"
    if raw == "content_filter":
        return "content-filter"
    return "other"


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class ChunkTranslator:
    """Translate one OpenAI-style response stream into harness :data:`StreamChunk` lists.

    Args:
        provider: the plugin name stamped on in-band failures (``"openai"``, ``"deepseek"``).
        id_factory: makes ids for tool calls the server sent without one (unique per call;
            default ``call_<24 hex>``).
        error_finish_reasons: raw finish reasons that mean an in-band error → the code to use
            when no error object says more (default: OpenRouter's ``error`` → SERVER).
        request_id: the response's request id, copied onto in-band failures.
        signed_reasoning: open reasoning blocks ``signed`` (a provider behind this wire signs
            its reasoning: any-llm's Anthropic family).

    A :class:`~harness_core.kit.StreamTranslator`: use :meth:`feed` per SSE event (or
    :meth:`feed_chunk` per decoded chunk), then :meth:`end_of_input` at the end of the body, or
    :meth:`abort`. :attr:`done` becomes true once ``finish`` has been returned; stop reading then.
    Blocks, held usage and the terminal step are the kit's :class:`~harness_core.kit.BlockWriter`.
    Subclasses refine :meth:`usage_from_wire` and :meth:`replay_state`.
    """

    def __init__(
        self,
        *,
        provider: str = "openai",
        id_factory: Callable[[], str] = _new_call_id,
        error_finish_reasons: Mapping[str, ErrorCode] = DEFAULT_ERROR_FINISH_REASONS,
        request_id: str | None = None,
        signed_reasoning: bool = False,
    ) -> None:
        self.provider = provider
        self.signed_reasoning = signed_reasoning
        self._writer = BlockWriter(provider, request_id=request_id, replay_state=self.replay_state)
        self._id_factory = id_factory
        self._error_reasons = error_finish_reasons
        self._segment: Block | None = None
        self._segment_kind: _Segment = "text"
        self._open_calls: list[Block] = []  # open tool calls; extra: the wire index (or None)
        self._by_id: dict[str, Block] = {}
        self._by_wire_index: dict[int, Block] = {}
        self._finish_raw: str | None = None
        self._finish_error: WireError | None = None

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
        """Translate one SSE event (``[DONE]``, a JSON chunk, or llama.cpp's ``error:`` field).

        An event cut by EOF (``event.incomplete``) counts when it is ``[DONE]`` or a complete
        JSON chunk; a cut JSON payload raises ``NETWORK`` (the body was truncated).

        Raises:
            LlmError: ``PROTOCOL`` for a malformed payload, ``NETWORK`` for a truncated one.
        """
        if self.done:
            return []
        legacy_error = event.extra.get("error")
        if legacy_error is not None:
            return self._error_finish(self._legacy_error(legacy_error), raw=None)
        data = event.data
        if not data:
            return []
        if data.startswith("[DONE]"):
            return self.feed_done()
        if event.incomplete:  # cut by EOF: a payload that does not decode is a truncated body
            return self.feed_chunk(
                decode_chunk(data, incomplete=True, provider=self.provider, request_id=self._writer.request_id)
            )
        return self.feed_chunk(decode_chunk(data, provider=self.provider, request_id=self._writer.request_id))

    def feed_chunk(self, chunk: ChatCompletionChunk) -> list[StreamChunk]:
        """Translate one decoded chunk; returns the chunks it produces (possibly none)."""
        if self.done:
            return []
        if chunk.error is not None:
            error = chunk.error if isinstance(chunk.error, WireError) else WireError(message=chunk.error)
            return self._error_finish(error, raw=None)
        if chunk.object == "error":
            return self._error_finish(WireError(message=chunk.message, type=chunk.type, code=chunk.code), raw=None)
        usage = chunk.usage
        if usage is None and chunk.x_groq is not None:
            usage = chunk.x_groq.usage
        if usage is not None and (usage.prompt_tokens is not None or usage.completion_tokens is not None):
            self._writer.usage = self.usage_from_wire(usage)
        out: list[StreamChunk] = []
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            if choice.delta is not None:
                self._delta(choice.delta, out)
            if choice.error is not None:
                self._finish_error = choice.error
            if choice.finish_reason is not None:
                self._finish_raw = choice.finish_reason
            break
        return out

    def feed_done(self) -> list[StreamChunk]:
        """``[DONE]`` arrived: close open blocks, emit held usage, then ``finish``."""
        if self.done:
            return []
        return self._terminal()

    def end_of_input(self) -> list[StreamChunk]:
        """The body ended. Completes the stream after a ``finish_reason``.

        Raises:
            LlmError: ``NETWORK`` when neither ``[DONE]`` nor a finish reason was seen
                (truncated or empty stream).
        """
        if self.done:
            return []
        if self._finish_raw is None:
            raise LlmError(
                "NETWORK",
                "stream ended before its terminal signal (no finish_reason and no [DONE])",
                provider=self.provider,
                request_id=self.request_id,
            )
        return self._terminal()

    def abort(self, reason: str = DEFAULT_ABORT_REASON) -> list[StreamChunk]:
        """The caller aborted: close open blocks, emit usage when known, ``finish{aborted}``
        carrying ``reason`` and :meth:`replay_state`."""
        return self._writer.abort(reason)

    def usage_from_wire(self, usage: WireUsage) -> TokenUsage:
        """Convert a wire ``usage`` object (``prompt_tokens_details.cached_tokens`` →
        ``cache_read_tokens``, ``completion_tokens_details.reasoning_tokens`` →
        ``reasoning_tokens``). Subclasses add provider counters."""
        prompt = usage.prompt_tokens_details
        completion = usage.completion_tokens_details
        return TokenUsage(
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            cache_read_tokens=prompt.cached_tokens if prompt is not None else None,
            reasoning_tokens=completion.reasoning_tokens if completion is not None else None,
        )

    def replay_state(self) -> dict[str, Any] | None:
        """What ``finish.replay_state`` carries (docs/stream-obligations.md#9-replay-state),
        asked once at the end, after every block closed: ``None`` here (Chat Completions has no
        provider state to replay); subclasses return theirs, on every finish, aborted included."""
        return None

    # ------------------------------------------------------------------ deltas

    def _delta(self, delta: Delta, out: list[StreamChunk]) -> None:
        reasoning = delta.reasoning_content or delta.reasoning
        if reasoning:
            self._segment_text("reasoning", reasoning, out)
        content = delta.content
        if isinstance(content, str):
            if content:
                self._segment_text("text", content, out)
        elif content:
            for part in content:
                if part.type == "thinking":
                    for sub in part.thinking or ():
                        if sub.text:
                            self._segment_text("reasoning", sub.text, out)
                elif part.text:
                    self._segment_text("text", part.text, out)
        if delta.refusal:
            self._segment_text("refusal", delta.refusal, out)
        if delta.tool_calls:
            for fragment in delta.tool_calls:
                self._tool_fragment(fragment, out)
        if delta.function_call is not None:
            self._tool_fragment(ToolCallFragment(index=0, function=delta.function_call), out)

    def _segment_text(self, kind: _Segment, text: str, out: list[StreamChunk]) -> None:
        segment = self._segment
        if segment is None or self._segment_kind != kind:
            self._close_segment(out)
            if kind == "reasoning":
                segment = self._writer.open("reasoning", out, signed=self.signed_reasoning)
            else:
                segment = self._writer.open("text", out)
            self._segment = segment
            self._segment_kind = kind
        out.append(self._writer.delta(segment, text))

    def _tool_fragment(self, fragment: ToolCallFragment, out: list[StreamChunk]) -> None:
        function = fragment.function
        name = function.name if function is not None else None
        arguments = function.arguments if function is not None else None
        call = self._find_call(fragment, name)
        new_name: str | None = None
        if call is None:
            call = self._open_call(fragment, name, out)
        elif name and call.name is None:
            call.name = new_name = name
        if arguments or new_name:
            out.append(self._writer.delta(call, arguments or "", name=new_name))

    def _find_call(self, fragment: ToolCallFragment, name: str | None) -> Block | None:
        """The open call a fragment continues, or ``None`` when it starts a new call."""
        if fragment.id:
            call = self._by_id.get(fragment.id)
            if call is not None and not call.open:
                raise LlmError(
                    "PROTOCOL",
                    f"tool call fragment for call {fragment.id!r} after that call ended",
                    provider=self.provider,
                )
            return call
        if fragment.index is not None:
            call = self._by_wire_index.get(fragment.index)
            if call is not None:
                return call
        last = self._open_calls[-1] if self._open_calls else None
        if last is None or last.extra is not None:
            return None
        if fragment.index is None and name and last.name:
            return None  # a second named call without id or index: a new call
        if fragment.index is not None:
            last.extra = fragment.index
            self._by_wire_index[fragment.index] = last
        return last

    def _open_call(self, fragment: ToolCallFragment, name: str | None, out: list[StreamChunk]) -> Block:
        self._close_segment(out)
        for older in list(self._open_calls):
            if older.extra is None or older.extra == fragment.index:
                self._end_call(older, out)
        call_id = fragment.id or self._id_factory()
        call = self._writer.open("tool-call", out, id=call_id, name=name or None, extra=fragment.index)
        self._open_calls.append(call)
        self._by_id[call_id] = call
        if fragment.index is not None:
            self._by_wire_index[fragment.index] = call
        return call

    # ------------------------------------------------------------------ closing

    def _close_segment(self, out: list[StreamChunk]) -> None:
        segment = self._segment
        if segment is not None:
            self._segment = None
            self._writer.close(segment, out)

    def _end_call(self, call: Block, out: list[StreamChunk]) -> None:
        self._open_calls.remove(call)
        self._writer.close(call, out)

    def _terminal(self) -> list[StreamChunk]:
        raw = self._finish_raw
        if raw is not None and (raw in self._error_reasons or self._finish_error is not None):
            error = self._finish_error or WireError(message=f"the provider ended the stream with finish_reason {raw!r}")
            return self._error_finish(error, raw=raw, default_code=self._error_reasons.get(raw))
        return self._writer.finish(
            FinishReason(map_finish_reason(raw, has_tool_calls=self._writer.tool_calls > 0), raw=raw)
        )

    def _error_finish(
        self, error: WireError, *, raw: str | None, default_code: ErrorCode | None = None
    ) -> list[StreamChunk]:
        code: ErrorCode = inband_code(error.type, error.code, error.message)
        if default_code is not None and error.type is None and error.code is None:
            code = default_code
        failure = LlmError(
            code,
            error.message or "the provider reported an error in the stream",
            provider=self.provider,
            provider_type=error.type,
            provider_code=None if error.code is None else str(error.code),
            request_id=self.request_id,
        ).to_failure()
        return self._writer.finish(FinishReason("error", raw=raw, failure=failure))

    @staticmethod
    def _legacy_error(text: str) -> WireError:
        """llama.cpp's legacy ``error: {json}`` SSE field (a bare string when not JSON)."""
        try:
            return _wire_error_decoder.decode(text)
        except msgspec.DecodeError:
            return WireError(message=text)
