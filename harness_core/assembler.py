"""Fold a chunk stream into blocks: :class:`BlockAssembler`, the one open-block tracker.

``harness.generate`` is ``harness.stream`` collected through a :class:`BlockAssembler` (one code
path). The same class is the tracker every layer uses to end a stream early and legally: the
runtime's adapter boundary and terminal guard, the middleware (timeout) and the testing kit's
fake adapter feed it the chunks they pass on, then :meth:`BlockAssembler.terminal` gives the
``block-end`` of every block still open followed by one ``finish`` (:func:`failure_finish`).
The stream protocol is described in ``docs/stream-obligations.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness_core.errors import Failure
from harness_core.types import (
    BlockEnd,
    BlockStart,
    BlockType,
    Finish,
    FinishReason,
    Message,
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

__all__ = ["BlockAssembler", "failure_finish"]

_Block = TextBlock | ReasoningBlock | ToolCallBlock


def failure_finish(failure: Failure) -> Finish:
    """The ``finish`` ending a stream with ``failure``: kind ``aborted`` when its code is
    ``ABORTED``, else ``error``."""
    return Finish(FinishReason(kind="aborted" if failure.code == "ABORTED" else "error", failure=failure))


class _Builder:
    """A block being assembled: its kind, tool-call id/name, and the delta texts so far."""

    __slots__ = ("block_type", "id", "name", "parts", "signed")

    def __init__(self, block_type: BlockType, id: str | None, name: str | None, signed: bool) -> None:
        self.block_type = block_type
        self.id = id
        self.name = name
        self.signed = signed
        self.parts: list[str] = []

    def build(self, index: int) -> _Block:
        """The block holding everything received so far: a tool call without arguments gets
        ``"{}"``, one whose id never arrived gets ``call_<index>`` (unique in the reply)."""
        text = "".join(self.parts)
        if self.block_type == "text":
            return TextBlock(text)
        if self.block_type == "reasoning":
            return ReasoningBlock(text, signed=self.signed)
        return ToolCallBlock(id=self.id or f"call_{index}", name=self.name or "", arguments=text or "{}")


class _Ended:
    """Marks a block that ended, when its content is not kept (``keep_ended=False``)."""

    __slots__ = ()


_ENDED = _Ended()


class BlockAssembler:
    """Collect a stream of :data:`~harness_core.types.StreamChunk` into one assistant message.

    Feed every chunk in order with :meth:`feed`; then :meth:`message` gives the assistant
    message, :attr:`usage` the reported :class:`~harness_core.types.TokenUsage` (``None`` when
    none was reported), :attr:`finish` the :class:`~harness_core.types.FinishReason` (``None``
    until a ``finish`` chunk arrived) and :attr:`replay_state` the finish's replay state.

    Tolerant by design, so it can also assemble streams that do not keep every obligation:

    - ``block-end`` is authoritative: its ``block`` replaces what the deltas built.
    - A delta for a block that already ended is ignored.
    - A delta for an index never started opens that block implicitly (delta-only streams); the
      block's kind is the delta's kind, a tool call takes ``id``/``name`` from its deltas.
    - A block that never ends is included with what it holds (see :meth:`open_blocks`).

    With ``keep_ended=False`` an ended block's content is dropped (only the fact that it ended is
    kept), so memory stays bounded by the blocks still open: the runtime's boundary uses that to
    be able to close open blocks on a failure without holding the whole stream.

    Example::

        assembler = BlockAssembler()
        async with harness.stream(options) as chunks:
            async for chunk in chunks:
                assembler.feed(chunk)
        reply = assembler.message(route="openai", source="openai:work")
    """

    __slots__ = ("_blocks", "_keep_ended", "finish", "replay_state", "usage")

    def __init__(self, *, keep_ended: bool = True) -> None:
        # index -> builder while the block is open, the complete block (or _ENDED) once it ended
        self._blocks: dict[int, _Builder | _Block | _Ended] = {}
        self._keep_ended = keep_ended
        self.usage: TokenUsage | None = None
        """The token usage of the last ``usage`` chunk, or ``None``."""
        self.finish: FinishReason | None = None
        """The reason of the ``finish`` chunk, or ``None`` when none arrived (yet)."""
        self.replay_state: Any = None
        """The ``replay_state`` of the ``finish`` chunk (opaque JSON), or ``None``."""

    def feed(self, chunk: StreamChunk) -> None:
        """Fold one chunk in. Chunk kinds this class does not know are ignored."""
        if type(chunk) is TextDelta:  # the hot path (most chunks): one lookup and an append
            block = self._blocks.get(chunk.index)
            if type(block) is _Builder:
                block.parts.append(chunk.text)
                return
        handler = _HANDLERS.get(type(chunk))
        if handler is not None:
            handler(self, chunk)

    def _delta(
        self, index: int, block_type: BlockType, text: str, id: str | None = None, name: str | None = None
    ) -> None:
        """Append ``text`` to the open block at ``index`` (opened implicitly if new; ignored once ended)."""
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Builder(block_type, id, name, False)
        elif type(block) is not _Builder:
            return  # the block already ended
        block.parts.append(text)
        if block.id is None:
            block.id = id
        if block.name is None:
            block.name = name

    def _text_delta(self, chunk: TextDelta) -> None:
        self._delta(chunk.index, "text", chunk.text)

    def _reasoning_delta(self, chunk: ReasoningDelta) -> None:
        self._delta(chunk.index, "reasoning", chunk.text)

    def _tool_call_delta(self, chunk: ToolCallDelta) -> None:
        self._delta(chunk.index, "tool-call", chunk.arguments_delta, chunk.id, chunk.name)

    def _block_start(self, chunk: BlockStart) -> None:
        if chunk.index not in self._blocks:
            self._blocks[chunk.index] = _Builder(chunk.block_type, chunk.id, chunk.name, chunk.signed)

    def _block_end(self, chunk: BlockEnd) -> None:
        self._blocks[chunk.index] = chunk.block if self._keep_ended else _ENDED

    def _usage(self, chunk: Usage) -> None:
        self.usage = chunk.usage

    def _finish(self, chunk: Finish) -> None:
        self.finish = chunk.reason
        self.replay_state = chunk.replay_state

    def open_blocks(self) -> list[tuple[int, TextBlock | ReasoningBlock | ToolCallBlock]]:
        """The blocks started but not ended, as ``(index, block with what it holds)``, in index order.

        The runtime emits a ``block-end`` for each of these before an error/aborted ``finish``.
        """
        return [
            (index, block.build(index)) for index, block in sorted(self._blocks.items()) if isinstance(block, _Builder)
        ]

    def terminal(self, failure: Failure) -> list[StreamChunk]:
        """End the stream early: a ``block-end`` for every open block (with what it holds, in
        index order; they count as ended from now on), then :func:`failure_finish`."""
        tail: list[StreamChunk] = []
        for index, block in self.open_blocks():
            tail.append(BlockEnd(index, block))
            self._blocks[index] = block if self._keep_ended else _ENDED
        tail.append(failure_finish(failure))
        return tail

    def blocks(self) -> list[TextBlock | ReasoningBlock | ToolCallBlock]:
        """Every block in index order; blocks still open hold what they received so far."""
        return [
            b.build(index) if isinstance(b, _Builder) else b
            for index, b in sorted(self._blocks.items())
            if not isinstance(b, _Ended)
        ]

    def message(self, *, route: str | None = None, source: str | None = None, model: str | None = None) -> Message:
        """The assistant :class:`~harness_core.types.Message` assembled so far.

        ``route`` and ``source`` (the plugins.yaml key owning the route) are recorded on the
        message with :attr:`replay_state`, so a later turn can hand the state back to the same
        plugin instance (docs/stream-obligations.md#9-replay-state). ``model`` is the model that produced it.
        """
        return Message(
            role="assistant",
            content=list(self.blocks()),  # list[ContentBlock] for the invariant field
            route=route,
            source=source,
            model=model,
            replay_state=self.replay_state,
        )


_HANDLERS: dict[type, Callable[[BlockAssembler, Any], None]] = {
    TextDelta: BlockAssembler._text_delta,
    ReasoningDelta: BlockAssembler._reasoning_delta,
    ToolCallDelta: BlockAssembler._tool_call_delta,
    BlockStart: BlockAssembler._block_start,
    BlockEnd: BlockAssembler._block_end,
    Usage: BlockAssembler._usage,
    Finish: BlockAssembler._finish,
}
"""One dict lookup per chunk picks the handler (no ``isinstance`` chain)."""
