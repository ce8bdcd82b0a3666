"""The translation state machine: Gemini SSE events in, :data:`StreamChunk` out.

Pure and synchronous (no I/O). Wire format: ``streamGenerateContent?alt=sse``
(https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent):
every event is a whole ``GenerateContentResponse``; there are no
event names and no ``[DONE]``: the stream ends when the connection closes after a chunk carrying
``finishReason``. Per event:

- ``usageMetadata`` replaces the previous one (cumulative; never summed).
- ``promptFeedback.blockReason`` (the prompt was blocked): ``finish{content-filter}`` with the
  block reason as ``raw``, no blocks.
- ``{"error": …}`` (in-band, after HTTP 200): open blocks closed, ``usage`` when known,
  ``finish{error}`` classified like an HTTP error body (:mod:`~harness_llm_gemini.errors`).
- the parts of ``candidates[0]``, in order: non-empty ``text`` continues the open text block or
  opens one (``thought: true`` → a reasoning block; a change of kind opens a new block);
  ``functionCall`` → a tool-call block: a complete call (``name`` + ``args``) is ``block-start``,
  one ``tool-call-delta`` with ``args`` serialised compactly (the wire carries an object, not
  text), ``block-end``; a Vertex streamed call (``willContinue`` / ``partialArgs``) streams its
  arguments (:class:`~harness_llm_gemini.partial_args.ArgumentsWriter`) until a part that does
  not continue (usually an empty ``functionCall: {}``). A missing call id is generated
  (``call_<responseId>_<n>``). Server-side tool parts (``executableCode``,
  ``codeExecutionResult`` …) produce no block.
- ``finishReason`` is remembered; the stream ends at :meth:`Translator.end_of_input`.

``thoughtSignature`` may sit on any part
(https://ai.google.dev/gemini-api/docs/thought-signatures). On a part that holds content of a
block (text, thought, function call) it is kept for that block; a second signature
for the same text block starts a new block, so each block carries at most one. A part that holds
no block content (an empty text with only a signature, a server-side tool part) is kept whole as
a *standalone part* placed after the last block; the open text block ends there (a generated
image, ``inlineData``, is kept only when it carries a signature). All of it goes
into ``finish.replay_state`` and the serializer replays it byte-exact on the next turn::

    {"v": 1, "provider": "gemini", "model": <requested model>,
     "blocks": {"<our index>": {"signature": "<base64>", "native_id": true}},
     "parts": [{"after": <our index of the block before, -1 = first>, "part": {<raw part>}}]}

``native_id`` marks a call id the provider sent (only those are sent back). Both keys are
omitted when empty; ``replay_state`` is ``None`` when there is nothing to replay.

Finish reasons: ``STOP`` → ``stop``, or ``tool-calls`` when the response called a function
(Gemini has no tool-call reason); ``MAX_TOKENS`` → ``length``; the safety family (``SAFETY``,
``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``, ``IMAGE_*``) →
``content-filter``; ``MALFORMED_FUNCTION_CALL`` → ``error`` (``SERVER``, retryable: a resample
may succeed), ``UNEXPECTED_TOOL_CALL`` / ``TOO_MANY_TOOL_CALLS`` → ``error`` (``BAD_REQUEST``);
anything else (``OTHER``, ``LANGUAGE``, unknown values) → ``other``. The raw value is kept.

Usage: ``input_tokens`` = ``promptTokenCount`` (includes cached tokens), ``output_tokens`` =
``candidatesTokenCount`` + ``thoughtsTokenCount``, ``reasoning_tokens`` = ``thoughtsTokenCount``,
``cache_read_tokens`` = ``cachedContentTokenCount``. No ``usage`` chunk when none was reported.

Faults raised as :class:`LlmError`: malformed JSON → ``PROTOCOL`` (``NETWORK`` when it is the
event cut by EOF); :meth:`Translator.end_of_input` before any ``finishReason`` → ``NETWORK``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec

from harness_core import ErrorCode, FinishKind, FinishReason, LlmError, StreamChunk, TokenUsage
from harness_core.kit import DEFAULT_ABORT_REASON, Block, BlockWriter, SSEEvent, decode_event
from harness_llm_gemini.errors import PROVIDER, classifier
from harness_llm_gemini.partial_args import ArgumentsWriter
from harness_llm_gemini.wire import (
    RESPONSE_DECODER,
    SERVER_TOOL_FIELDS,
    SIGNED_ONLY_FIELDS,
    WireFunctionCall,
    WirePart,
    WireResponse,
)

__all__ = ["FINISH_REASONS", "REPLAY_VERSION", "Translator"]

REPLAY_VERSION: Final = 1
"""Version tag ``v`` of the ``replay_state`` this adapter writes and reads."""

FINISH_REASONS: Final[dict[str, FinishKind]] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content-filter",
    "RECITATION": "content-filter",
    "BLOCKLIST": "content-filter",
    "PROHIBITED_CONTENT": "content-filter",
    "SPII": "content-filter",
    "IMAGE_SAFETY": "content-filter",
    "IMAGE_PROHIBITED_CONTENT": "content-filter",
    "IMAGE_RECITATION": "content-filter",
    "IMAGE_OTHER": "content-filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
}
"""Gemini ``finishReason`` → our finish kind; anything else is ``other`` (raw kept)."""

_ERROR_REASONS: Final[dict[str, ErrorCode]] = {
    "MALFORMED_FUNCTION_CALL": "SERVER",
    "UNEXPECTED_TOOL_CALL": "BAD_REQUEST",
    "TOO_MANY_TOOL_CALLS": "BAD_REQUEST",
}
_NOTHING: Final[tuple[StreamChunk, ...]] = ()
_SegmentKind = Literal["text", "reasoning"]


def _compact(args: Any) -> str:
    """``functionCall.args`` as JSON text: the only place the adapter serialises arguments."""
    if isinstance(args, str):
        return args or "{}"
    return json.dumps({} if args is None else args, ensure_ascii=False, separators=(",", ":"))


class Translator:
    """Translates one response's SSE events into chunks; create one per request.

    Args:
        model: the model id the request named; it tags ``replay_state`` (signatures are bound to
            the model, and the serializer compares against the model of the next request).
        request_id: the provider request id, attached to errors.

    Attributes:
        done: true once ``finish`` was produced (no further event produces anything).
        response_id / model_version: from the first event carrying them.

    Use :meth:`feed` for each event, :meth:`end_of_input` when the body ended, :meth:`abort`
    when the caller aborted.
    """

    __slots__ = (
        "_call",
        "_finish_reason",
        "_nonce",
        "_replay_blocks",
        "_replay_parts",
        "_segment",
        "_writer",
        "model",
        "model_version",
        "response_id",
    )

    def __init__(self, *, model: str | None = None, request_id: str | None = None) -> None:
        self.model = model
        self._writer = BlockWriter(
            PROVIDER, request_id=request_id, replay_state=lambda: self.replay_state, on_close=self._on_close
        )
        self.response_id: str | None = None
        self.model_version: str | None = None
        self._segment: Block | None = None  # the open text/reasoning block; extra: its signature
        self._call: Block | None = None  # the open streamed call; extra: its ArgumentsWriter
        self._finish_reason: str | None = None
        self._replay_blocks: dict[str, dict[str, Any]] = {}
        self._replay_parts: list[dict[str, Any]] = []
        self._nonce: str | None = None

    @property
    def done(self) -> bool:
        """True once ``finish`` was produced (no further event produces anything)."""
        return self._writer.done

    @property
    def request_id(self) -> str | None:
        """The provider request id, attached to errors."""
        return self._writer.request_id

    # ------------------------------------------------------------------ entry points

    def feed(self, event: SSEEvent) -> Sequence[StreamChunk]:
        """Translate one SSE event; returns the chunks it produces (often none).

        Raises:
            LlmError: ``PROTOCOL`` for a payload that is not a ``GenerateContentResponse``;
                ``NETWORK`` when that payload is the last event, cut by the end of the body.
        """
        if self.done or not event.data:
            return _NOTHING
        response = decode_event(
            RESPONSE_DECODER,
            event.data,
            "Gemini stream event",
            incomplete=event.incomplete,  # cut by EOF: a payload that does not decode is a truncated body
            provider=PROVIDER,
            request_id=self.request_id,
        )
        return self.handle(response)

    def handle(self, response: WireResponse) -> Sequence[StreamChunk]:
        """Translate one decoded ``GenerateContentResponse`` (see the module docstring)."""
        if self.done:
            return _NOTHING
        if self.response_id is None:
            self.response_id = response.responseId
        if self.model_version is None:
            self.model_version = response.modelVersion
        usage = response.usageMetadata
        if usage is not None:
            self._take_usage(
                usage.promptTokenCount,
                usage.candidatesTokenCount,
                usage.thoughtsTokenCount,
                usage.cachedContentTokenCount,
            )
        if response.error is not None:
            return self._inband_error(response)
        chunks: list[StreamChunk] = []
        for candidate in response.candidates or ():
            if candidate.index not in (None, 0):
                continue  # candidateCount > 1 is not requested; only the first candidate counts
            content = candidate.content
            if content is not None and content.parts:
                for part in content.parts:
                    self._part(part, chunks)
            if candidate.finishReason:
                self._finish_reason = candidate.finishReason
        feedback = response.promptFeedback
        if feedback is not None and feedback.blockReason and feedback.blockReason != "BLOCK_REASON_UNSPECIFIED":
            chunks.extend(self._end(FinishReason("content-filter", feedback.blockReason)))
        return chunks

    def end_of_input(self) -> Sequence[StreamChunk]:
        """The body ended: the terminal chunks when a ``finishReason`` was seen.

        Raises:
            LlmError: ``NETWORK`` when no ``finishReason`` arrived (the connection closed early;
                an empty body included).
        """
        if self.done:
            return _NOTHING
        raw = self._finish_reason
        if raw is None:
            raise self._eof_error("before a finishReason")
        kind = FINISH_REASONS.get(raw, "other")
        if kind == "stop" and self._writer.tool_calls:
            kind = "tool-calls"
        failure = None
        if kind == "error":
            failure = LlmError(
                _ERROR_REASONS[raw],
                f"Gemini ended the response with finishReason {raw}",
                provider=PROVIDER,
                provider_type=raw,
                request_id=self.request_id,
            ).to_failure()
        return self._end(FinishReason(kind, raw, failure))

    def abort(self, reason: str = DEFAULT_ABORT_REASON) -> Sequence[StreamChunk]:
        """End the stream because the caller aborted: open blocks are closed with what they hold,
        then ``usage`` (when reported) and ``finish{aborted}`` carrying ``reason`` and
        :attr:`replay_state`. Nothing when already done."""
        if self.done:
            return _NOTHING
        return self._writer.abort(reason)

    @property
    def usage(self) -> TokenUsage | None:
        """The last reported usage in our terms, or ``None`` when none was reported."""
        return self._writer.usage

    @property
    def replay_state(self) -> dict[str, Any] | None:
        """The ``replay_state`` of what was translated so far (module docstring), or ``None``."""
        if not self._replay_blocks and not self._replay_parts:
            return None
        state: dict[str, Any] = {"v": REPLAY_VERSION, "provider": PROVIDER, "model": self.model}
        if self._replay_blocks:
            state["blocks"] = {key: dict(value) for key, value in self._replay_blocks.items()}
        if self._replay_parts:
            state["parts"] = list(self._replay_parts)
        return state

    # ------------------------------------------------------------------ parts

    def _part(self, part: WirePart, chunks: list[StreamChunk]) -> None:
        signature = part.thoughtSignature or None
        call = part.functionCall
        if call is not None:
            self._function_call(call, signature, chunks)
            return
        text = part.text
        if text:
            self._text("reasoning" if part.thought else "text", text, signature, chunks)
            return
        raw: dict[str, Any] = {}
        for field in SERVER_TOOL_FIELDS if signature is None else SERVER_TOOL_FIELDS + SIGNED_ONLY_FIELDS:
            value = getattr(part, field)
            if value:
                raw[field] = msgspec.json.decode(value)
        if not raw and signature is None:
            return  # an empty text part, or a part kind we do not know, without a signature
        if not raw:
            raw["text"] = ""
            if part.thought:
                raw["thought"] = True
        if signature is not None:
            raw["thoughtSignature"] = signature
        self._close_open(chunks)
        self._replay_parts.append({"after": self._writer.next_index - 1, "part": raw})

    def _text(self, kind: _SegmentKind, text: str, signature: str | None, chunks: list[StreamChunk]) -> None:
        segment = self._segment
        if segment is None or segment.kind != kind or (signature is not None and segment.extra is not None):
            self._close_open(chunks)
            segment = self._segment = self._writer.open(kind, chunks)
        if signature is not None:
            segment.extra = signature
        chunks.append(self._writer.delta(segment, text))

    def _function_call(self, call: WireFunctionCall, signature: str | None, chunks: list[StreamChunk]) -> None:
        open_call = self._call
        if open_call is not None and call.name is None:
            if signature is not None:
                self._replay_blocks.setdefault(str(open_call.index), {}).setdefault("signature", signature)
            pieces = call.partialArgs or ()
            if pieces:
                piece = open_call.extra.add(pieces)
                if piece:
                    chunks.append(self._writer.delta(open_call, piece))
            if not call.willContinue and not any(p.willContinue for p in pieces):
                self._close_call(chunks)
            return
        self._close_open(chunks)
        if call.name is None:
            return  # arguments of no open call: nothing to attach them to
        index = self._writer.next_index
        call_id = call.id or self._generated_id(index)
        entry: dict[str, Any] = {}
        if signature is not None:
            entry["signature"] = signature
        if call.id:
            entry["native_id"] = True
        if entry:
            self._replay_blocks[str(index)] = entry
        if call.partialArgs is None and not call.willContinue:
            block = self._writer.open("tool-call", chunks, id=call_id, name=call.name)
            chunks.append(self._writer.delta(block, _compact(call.args)))
            self._writer.close(block, chunks)
            return
        self._call = self._writer.open("tool-call", chunks, id=call_id, name=call.name, extra=ArgumentsWriter())
        self._function_call(
            WireFunctionCall(partialArgs=call.partialArgs, willContinue=call.willContinue), None, chunks
        )

    # ------------------------------------------------------------------ helpers

    def _generated_id(self, index: int) -> str:
        if self.response_id:
            return f"call_{self.response_id}_{index}"
        if self._nonce is None:
            self._nonce = uuid.uuid4().hex[:16]
        return f"call_{self._nonce}_{index}"

    def _close_call(self, chunks: list[StreamChunk]) -> None:
        call = self._call
        if call is not None:
            self._call = None
            self._writer.close(call, chunks)

    def _close_open(self, chunks: list[StreamChunk]) -> None:
        """End the open text/reasoning block and the open streamed call, if any."""
        self._close_call(chunks)
        segment = self._segment
        if segment is not None:
            self._segment = None
            self._writer.close(segment, chunks)

    def _on_close(self, block: Block, chunks: list[StreamChunk]) -> None:
        """The writer closes ``block``: a streamed call gets the text completing its arguments
        as its last delta; a text/reasoning block's signature goes to ``replay_state``."""
        extra = block.extra
        if isinstance(extra, ArgumentsWriter):
            chunks.append(self._writer.delta(block, extra.close()))
        elif extra is not None:
            self._replay_blocks[str(block.index)] = {"signature": extra}

    def _take_usage(self, prompt: int | None, candidates: int | None, thoughts: int | None, cached: int | None) -> None:
        output = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
        if prompt is None and output is None:
            return  # metadata without counts (e.g. only trafficType): keep what we have
        self._writer.usage = TokenUsage(prompt, output, cache_read_tokens=cached, reasoning_tokens=thoughts)

    def _inband_error(self, response: WireResponse) -> Sequence[StreamChunk]:
        from harness_core.http import error_from_payload

        error = response.error
        assert error is not None
        payload = {"error": msgspec.to_builtins(error)}
        failure = error_from_payload(payload, provider=PROVIDER, classifier=classifier).to_failure()
        if self.request_id is not None and failure.request_id is None:
            failure = msgspec.structs.replace(failure, request_id=self.request_id)
        return self._end(FinishReason("error", error.status, failure))

    def _end(self, reason: FinishReason) -> list[StreamChunk]:
        self._segment = self._call = None
        return self._writer.finish(reason)

    def _eof_error(self, where: str) -> LlmError:
        return LlmError(
            "NETWORK",
            f"Gemini stream ended {where} (connection closed early)",
            provider=PROVIDER,
            request_id=self.request_id,
        )
