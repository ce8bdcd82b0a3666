"""Read-splitting helpers."""

from __future__ import annotations

import pytest

from harness_core.testing.splits import every_split, one_byte_reads, split_at, split_every


def test_split_at() -> None:
    assert split_at(b"abcd", [1, 3]) == [b"a", b"bc", b"d"]
    assert split_at(b"abcd", [3, 1, 1, 0, 4]) == [b"a", b"bc", b"d"]
    assert split_at(b"abcd", []) == [b"abcd"]
    assert split_at(b"", []) == []
    with pytest.raises(ValueError, match="within"):
        split_at(b"abcd", [5])
    with pytest.raises(ValueError, match="within"):
        split_at(b"abcd", [-1])


def test_split_every_and_one_byte_reads() -> None:
    assert split_every(b"abcde", 2) == [b"ab", b"cd", b"e"]
    assert one_byte_reads(b"abc") == [b"a", b"b", b"c"]
    assert one_byte_reads(b"") == []
    with pytest.raises(ValueError, match="positive"):
        split_every(b"abc", 0)


def test_every_split() -> None:
    assert list(every_split(b"")) == [[]]
    assert list(every_split(b"a")) == [[b"a"]]
    assert list(every_split(b"abc")) == [
        [b"abc"],
        [b"a", b"bc"],
        [b"ab", b"c"],
        [b"a", b"b", b"c"],
    ]
    for delivery in every_split(b"hello"):
        assert b"".join(delivery) == b"hello"
