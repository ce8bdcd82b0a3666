"""The chunk scrubber: :class:`ChunkScrubber` rewrites a chunk stream so that what a
:class:`~harness_core.secret.Redaction` masks never shows, whatever the split (per content block
it holds back the tail that could still begin a secret until the next delta or the block's end
decides)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import msgspec

from harness_core.secret._holdback import Redaction, TextStream, _HoldBack
from harness_core.secret._redactor import Redactor
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
)

__all__ = ["ChunkScrubber"]


class _PieceWise:
    """A :class:`Redaction` over a plain ``str -> str`` scrubber: each piece masked on its own."""

    def __init__(self, mask: Callable[[str], str]) -> None:
        self.mask = mask

    def stream(self) -> TextStream:
        return _HoldBack(self.mask, _whole)


def _whole(text: str) -> tuple[int, bool]:
    return len(text), True


class _Block:
    __slots__ = ("name", "stream")

    def __init__(self, stream: TextStream) -> None:
        self.stream = stream
        self.name: str | None = None  # a tool-call name from a dropped delta, for the next one


def _mask_all(start: BlockStart) -> bool:
    return True


class ChunkScrubber:
    """Rewrites a chunk stream so that what a :class:`Redaction` masks never shows, whatever the split.

    Args:
        redaction: a :class:`Redactor`, the ``redact`` middleware's masker, or any plain
            ``str -> str`` scrubber (then each piece is masked on its own).
        masks: which blocks to mask, decided on their ``block-start`` (default: all). A delta
            of a block never started is masked.

    ``feed(chunk)`` returns the chunks to show instead, in order: possibly none while text is
    held back; a ``block-end`` is preceded by a delta with the held-back rest, and its block
    holds exactly the concatenated masked deltas; a ``finish`` has its failure message masked.
    Other chunks pass unchanged.
    """

    def __init__(
        self,
        redaction: Redaction | Callable[[str], str],
        masks: Callable[[BlockStart], bool] = _mask_all,
    ) -> None:
        # a Redactor (every stream of the runtime's boundary) skips the runtime protocol check,
        # which costs ~10 µs per stream (typing collects the protocol's attributes each time)
        if type(redaction) is Redactor or isinstance(redaction, Redaction):
            self._redaction: Redaction = redaction
        else:
            self._redaction = _PieceWise(redaction)
        self._masks = masks
        self._blocks: dict[int, _Block] = {}
        self._plain: set[int] = set()

    def feed(self, chunk: StreamChunk) -> list[StreamChunk]:
        """The chunks to show for ``chunk`` (in order)."""
        kind = type(chunk)
        if kind is TextDelta or kind is ReasoningDelta:  # the hot path: a delta of a masked block
            block = self._blocks.get(chunk.index)  # type: ignore[union-attr]
            if block is not None:
                given: str = chunk.text  # type: ignore[union-attr]
                text = block.stream.feed(given)
                if text is given:  # nothing held back or masked: the chunk itself
                    return [chunk]
                return [msgspec.structs.replace(chunk, text=text)] if text else []
        return list(self._feed(chunk))

    def _feed(self, chunk: StreamChunk) -> Iterator[StreamChunk]:
        if isinstance(chunk, BlockStart):
            if self._masks(chunk):
                self._blocks[chunk.index] = _Block(self._redaction.stream())
            else:
                self._plain.add(chunk.index)
            yield chunk
            return
        if isinstance(chunk, Finish):
            yield self._finish(chunk)
            return
        index = getattr(chunk, "index", None)
        if not isinstance(index, int) or index in self._plain:
            if isinstance(chunk, BlockEnd):
                self._plain.discard(chunk.index)
            yield chunk  # unmasked blocks, usage
            return
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block(self._redaction.stream())
        if isinstance(chunk, TextDelta | ReasoningDelta):
            text = block.stream.feed(chunk.text)
            if text:
                yield msgspec.structs.replace(chunk, text=text)
        elif isinstance(chunk, ToolCallDelta):
            text = block.stream.feed(chunk.arguments_delta)
            block.name = chunk.name or block.name
            if text:
                yield msgspec.structs.replace(chunk, arguments_delta=text, name=block.name)
                block.name = None
        elif isinstance(chunk, BlockEnd):
            del self._blocks[index]
            yield from self._end(chunk, block)
        else:
            yield chunk  # a chunk kind we do not know that names a masked block: pass it on

    def _finish(self, chunk: Finish) -> Finish:
        """``chunk`` with its failure message masked (before anyone encodes it)."""
        failure = chunk.reason.failure
        if failure is None:
            return chunk
        message = self._redaction.mask(failure.message)
        if message == failure.message:
            return chunk
        reason = msgspec.structs.replace(chunk.reason, failure=msgspec.structs.replace(failure, message=message))
        return msgspec.structs.replace(chunk, reason=reason)

    def _end(self, chunk: BlockEnd, block: _Block) -> Iterator[StreamChunk]:
        """The final masked delta (if text was held back) and the masked ``block-end``."""
        tail = block.stream.flush()
        content = chunk.block
        mask = self._redaction.mask
        if isinstance(content, ToolCallBlock):
            if tail:
                yield ToolCallDelta(index=chunk.index, id=content.id, arguments_delta=tail, name=block.name)
            masked = block.stream.emitted if block.stream.fed else mask(content.arguments)
            yield BlockEnd(index=chunk.index, block=msgspec.structs.replace(content, arguments=masked))
            return
        if tail:
            delta_type = TextDelta if isinstance(content, TextBlock) else ReasoningDelta
            yield delta_type(index=chunk.index, text=tail)
        masked = block.stream.emitted if block.stream.fed else mask(content.text)
        yield BlockEnd(index=chunk.index, block=msgspec.structs.replace(content, text=masked))
