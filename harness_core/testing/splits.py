"""Ways to cut a byte body into network reads, for framing-robustness tests (docs/testing.md).

A decoder or adapter must produce the same result however its input is split into reads; these
helpers enumerate the splits worth trying.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

__all__ = ["every_split", "one_byte_reads", "split_at", "split_every"]


def split_at(body: bytes, offsets: Iterable[int]) -> list[bytes]:
    """Cut ``body`` at the given byte ``offsets`` into consecutive reads.

    Offsets are sorted and de-duplicated; ``0`` and ``len(body)`` are implied. Offsets outside
    ``0 … len(body)`` raise ``ValueError``. Empty pieces never occur (an empty read would mean
    EOF on the wire). ``split_at(b"abcd", [1, 3]) == [b"a", b"bc", b"d"]``.
    """
    cuts = sorted(set(offsets))
    if cuts and (cuts[0] < 0 or cuts[-1] > len(body)):
        raise ValueError(f"split offsets must lie within 0..{len(body)}, got {cuts}")
    pieces: list[bytes] = []
    start = 0
    for cut in [*cuts, len(body)]:
        if cut > start:
            pieces.append(body[start:cut])
            start = cut
    return pieces


def split_every(body: bytes, size: int) -> list[bytes]:
    """Cut ``body`` into reads of ``size`` bytes (the last may be shorter). ``size`` must be > 0."""
    if size <= 0:
        raise ValueError(f"read size must be positive, got {size}")
    return [body[i : i + size] for i in range(0, len(body), size)]


def one_byte_reads(body: bytes) -> list[bytes]:
    """``body`` delivered one byte per read."""
    return split_every(body, 1) if body else []


def every_split(body: bytes) -> Iterator[Sequence[bytes]]:
    """Yield every way of delivering ``body`` worth testing.

    In order: the whole body as one read, every two-way split (cut at offset 1 … len-1, so a
    cut falls inside every multi-byte character, CRLF pair and field name), and finally one
    byte per read. An empty body yields one empty delivery ``[]``.
    """
    if not body:
        yield []
        return
    yield [body]
    for offset in range(1, len(body)):
        yield [body[:offset], body[offset:]]
    if len(body) > 1:
        yield one_byte_reads(body)
