"""The stream contract, checked chunk by chunk at run time: :class:`StreamContract`.

The rules (the stream protocol of ``docs/``; :mod:`harness_core.testing.check` verifies more,
for tests): every block is ``block-start`` → deltas of its own kind → ``block-end``; block
indices are 0, 1, 2 … in order and never reused; every delta names an open block of its kind
and text/reasoning deltas are non-empty; ``usage`` at most once, after every block ended;
``finish`` last, exactly once, after every block ended. The checker holds only the kinds of the
blocks still open (no text), so it is cheap enough for every stream: the runtime's outermost
layer runs it always (see :class:`harness_core.chain.Chain`); ``bench/bench_contract.py``
measures its cost per chunk.
"""

from __future__ import annotations

from typing import Final

from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
)

__all__ = ["StreamContract"]

_DELTA_KIND: Final[dict[type, str]] = {TextDelta: "text", ReasoningDelta: "reasoning", ToolCallDelta: "tool-call"}
_NAMES: Final[dict[type, str]] = {
    TextDelta: "text-delta",
    ReasoningDelta: "reasoning-delta",
    ToolCallDelta: "tool-call-delta",
    BlockStart: "block-start",
    BlockEnd: "block-end",
    Usage: "usage",
    Finish: "finish",
}


class StreamContract:
    """Checks one stream's chunks in order: :meth:`check` returns why a chunk breaks the
    contract (``"text-delta for block 5, which was never started"``) or ``None``.

    Attributes:
        count: how many chunks were checked (the number of the next one, 0-based).
    """

    __slots__ = ("_finished", "_next", "_open", "_usage", "count")

    def __init__(self) -> None:
        self._open: dict[int, str] = {}  # index -> block type, while the block is open
        self._next = 0
        self._usage = False
        self._finished = False
        self.count = 0

    def check(self, chunk: StreamChunk) -> str | None:
        """Why ``chunk`` breaks the contract given every chunk before it, or ``None``."""
        self.count += 1
        kind = type(chunk)
        if kind is TextDelta and self._open.get(chunk.index) == "text" and chunk.text:  # type: ignore[union-attr]
            return None  # the hot path: one lookup
        problem = self._problem(chunk)
        return None if problem is None else f"chunk #{self.count - 1} ({_NAMES.get(kind, kind.__name__)}): {problem}"

    def _problem(self, chunk: StreamChunk) -> str | None:
        if self._finished:
            return "a chunk after finish"
        if isinstance(chunk, TextDelta | ReasoningDelta | ToolCallDelta):
            return self._delta(chunk)
        if isinstance(chunk, BlockStart):
            if self._usage:
                return "block-start after usage"
            if chunk.index != self._next:
                return f"block index {chunk.index}; expected {self._next} (indices are 0, 1, 2 … never reused)"
            self._next += 1
            self._open[chunk.index] = chunk.block_type
            return None
        if isinstance(chunk, BlockEnd):
            if self._open.pop(chunk.index, None) is None:
                return f"block-end for block {chunk.index}, which {self._state(chunk.index)}"
            return None
        if isinstance(chunk, Usage):
            if self._usage:
                return "a second usage"
            self._usage = True
            return self._unclosed("usage")
        if isinstance(chunk, Finish):
            self._finished = True
            return self._unclosed("finish")
        return f"not a stream chunk: {type(chunk).__name__}"

    def _delta(self, chunk: TextDelta | ReasoningDelta | ToolCallDelta) -> str | None:
        open_kind = self._open.get(chunk.index)
        if open_kind is None:
            return f"delta for block {chunk.index}, which {self._state(chunk.index)}"
        expected = _DELTA_KIND[type(chunk)]
        if open_kind != expected:
            return f"{expected} delta for the {open_kind} block {chunk.index}"
        if not isinstance(chunk, ToolCallDelta) and not chunk.text:
            return "an empty delta"
        return None

    def _state(self, index: int) -> str:
        return "already ended" if 0 <= index < self._next else "was never started"

    def _unclosed(self, what: str) -> str | None:
        if not self._open:
            return None
        return f"{what} while block{'s' if len(self._open) > 1 else ''} {sorted(self._open)} still open"
