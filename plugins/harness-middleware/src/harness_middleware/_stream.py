"""Small helpers shared by the middleware: closing inner streams, tracking open blocks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from harness_core.types import (
    BlockEnd,
    BlockStart,
    Failure,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)

__all__ = ["OpenBlocks", "aclose", "error_finish", "is_content"]


async def aclose(stream: AsyncIterator[Any]) -> None:
    """Close ``stream`` if it can be closed (async generators can; plain iterators may not).

    Closing an exhausted or already closed generator does nothing, so this is safe to call in
    every ``finally``. Exceptions raised by the stream's own cleanup propagate.
    """
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


def is_content(chunk: StreamChunk) -> bool:
    """Whether ``chunk`` commits an attempt of ``retry`` or ``fallback`` (the caller must never
    see it twice): deltas, a non-empty ``block-end``, ``finish`` and unknown kinds do;
    ``block-start``, ``usage`` and an empty ``block-end`` do not."""
    if isinstance(chunk, BlockStart | Usage):
        return False
    if isinstance(chunk, BlockEnd):
        block = chunk.block
        return bool(block.arguments if isinstance(block, ToolCallBlock) else block.text)
    return True


def error_finish(failure: Failure) -> Finish:
    """A ``finish`` chunk of kind ``error`` (or ``aborted`` for code ``ABORTED``) carrying ``failure``."""
    if failure.code == "ABORTED":
        return Finish(FinishReason(kind="aborted", failure=failure))
    return Finish(FinishReason(kind="error", failure=failure))


class _Open:
    __slots__ = ("id", "name", "parts", "start")

    def __init__(self, start: BlockStart) -> None:
        self.start = start
        self.id = start.id
        self.name = start.name
        self.parts: list[str] = []


class OpenBlocks:
    """Follows a stream's blocks so they can be closed with what they hold (SPEC §3.6).

    ``feed`` every chunk that is passed on; ``close_all`` returns the ``block-end`` chunks of the
    blocks still open, in index order, each holding the concatenation of its deltas (a tool call
    without arguments gets ``"{}"``).
    """

    def __init__(self) -> None:
        self._open: dict[int, _Open] = {}

    def feed(self, chunk: StreamChunk) -> None:
        """Record ``chunk``: a ``block-start`` opens, a delta extends, a ``block-end`` closes."""
        if isinstance(chunk, BlockStart):
            self._open[chunk.index] = _Open(chunk)
        elif isinstance(chunk, TextDelta | ReasoningDelta):
            self._open[chunk.index].parts.append(chunk.text)
        elif isinstance(chunk, ToolCallDelta):
            entry = self._open[chunk.index]
            entry.parts.append(chunk.arguments_delta)
            entry.id = entry.id or chunk.id
            entry.name = entry.name or chunk.name
        elif isinstance(chunk, BlockEnd):
            self._open.pop(chunk.index, None)

    def close_all(self) -> list[BlockEnd]:
        """``block-end`` chunks closing every open block (partial content), and forget them."""
        ends: list[BlockEnd] = []
        for index in sorted(self._open):
            entry = self._open[index]
            text = "".join(entry.parts)
            block: TextBlock | ReasoningBlock | ToolCallBlock
            if entry.start.block_type == "text":
                block = TextBlock(text)
            elif entry.start.block_type == "reasoning":
                block = ReasoningBlock(text, signed=entry.start.signed)
            else:
                block = ToolCallBlock(id=entry.id or "", name=entry.name or "", arguments=text or "{}")
            ends.append(BlockEnd(index=index, block=block))
        self._open.clear()
        return ends
