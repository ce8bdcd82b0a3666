"""Stream helpers the middleware share. Closing an inner stream is the core's
:func:`harness_core.chain.close_stream` (shielded, bounded, its cleanup's exception re-raised) and
a failure's ``finish`` is :func:`harness_core.assembler.failure_finish`, so the middleware and the
runtime do both one way; open-block tracking is :class:`harness_core.assembler.BlockAssembler`.
:func:`is_content` is the middleware's own rule (when a retry or fallback attempt commits)."""

from __future__ import annotations

from harness_core.middleware import (
    BlockEnd,
    BlockStart,
    StreamChunk,
    ToolCallBlock,
    Usage,
    close_stream,
    failure_finish,
)

__all__ = ["aclose", "error_finish", "is_content"]

aclose = close_stream
error_finish = failure_finish


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
