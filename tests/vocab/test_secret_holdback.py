"""The streaming hold-back is precise: only a tail that can begin a masked form of a secret waits,
and a key in any representation, split anywhere, never reaches the output."""

from __future__ import annotations

import base64
import itertools
import json
import random
import re
import string
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness_core import BlockEnd, BlockStart, ChunkScrubber, Redactor, StreamChunk, TextBlock, TextDelta
from harness_core.secret import MASK
from harness_core.secret._forms import _base64_forms

# a realistic key (56 characters), built at run time (no key-shaped literal is committed) from a
# fixed seed, so that which ordinary deltas may end like the start of one of its forms is fixed
KEY = "sk-" + "proj-" + "".join(random.Random(17).choices(string.ascii_letters + string.digits + "_-", k=48))


def _redactor(*values: str) -> Redactor:
    redactor = Redactor()
    for value in values:
        redactor.add(value)
    return redactor


REDACTOR = _redactor(KEY)


def _b64(before: bytes, after: bytes, *, url: bool = False) -> Callable[[str], str]:
    encode = base64.urlsafe_b64encode if url else base64.b64encode
    return lambda key: encode(before + key.encode() + after).decode()


def _unicode_escapes(key: str, case: str) -> str:
    """``key`` with every character a JSON ``\\uXXXX`` escape (UTF-16 code units)."""
    units = key.encode("utf-16-be")
    return "".join(f"\\u{int.from_bytes(units[i : i + 2]):04{case}}" for i in range(0, len(units), 2))


REPRESENTATIONS: dict[str, Callable[[str], str]] = {
    "plain": lambda key: key,
    "repr": repr,
    "ascii": ascii,
    "bytes-repr": lambda key: repr(("Bearer " + key).encode()),
    "json": json.dumps,
    "json-of-repr": lambda key: json.dumps({"m": repr(key)}),
    "repr-of-json": lambda key: repr(json.dumps(key)),
    "percent": lambda key: quote(key, safe=""),
    "percent-lower": lambda key: re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(key, safe="")),
    "quote-plus": quote_plus,
    "percent-every": lambda key: "".join(f"%{b:02X}" for b in key.encode()),
    "percent-every-lower": lambda key: "".join(f"%{b:02x}" for b in key.encode()),
    "percent-unreserved-too": lambda key: "".join(
        c if c.isascii() and c.isalnum() else "".join(f"%{b:02X}" for b in c.encode()) for c in key
    ),
    "json-unicode": lambda key: _unicode_escapes(key, "X"),
    "json-unicode-lower": lambda key: _unicode_escapes(key, "x"),
    "json-of-json-unicode": lambda key: json.dumps(_unicode_escapes(key, "x")),
    "host-lower": lambda key: f"http://{key.lower()}.invalid/v1",
    "basic-aligned": _b64(b"abc:", b""),  # the key starts a 3-byte group
    "basic-user": _b64(b"user:", b"\n"),  # one byte of the group before the key
    "basic-me": _b64(b"me:", b"!?"),  # two bytes of the group before the key
    "urlsafe": _b64(b"x", b"y", url=True),
}

_TEXT = string.ascii_letters + string.digits + " .,:;!?'\"\\/+=-_%é中😀\n"


def _stream(pieces: list[str], redactor: Redactor) -> tuple[str, str]:
    """(the streamed text, the text of the final block-end) of ``pieces`` through a scrubber."""
    scrubber = ChunkScrubber(redactor)
    chunks: list[StreamChunk] = [BlockStart(0, "text"), *(TextDelta(0, p) for p in pieces if p)]
    chunks.append(BlockEnd(0, TextBlock("".join(pieces))))
    shown = [out for chunk in chunks for out in scrubber.feed(chunk)]
    end = shown[-1]
    assert isinstance(end, BlockEnd)
    assert isinstance(end.block, TextBlock)
    return "".join(c.text for c in shown if isinstance(c, TextDelta)), end.block.text


