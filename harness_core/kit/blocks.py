"""The block writer every translator shares: block numbering, open/delta/close, held usage, the
terminal step, and "decode one event or raise ``PROTOCOL`` quoting it".

A translator keeps only its wire's meaning (which event opens which block, how a finish reason
maps); :class:`BlockWriter` owns what the stream obligations make the same for every wire
(``docs/stream-obligations.md``): indices 0, 1, 2 … in order of ``block-start``, ``block-end``
carrying the complete block (a tool call with no arguments ends with ``"{}"``), the open blocks
closed in index order before the end, ``usage`` at most once after every block ended and only
when the provider reported it, exactly one ``finish`` last carrying ``replay_state``, and
``finish{aborted}`` carrying the abort reason (``docs/stream-obligations.md#7-abort-and-cancellation``).
Pure and synchronous (no I/O), like the translators that use it. How to use it:
``docs/writing-an-adapter.md#the-block-writer-blockwriter``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from harness_core._lazy import moved_names
from harness_core.abort import DEFAULT_ABORT_REASON
from harness_core.errors import LlmError
from harness_core.errors import snippet as _snippet
from harness_core.types import (
    BlockEnd,
    BlockStart,
    BlockType,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    ReasoningSignature,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)

__all__ = ["Block", "BlockWriter", "decode_event"]

T = TypeVar("T")


def decode_event(
    decoder: msgspec.json.Decoder[T],
    data: str | bytes,
    what: str,
    *,
    event: str | None = None,
    incomplete: bool = False,
    provider: str | None = None,
    request_id: str | None = None,
) -> T:
    """Decode one event payload with ``decoder`` (a typed, reusable msgspec JSON decoder).

    Args:
        what: names the payload in the error message (``"Gemini stream event"``).
        event: the SSE event name, quoted after ``what`` when given (a plain argument, so the
            hot path formats nothing).
        incomplete: the event was cut by the end of the body (``SSEEvent.incomplete``): a
            payload that does not decode is then a truncated body, not a malformed one.
        provider / request_id: stamped on the error.

    Raises:
        LlmError: ``PROTOCOL`` when ``data`` is not JSON or not of the decoder's type; the
            message is ``malformed <what> [<event>] (<why>): <snippet>`` quoting
            :func:`~harness_core.errors.snippet` of it. ``NETWORK`` instead when ``incomplete``:
            ``<what> [<event>] cut by the end of the stream (connection closed early): <snippet>``.
    """
    try:
        return decoder.decode(data)
    except msgspec.DecodeError as exc:
        name = what if event is None else f"{what} {event!r}"
        if incomplete:
            message = f"{name} cut by the end of the stream (connection closed early): {_snippet(data)!r}"
            raise LlmError("NETWORK", message, provider=provider, request_id=request_id) from exc
        raise LlmError(
            "PROTOCOL", f"malformed {name} ({exc}): {_snippet(data)!r}", provider=provider, request_id=request_id
        ) from exc


class Block:
    """One block a :class:`BlockWriter` opened.

    Attributes:
        index: our block index (0, 1, 2 … in order of opening).
        kind: ``text``, ``reasoning`` or ``tool-call``.
        id / name: a tool call's id and name (``name`` may be learnt after the start; ``None``
            ends as ``""``).
        signed: a reasoning block the provider signs (``block-start`` and ``block-end`` say so).
        parts: the text (or argument) pieces so far; :attr:`text` joins them.
        open: false once its ``block-end`` was written.
        extra: the translator's own data for this block (a signature, an arguments writer …).
        signature: a reasoning block's :class:`~harness_core.types.ReasoningSignature`, set by the
            translator (in ``on_close`` at the latest) and carried by its ``block-end``; ``None``
            by default.
    """

    __slots__ = ("extra", "id", "index", "kind", "name", "open", "parts", "signature", "signed")

    def __init__(self, index: int, kind: BlockType, id: str | None, name: str | None, signed: bool, extra: Any) -> None:
        self.index = index
        self.kind: BlockType = kind
        self.id = id
        self.name = name
        self.signed = signed
        self.extra: Any = extra
        self.parts: list[str] = []
        self.open = True
        self.signature: ReasoningSignature | None = None

    @property
    def text(self) -> str:
        """The pieces so far, joined."""
        return "".join(self.parts)


class BlockWriter:
    """Writes one response's blocks and its terminal step (create one per translator).

    Args:
        provider: the plugin name stamped on the ``finish{aborted}`` failure.
        request_id: the response's request id, stamped there too (settable later: some
            transports learn it after the translator was made).
        replay_state: called once at the end, after every block closed, for
            ``finish.replay_state`` (``None`` or no callable: no replay state). Every ``finish``
            the writer writes, aborted ones included, carries it.
        on_close: ``(block, out)`` called just before a block's ``block-end`` is written
            (by :meth:`close` or the terminal step): the translator may append a last delta with
            :meth:`delta` or record the block's replay state.

    Attributes:
        usage: the held usage (last assignment wins), written once before ``finish``.
        done: true once ``finish`` was written; :meth:`finish` and :meth:`abort` write nothing
            then.
        tool_calls: how many tool-call blocks were opened (``tool-calls`` is the finish kind
            if and only if one was, ``docs/stream-obligations.md#4-tool-call-finishes``).
    """

    __slots__ = (
        "_next_index",
        "_on_close",
        "_open",
        "_replay_state",
        "done",
        "provider",
        "request_id",
        "tool_calls",
        "usage",
    )

    def __init__(
        self,
        provider: str,
        *,
        request_id: str | None = None,
        replay_state: Callable[[], dict[str, Any] | None] | None = None,
        on_close: Callable[[Block, list[StreamChunk]], None] | None = None,
    ) -> None:
        self.provider = provider
        self.request_id = request_id
        self._replay_state = replay_state
        self._on_close = on_close
        self._next_index = 0
        self._open: dict[int, Block] = {}  # index → open block; insertion order is index order
        self.usage: TokenUsage | None = None
        self.tool_calls = 0
        self.done = False

    @property
    def next_index(self) -> int:
        """The index the next opened block gets (how many blocks were opened so far)."""
        return self._next_index

    def open(
        self,
        kind: BlockType,
        out: list[StreamChunk],
        *,
        id: str | None = None,
        name: str | None = None,
        signed: bool = False,
        extra: Any = None,
    ) -> Block:
        """Open a block at the next index and append its ``block-start`` to ``out``."""
        index = self._next_index
        self._next_index = index + 1
        block = Block(index, kind, id, name, signed, extra)
        self._open[index] = block
        if kind == "tool-call":
            self.tool_calls += 1
            out.append(BlockStart(index, kind, id=id, name=name))
        else:
            out.append(BlockStart(index, kind, signed=signed))
        return block

    @staticmethod
    def delta(block: Block, piece: str, *, name: str | None = None) -> StreamChunk:
        """Record ``piece`` in ``block`` and return its delta chunk (``text-delta``,
        ``reasoning-delta`` or ``tool-call-delta``; ``name`` is a tool call's name learnt with
        this piece). The caller drops empty pieces where its wire wants that."""
        block.parts.append(piece)
        kind = block.kind
        if kind == "text":
            return TextDelta(block.index, piece)
        if kind == "reasoning":
            return ReasoningDelta(block.index, piece)
        return ToolCallDelta(block.index, block.id or "", piece, name=name)

    def close(self, block: Block, out: list[StreamChunk]) -> None:
        """Append ``block``'s ``block-end`` with the complete block (``on_close`` first); nothing
        when it is already closed."""
        if not block.open:
            return
        if self._on_close is not None:
            self._on_close(block, out)
        block.open = False
        del self._open[block.index]
        text = "".join(block.parts)
        kind = block.kind
        if kind == "text":
            out.append(BlockEnd(block.index, TextBlock(text)))
        elif kind == "reasoning":
            out.append(BlockEnd(block.index, ReasoningBlock(text, signed=block.signed, signature=block.signature)))
        else:
            out.append(BlockEnd(block.index, ToolCallBlock(block.id or "", block.name or "", text or "{}")))

    def close_open(self, out: list[StreamChunk]) -> None:
        """Close every open block, in index order."""
        for block in list(self._open.values()):
            self.close(block, out)

    def finish(self, reason: FinishReason, out: list[StreamChunk] | None = None) -> list[StreamChunk]:
        """The terminal step: close the open blocks in index order, write the held usage, then
        ``finish`` with ``reason`` and the replay state. Returns ``out`` (a new list when not
        given) with those chunks appended; nothing is appended when :attr:`done`."""
        out = [] if out is None else out
        if self.done:
            return out
        self.close_open(out)
        if self.usage is not None:
            out.append(Usage(self.usage))
        out.append(Finish(reason, self._replay_state() if self._replay_state is not None else None))
        self.done = True
        return out

    def abort(self, reason: str = DEFAULT_ABORT_REASON) -> list[StreamChunk]:
        """The caller aborted: :meth:`finish` with ``finish{aborted}`` whose failure is
        ``LlmError("ABORTED", reason)`` stamped with the provider and request id."""
        if self.done:
            return []
        failure = LlmError("ABORTED", reason, provider=self.provider, request_id=self.request_id).to_failure()
        return self.finish(FinishReason("aborted", failure=failure))


__getattr__ = moved_names(__name__, {"SNIPPET_CHARS": "harness_core.errors", "snippet": "harness_core.errors"})
