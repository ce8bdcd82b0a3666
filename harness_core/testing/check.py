"""Stream-obligation checker: docs/stream-obligations.md obligations 1-4 and 6, verified chunk by chunk.

:class:`StreamChecker` is fed one chunk at a time and raises :class:`StreamViolation` at the
first chunk that breaks an obligation (naming the chunk number and the reason);
:func:`check_stream` checks a finished list; :class:`CheckedStream` wraps a live async iterator
and checks it while passing every chunk through.

Checked: every block is ``block-start`` → deltas of its own kind → ``block-end``; indices are
0, 1, 2 … in order of first appearance and never reused; every delta names an open block;
text/reasoning deltas are non-empty and a tool-call delta carries arguments or a name; the
``block-end`` block equals the concatenated deltas (a tool call without arguments ends with
``"{}"``), with consistent id and name; ``usage`` at most once, after every block ended and
before ``finish``; ``finish`` exactly once and last; ``tool-calls`` finish iff a tool-call block
was emitted (a ``stop`` finish with tool calls is a violation; ``length`` stays ``length``);
``error`` / ``aborted`` finishes carry a failure; a stream ends either with a ``finish`` or by
raising ``LlmError``, never both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from harness_core.errors import LlmError
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
)

__all__ = ["CheckedStream", "StreamChecker", "StreamViolation", "check_stream"]


class StreamViolation(AssertionError):
    """A stream broke an obligation of docs/stream-obligations.md.

    Attributes:
        index: the 0-based number of the offending chunk (for an end-of-stream violation, the
            number of chunks received).
        chunk: the offending chunk (``None`` for an end-of-stream violation).
        reason: what was wrong.
    """

    def __init__(self, index: int, chunk: Any, reason: str) -> None:
        kind = _kind(chunk) if chunk is not None else "end of stream"
        super().__init__(f"chunk #{index} ({kind}): {reason}")
        self.index = index
        self.chunk = chunk
        self.reason = reason


def _kind(chunk: Any) -> str:
    tag = getattr(type(chunk), "__struct_config__", None)
    return str(tag.tag) if tag is not None and tag.tag is not None else type(chunk).__name__


_DELTA_BLOCK = {TextDelta: "text", ReasoningDelta: "reasoning", ToolCallDelta: "tool-call"}
_BLOCK_CLASS = {"text": TextBlock, "reasoning": ReasoningBlock, "tool-call": ToolCallBlock}


@dataclass
class _Open:
    start: BlockStart
    parts: list[str] = field(default_factory=list)
    id: str | None = None
    name: str | None = None


class StreamChecker:
    """Incremental checker of one stream. ``feed`` every chunk, then call ``end`` once.

    Attributes:
        chunks: every chunk fed so far, in order.
        finish: the ``finish`` chunk once seen.
        usage: the ``usage`` chunk once seen.
    """

    def __init__(self) -> None:
        self.chunks: list[StreamChunk] = []
        self.finish: Finish | None = None
        self.usage: Usage | None = None
        self._open: dict[int, _Open] = {}
        self._next_index = 0
        self._tool_calls = 0
        self._ended = False

    def _fail(self, chunk: Any, reason: str) -> StreamViolation:
        return StreamViolation(len(self.chunks) - (0 if chunk is None else 1), chunk, reason)

    def feed(self, chunk: StreamChunk) -> StreamChunk:
        """Check ``chunk`` against everything before it; return it. Raises :class:`StreamViolation`."""
        self.chunks.append(chunk)
        if self._ended:
            raise self._fail(chunk, "chunk after the end of the stream")
        if self.finish is not None:
            raise self._fail(chunk, "chunk after finish")
        if isinstance(chunk, BlockStart):
            self._block_start(chunk)
        elif isinstance(chunk, TextDelta | ReasoningDelta | ToolCallDelta):
            self._delta(chunk)
        elif isinstance(chunk, BlockEnd):
            self._block_end(chunk)
        elif isinstance(chunk, Usage):
            if self.usage is not None:
                raise self._fail(chunk, "a second usage chunk")
            self._require_closed(chunk, "usage")
            self.usage = chunk
        elif isinstance(chunk, Finish):
            self._finish(chunk)
        else:
            raise self._fail(chunk, f"not a stream chunk: {chunk!r}")
        return chunk

    def _block_start(self, chunk: BlockStart) -> None:
        if self.usage is not None:
            raise self._fail(chunk, "block-start after usage")
        if chunk.index != self._next_index:
            reused = chunk.index < self._next_index
            raise self._fail(
                chunk,
                f"block index {chunk.index} {'reused' if reused else 'skips ahead'}; expected {self._next_index}",
            )
        if chunk.block_type not in _BLOCK_CLASS:
            raise self._fail(chunk, f"unknown block_type {chunk.block_type!r}")
        if chunk.block_type != "tool-call" and (chunk.id is not None or chunk.name is not None):
            raise self._fail(chunk, f"a {chunk.block_type} block-start carries a tool-call id or name")
        if chunk.signed and chunk.block_type != "reasoning":
            raise self._fail(chunk, "only reasoning blocks can be signed")
        self._next_index += 1
        self._open[chunk.index] = _Open(chunk, id=chunk.id, name=chunk.name)
        if chunk.block_type == "tool-call":
            self._tool_calls += 1

    def _delta(self, chunk: TextDelta | ReasoningDelta | ToolCallDelta) -> None:
        block = self._open.get(chunk.index)
        if block is None:
            state = "already ended" if chunk.index < self._next_index else "never started"
            raise self._fail(chunk, f"delta for block {chunk.index}, which is {state}")
        expected = _DELTA_BLOCK[type(chunk)]
        if block.start.block_type != expected:
            raise self._fail(chunk, f"{_kind(chunk)} for a {block.start.block_type} block {chunk.index}")
        if isinstance(chunk, ToolCallDelta):
            if block.id is not None and chunk.id != block.id:
                raise self._fail(chunk, f"tool-call id {chunk.id!r} differs from the block's {block.id!r}")
            block.id = chunk.id
            if chunk.name is not None:
                if block.name is not None and chunk.name != block.name:
                    raise self._fail(chunk, f"tool-call name {chunk.name!r} differs from the block's {block.name!r}")
                new_name = block.name is None
                block.name = chunk.name
            else:
                new_name = False
            if not chunk.arguments_delta and not new_name:
                raise self._fail(chunk, "empty tool-call delta (no arguments and no new name)")
            block.parts.append(chunk.arguments_delta)
        else:
            if not chunk.text:
                raise self._fail(chunk, f"empty {_kind(chunk)}")
            block.parts.append(chunk.text)

    def _block_end(self, chunk: BlockEnd) -> None:
        block = self._open.pop(chunk.index, None)
        if block is None:
            state = "already ended" if chunk.index < self._next_index else "never started"
            raise self._fail(chunk, f"block-end for block {chunk.index}, which is {state}")
        body = chunk.block
        block_type = block.start.block_type
        if not isinstance(body, _BLOCK_CLASS[block_type]):
            raise self._fail(chunk, f"block-end carries a {_kind(body)} block for a {block_type} block")
        joined = "".join(block.parts)
        if isinstance(body, ToolCallBlock):
            if block.id is not None and body.id != block.id:
                raise self._fail(chunk, f"tool-call id {body.id!r} differs from the deltas' {block.id!r}")
            if block.name is not None and body.name != block.name:
                raise self._fail(chunk, f"tool-call name {body.name!r} differs from {block.name!r}")
            if not body.id or not body.name:
                raise self._fail(chunk, "a tool call needs a non-empty id and name")
            if joined == "" and body.arguments != "{}":
                raise self._fail(
                    chunk, f'a tool call without argument deltas must end with "{{}}", not {body.arguments!r}'
                )
            if joined != "" and body.arguments != joined:
                raise self._fail(chunk, f"arguments {body.arguments!r} differ from the concatenated deltas {joined!r}")
        else:
            assert isinstance(body, TextBlock | ReasoningBlock)
            if body.text != joined:
                raise self._fail(chunk, f"block text {body.text!r} differs from the concatenated deltas {joined!r}")
            if not joined and not block.start.signed:  # a signed reasoning block may hold only a signature
                raise self._fail(chunk, f"an empty {block_type} block (an empty provider field never opens a block)")
            if isinstance(body, ReasoningBlock) and body.signed != block.start.signed:
                raise self._fail(chunk, "block-end signed flag differs from its block-start")

    def _require_closed(self, chunk: StreamChunk, what: str) -> None:
        if self._open:
            raise self._fail(chunk, f"{what} while block(s) {sorted(self._open)} are still open")

    def _finish(self, chunk: Finish) -> None:
        self._require_closed(chunk, "finish")
        reason = chunk.reason
        if reason.kind == "tool-calls" and not self._tool_calls:
            raise self._fail(chunk, "finish kind tool-calls without any tool-call block")
        if reason.kind == "stop" and self._tool_calls:
            raise self._fail(chunk, "finish kind stop although tool-call blocks were emitted (expected tool-calls)")
        if reason.kind in ("error", "aborted") and reason.failure is None:
            raise self._fail(chunk, f"finish kind {reason.kind} without a failure")
        self.finish = chunk

    def end(self, raised: BaseException | None = None) -> None:
        """The stream is over: it was exhausted (``raised=None``) or raised ``raised``.

        Raises :class:`StreamViolation` when an exhausted stream had no ``finish``, a raised
        stream had one (never both paths), or the stream raised something other than
        ``LlmError`` (a bug in the adapter, the runtime reports it as ``INTERNAL``).
        """
        if self._ended:
            raise self._fail(None, "end() called twice")
        self._ended = True
        if raised is None:
            if self.finish is None:
                raise self._fail(None, "stream ended without a finish chunk")
        elif not isinstance(raised, LlmError):
            raise self._fail(None, f"stream raised {type(raised).__name__} rather than LlmError: {raised!r}")
        elif self.finish is not None:
            raise self._fail(None, f"stream raised {raised!r} after its finish chunk (never both)")

    @property
    def tool_call_blocks(self) -> int:
        """How many tool-call blocks were started."""
        return self._tool_calls


def check_stream(chunks: Iterable[StreamChunk], raised: BaseException | None = None) -> list[StreamChunk]:
    """Check a complete stream; return its chunks as a list.

    ``raised`` is the exception the stream ended with, if any (it must then be an ``LlmError``
    and no ``finish`` may precede it). Raises :class:`StreamViolation` at the first violation.
    """
    checker = StreamChecker()
    for chunk in chunks:
        checker.feed(chunk)
    checker.end(raised)
    return checker.chunks


class CheckedStream:
    """Check a live async iterator of chunks while passing them through.

    Example::

        async with harness.stream(options) as chunks:
            async for chunk in CheckedStream(chunks):
                ...

    Every chunk is checked before it is handed on. When the source is exhausted the end is
    checked; when it raises ``LlmError`` the end is checked and the error re-raised (a
    :class:`StreamViolation` instead when raising was illegal, chained to it). Other exceptions,
    including cancellation, propagate unchanged and unchecked. ``aclose()`` closes the source
    (it is also an async context manager). ``checker`` exposes the :class:`StreamChecker`.
    """

    def __init__(self, source: AsyncIterator[StreamChunk], checker: StreamChecker | None = None) -> None:
        self._source = source
        self.checker = checker or StreamChecker()

    @property
    def chunks(self) -> list[StreamChunk]:
        """The chunks passed through so far."""
        return self.checker.chunks

    def __aiter__(self) -> CheckedStream:
        return self

    async def __anext__(self) -> StreamChunk:
        try:
            chunk = await self._source.__anext__()
        except StopAsyncIteration:
            if not self.checker._ended:
                self.checker.end(None)
            raise
        except LlmError as exc:
            try:
                self.checker.end(exc)
            except StreamViolation as violation:
                raise violation from exc
            raise
        return self.checker.feed(chunk)

    async def aclose(self) -> None:
        """Close the source iterator when it can be closed."""
        close = getattr(self._source, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> CheckedStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