def _secret_parts(key: str, form: str, encoded: str) -> list[str]:
    """What must not show of ``encoded`` (``form`` applied to ``key``): the escaped form, or for
    base64 the characters that depend on the key alone (each alignment's fragment)."""
    if form.startswith(("basic", "urlsafe")):
        return [f.fragment for f in _base64_forms(key) if f.fragment in encoded]
    if form == "host-lower":
        return [key.lower()]
    return [REPRESENTATIONS[form](key)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    form=st.sampled_from(sorted(REPRESENTATIONS)),
    before=st.text(_TEXT, max_size=12),
    after=st.text(_TEXT, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_a_key_in_any_representation_split_anywhere_never_shows(
    form: str, before: str, after: str, cuts: list[int]
) -> None:
    encoded = REPRESENTATIONS[form](KEY)
    text = before + encoded + after
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    streamed, block = _stream(pieces, REDACTOR)
    assert streamed == block == REDACTOR(text)  # the same as masking the whole text at once
    for part in _secret_parts(KEY, form, encoded):
        assert part not in streamed
    assert MASK in streamed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.text(string.ascii_letters + string.digits + "-_~/+='\"\\é", min_size=56, max_size=64),
    form=st.sampled_from(sorted(REPRESENTATIONS)),
    cuts=st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=4),
)
def test_any_key_in_any_representation_split_anywhere_never_shows(key: str, form: str, cuts: list[int]) -> None:
    redactor = _redactor(key)
    encoded = REPRESENTATIONS[form](key)
    text = f"echo: {encoded} done"
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    streamed, _ = _stream([text[a:b] for a, b in itertools.pairwise(bounds)], redactor)
    assert streamed == redactor(text)
    for part in _secret_parts(key, form, encoded):
        assert part not in streamed


@pytest.mark.parametrize(
    "delta", [" hello", " yes!", " blue", " word,", " 42", " é", " 😀", "\n", " the café", " way."]
)
def test_an_ordinary_delta_passes_at_once(delta: str) -> None:
    stream = REDACTOR.stream()
    assert stream.feed(delta) is delta  # the very same text: nothing held, nothing copied


def test_each_character_that_can_begin_a_base64_lead_waits_and_nothing_else() -> None:
    key = "sk-" + "live-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQR"
    redactor = _redactor(key)
    starts: set[str] = set()
    for form in _base64_forms(key):  # any character of a lead, or the fragment's first
        starts.update(form.fragment[0], *form.lead)
    for char in string.ascii_letters + string.digits + "+/-_":
        held = redactor.safe_end(" " + char) == 1
        could_start = char in starts or any(form.startswith(char) for form in (key, key.upper(), repr(key), quote(key)))
        assert held == could_start, char


@pytest.mark.parametrize("before", [b"", b"x", b"xy"])
def test_the_lead_of_each_alignment_is_held_until_it_is_decided(before: bytes) -> None:
    key = "sk-" + "live-" + "abcdefghijklmnop"
    redactor = _redactor(key)
    encoded = base64.b64encode(before + key.encode()).decode()
    text = f"B64[{encoded}]"
    whole = redactor(text)
    assert whole == f"B64[{encoded[: len(before)]}{MASK}]"  # only the bits of `before` show
    for cut in range(len(text) + 1):
        stream = redactor.stream()
        assert stream.feed(text[:cut]) + stream.feed(text[cut:]) + stream.flush() == whole, cut


def test_a_text_that_only_looks_like_a_lead_is_released_by_the_next_delta() -> None:
    key = "sk-" + "live-" + "abcdefghijklmnop"
    redactor = _redactor(key)
    lead = base64.b64encode(b"x" + key.encode()).decode()[1:3]  # two characters of a real lead
    stream = redactor.stream()
    assert stream.feed("see " + lead) == "see "
    assert stream.feed(" ok.") == lead + " ok."


def test_a_delta_of_a_block_never_started_is_held_back_and_masked_too() -> None:
    scrubber = ChunkScrubber(REDACTOR)
    assert scrubber.feed(TextDelta(2, KEY[:9])) == []  # the start of the key: all of it waits
    assert scrubber.feed(TextDelta(2, KEY[9:] + "!")) == [TextDelta(2, MASK + "!")]
    assert scrubber.feed(TextDelta(3, "key: " + KEY[:9])) == [TextDelta(3, "key: ")]
    assert scrubber.feed(TextDelta(3, KEY[9:20])) == []  # still only the start of the key
    assert scrubber.feed(TextDelta(3, KEY[20:] + ".")) == [TextDelta(3, MASK + ".")]


def test_an_unknown_chunk_kind_naming_a_masked_block_passes_unchanged() -> None:
    class Marker(msgspec.Struct, frozen=True):
        index: int

    scrubber = ChunkScrubber(REDACTOR)
    scrubber.feed(BlockStart(0, "text"))
    marker = Marker(0)
    assert scrubber.feed(marker) == [marker]  # type: ignore[arg-type, comparison-overlap]


def test_a_secret_added_after_use_is_masked_and_the_earlier_ones_still_are() -> None:
    redactor = _redactor(KEY)
    assert redactor(f"a {KEY}") == f"a {MASK}"  # built here, on first use
    other = "sk-" + "other-" + "9876543210" * 5
    redactor.add(other)  # built again on the next use, the first key's forms reused
    assert redactor(f"{KEY} {other}") == f"{MASK} {MASK}"
    assert redactor.safe_end("x " + other[:10]) == 2
