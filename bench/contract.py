"""Cost of the runtime's stream-contract check per chunk (never part of the test run).

``python -m bench.contract`` times :meth:`harness_core.contract.StreamContract.check` on a
text-heavy stream (the common case: one block of many text deltas) and on a stream of many short
blocks, against a bare loop over the same chunks, and prints nanoseconds per chunk. The check
runs once per stream at the outermost layer (and once per layer with ``Harness.strict``); compare
with the whole per-chunk cost of a harness stream (``nox -s bench``, tens of µs per chunk).
"""

from __future__ import annotations

import timeit

from harness_core.contract import StreamContract
from harness_core.types import BlockEnd, BlockStart, Finish, FinishReason, StreamChunk, TextBlock, TextDelta


def text_heavy(deltas: int = 10_000) -> list[StreamChunk]:
    """One text block of ``deltas`` deltas."""
    return [
        BlockStart(0, "text"),
        *(TextDelta(0, "tok ") for _ in range(deltas)),
        BlockEnd(0, TextBlock("")),
        Finish(FinishReason("stop")),
    ]


def many_blocks(blocks: int = 3_000) -> list[StreamChunk]:
    """``blocks`` blocks of one delta each."""
    chunks: list[StreamChunk] = []
    for index in range(blocks):
        chunks += [BlockStart(index, "text"), TextDelta(index, "x"), BlockEnd(index, TextBlock("x"))]
    return [*chunks, Finish(FinishReason("stop"))]


def per_chunk_ns(chunks: list[StreamChunk], *, checked: bool, repeat: int = 5) -> float:
    """The best of ``repeat`` runs, in nanoseconds per chunk."""

    def run() -> None:
        check = StreamContract().check if checked else None
        for chunk in chunks:
            if check is not None:
                check(chunk)

    best = min(timeit.repeat(run, number=1, repeat=repeat))
    return best / len(chunks) * 1e9


def main() -> None:
    """Print the table."""
    print("stream            loop ns/chunk  checked ns/chunk  check cost")
    for name, chunks in (("text-heavy", text_heavy()), ("many-blocks", many_blocks())):
        bare = per_chunk_ns(chunks, checked=False)
        checked = per_chunk_ns(chunks, checked=True)
        print(f"{name:<16}  {bare:>13.0f}  {checked:>16.0f}  {checked - bare:>8.0f} ns")


if __name__ == "__main__":
    main()
