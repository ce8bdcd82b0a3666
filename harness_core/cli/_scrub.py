"""Secrets out of a chunk stream before it is shown: :class:`ChunkScrubber`.

The config's secrets (``Redactor``) are masked in every line the CLI writes. A model (or a
misbehaving server) can still echo a secret split across two deltas, where masking each piece
alone misses it. The scrubber holds back the tail of each block's text that could begin a secret
until the next delta (or the block's end) decides, so what is shown — text, ``--json`` lines, and
the assembled blocks — never holds a secret, whatever the split.
"""

from __future__ import annotations

from collections.abc import Callable

from harness_core.config import Redactor
from harness_core.types import (
    BlockEnd,
    BlockStart,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
)

__all__ = ["ChunkScrubber"]


class ChunkScrubber:
    """Rewrites chunks so that no secret of ``redact`` reaches the output.

    ``feed(chunk)`` returns the chunks to show instead (possibly none while text is held back; a
    ``block-end`` is preceded by a delta with the held-back rest). With a plain ``str -> str``
    scrubber (not a :class:`~harness_core.config.Redactor`) each piece is masked on its own.
    """

    def __init__(self, redact: Callable[[str], str]) -> None:
        self._redact = redact
        self._safe_end: Callable[[str], int] = redact.safe_end if isinstance(redact, Redactor) else len
        self._pending: dict[int, str] = {}
        self._ids: dict[int, str] = {}

    def feed(self, chunk: StreamChunk) -> list[StreamChunk]:
        """The chunks to show for ``chunk`` (in order)."""
        kind = type(chunk)
        if kind is TextDelta or kind is ReasoningDelta or kind is ToolCallDelta:
            return self._delta(chunk)  # type: ignore[arg-type]
        if kind is BlockEnd:
            assert isinstance(chunk, BlockEnd)
            return [*self._flush(chunk.index, chunk.block), BlockEnd(chunk.index, self._block(chunk.block))]
        if kind is BlockStart:
            assert isinstance(chunk, BlockStart)
            if chunk.id is not None:
                self._ids[chunk.index] = chunk.id
        return [chunk]

    def _delta(self, chunk: TextDelta | ReasoningDelta | ToolCallDelta) -> list[StreamChunk]:
        index = chunk.index
        if isinstance(chunk, ToolCallDelta):
            self._ids[index] = chunk.id
            piece = chunk.arguments_delta
        else:
            piece = chunk.text
        text = self._pending.pop(index, "") + piece
        cut = self._safe_end(text)
        if cut < len(text):
            self._pending[index] = text[cut:]
        shown = self._redact(text[:cut])
        if isinstance(chunk, ToolCallDelta):
            if not shown and chunk.name is None:
                return []
            return [ToolCallDelta(index, chunk.id, shown, name=chunk.name)]
        if not shown:
            return []
        return [TextDelta(index, shown) if isinstance(chunk, TextDelta) else ReasoningDelta(index, shown)]

    def _flush(self, index: int, block: TextBlock | ReasoningBlock | ToolCallBlock) -> list[StreamChunk]:
        rest = self._redact(self._pending.pop(index, ""))
        if not rest:
            return []
        if isinstance(block, TextBlock):
            return [TextDelta(index, rest)]
        if isinstance(block, ReasoningBlock):
            return [ReasoningDelta(index, rest)]
        return [ToolCallDelta(index, self._ids.get(index, block.id), rest)]

    def _block(self, block: TextBlock | ReasoningBlock | ToolCallBlock) -> TextBlock | ReasoningBlock | ToolCallBlock:
        if isinstance(block, TextBlock):
            return TextBlock(self._redact(block.text))
        if isinstance(block, ReasoningBlock):
            return ReasoningBlock(self._redact(block.text), signed=block.signed)
        return ToolCallBlock(block.id, block.name, self._redact(block.arguments))
