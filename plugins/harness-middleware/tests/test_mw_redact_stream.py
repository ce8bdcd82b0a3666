"""redact: for every text and every split into deltas, what the stream masker emits (plus its
flush) equals masking the whole text, with the presets and with random custom patterns that
overlap them and each other (leftmost match first, then the first pattern in order)."""

from __future__ import annotations

import itertools
import os

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness_core.errors import LlmError
from harness_middleware.redact import PRESETS, Masker, RedactPlugin

EXAMPLES = int(os.environ.get("REDACT_STREAM_EXAMPLES", "400"))
"""Hypothesis examples per property; raise it for a long local run."""

CUSTOM = [
    r"a+b",
    r"ab|b",
    r"b+a",
    r"(?:ab)+c",
    r"x{2,5}",
    r"a(?=bb)",
    r"k(?!e)[a-z]{2}",
    r"[a-z]{1,8}@[a-z]{1,8}\.(?:io|com)",
    r"sk-[a-z]{3,}",
    r"AIza[0-9A-Za-z_-]{5}",
    r"ke?y[:=]\s*\S+",
    r"\d{3,}",
    r"(?i)secret",
    r"[^ ]{4}@",
    r"_[a-z]+_",
]
"""Custom patterns: unbounded repeats, branches, lookarounds, overlaps with the presets."""

FRAGMENTS = [
    "sk-",
    "sk-proj-",
    "xoxb-",
    "AIza",
    "AKIA",
    "ghp_",
    "Bearer ",
    "@",
    ".",
    "io",
    "com",
    "-",
    "_",
    " ",
    "a",
    "aa",
    "ab",
    "b",
    "bb",
    "c",
    "x",
    "xxx",
    "key:",
    "ke",
    "y=",
    "SECRET",
    "123",
    "4567",
    "é",
    "€",
    "日",
    "ABCDEFGHIJ",
    "abcdefghij",
    "0123456789",
    "KLMNOPQRSTUVWXYZ",
]
"""Pieces of matches and near-matches: random texts built from them match often."""

SLACK_IN_OPENAI = "sk-xoxb-eWcFbiTZWJXmDELGXr_secretTAIL_more_key_material ok"

texts = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join)


def masker_for(presets: bool, custom: list[str]) -> Masker:
    patterns = dict(PRESETS) if presets else {}
    patterns.update({f"c{i}": source for i, source in enumerate(custom)})
    if not patterns:
        patterns = {"c": "a+b"}
    return Masker(patterns, "<{name}>")


def streamed(masker: Masker, text: str, cuts: list[int]) -> str:
    stream = masker.stream()
    bounds = sorted({0, len(text), *(min(cut, len(text)) for cut in cuts)})
    out = [stream.feed(text[a:b]) for a, b in itertools.pairwise(bounds)]
    return "".join(out) + stream.flush()


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    presets=st.booleans(),
    custom=st.lists(st.sampled_from(CUSTOM), max_size=4, unique=True),
    text=texts,
    cuts=st.lists(st.integers(0, 600), max_size=20),
    characters=st.booleans(),
)
@example(presets=True, custom=[], text="x.AIza" + "b" * 35 + "-y@example.com", cuts=[], characters=True)
@example(presets=True, custom=[], text=SLACK_IN_OPENAI, cuts=[], characters=True)
def test_stream_equals_the_whole_text(
    presets: bool, custom: list[str], text: str, cuts: list[int], characters: bool
) -> None:
    masker = masker_for(presets, custom)
    expected = masker.mask(text)
    assert streamed(masker, text, cuts) == expected
    if characters:  # one character per delta
        assert streamed(masker, text, list(range(len(text)))) == expected


def test_a_partial_match_starting_earlier_wins_over_a_later_complete_one() -> None:
    """Report item 1: a Slack token inside an OpenAI key, one character per delta."""
    masker = RedactPlugin().masker
    text = SLACK_IN_OPENAI
    assert masker.mask(text) == "[REDACTED:openai-key] ok"
    for size in (1, 2, 3, 5, 8, 13):
        assert streamed(masker, text, list(range(0, len(text), size))) == "[REDACTED:openai-key] ok"


def test_a_custom_pattern_inside_a_google_key() -> None:
    """Report item 2: ``a+b`` completes inside a Google API key that is still partial."""
    masker = RedactPlugin(msgspec.convert({"patterns": {"ab": "a+b"}}, RedactPlugin.Config)).masker
    text = "key: AIza6Y_yabt00TB7vdZTMyvex_HhYxo7p9B0qUL end"
    assert masker.mask(text) == "key: [REDACTED:google-api-key] end"
    for size in (1, 2, 5, 10):
        assert streamed(masker, text, list(range(0, len(text), size))) == masker.mask(text)


def test_an_unbounded_match_is_held_until_decided() -> None:
    masker = Masker({"ab": "a+b"}, "<{name}>")
    stream = masker.stream()
    assert stream.feed("x " + "a" * 1000) == "x "
    assert stream.feed("ab") == ""  # a match ending at the end of the text is held: it may grow
    assert stream.feed("aaa c") == "<ab>aaa c"  # decided: no ``b`` can follow the space
    assert stream.flush() == ""


@pytest.mark.parametrize(
    ("patterns", "limit", "message"),
    [
        (
            {},
            40,
            "max_match_length 40 is below the longest match of pattern 'bearer' .212 characters.: it must",
        ),
        ({}, 211, "it must be at least 212"),
        ({"long": "x{300}"}, 256, "pattern 'long' .300 characters.: it must be at least 300"),
        ({"ab": "a+b"}, 300, "pattern 'ab' has no longest match"),
        ({"fuzzy": "(?:hunter2){e<=1}"}, 300, "pattern 'fuzzy' has no longest match"),
    ],
)
def test_max_match_length_below_a_pattern_is_a_config_error(patterns: dict[str, str], limit: int, message: str) -> None:
    """Report item 8: refused where the config is read (``config check``), naming the field."""
    with pytest.raises(msgspec.ValidationError, match=message):
        msgspec.convert({"patterns": patterns, "max_match_length": limit}, RedactPlugin.Config)
    with pytest.raises(LlmError, match=message) as caught:
        Masker({**PRESETS, **patterns}, "x", limit)
    assert caught.value.code == "CONFIG"


def test_max_match_length_at_the_longest_match_is_accepted() -> None:
    assert RedactPlugin(msgspec.convert({"max_match_length": 212}, RedactPlugin.Config)).masker.max_match_length == 212
    assert RedactPlugin().config.max_match_length is None


@pytest.mark.parametrize("source", [r"\b", r"(?=x)", r"x*", r"(?:a|)", r"\p{L}*"])
def test_a_pattern_that_can_match_nothing_is_refused(source: str) -> None:
    with pytest.raises(LlmError, match="matches the empty string"):
        Masker({"p": source}, "x")


def test_a_long_look_behind_sees_far_enough_back() -> None:
    """The context kept for look-behind is what the pattern reads before a match (80 here)."""
    masker = Masker({"pin": r"(?<=PIN: .{75})\d{4}"}, "<{name}>")
    assert masker.context == 80
    text = "PIN: " + "x" * 75 + "1234 and " + "y" * 100 + " 5678"
    assert masker.mask(text) == "PIN: " + "x" * 75 + "<pin> and " + "y" * 100 + " 5678"
    for cut in range(1, len(text)):
        assert streamed(masker, text, [cut]) == masker.mask(text)
    assert streamed(masker, text, list(range(len(text)))) == masker.mask(text)
    assert Masker({"p": r"\p{L}\d"}, "x").context == 64  # not known: the default


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(
    presets=st.booleans(),
    custom=st.lists(st.sampled_from(CUSTOM), max_size=4, unique=True),
    text=texts,
    start=st.integers(0, 600),
)
def test_first_is_the_first_complete_or_partial_match(presets: bool, custom: list[str], text: str, start: int) -> None:
    """``MatchStarts.first`` against trying every position: a match, or an attempt reading to the end."""
    masker = masker_for(presets, custom)
    assert masker.pattern is not None
    assert masker.starts is not None
    start = min(start, len(text))
    expected = next(
        (
            position
            for position in range(start, len(text))
            if masker.pattern.match(text, position) or masker.pattern.fullmatch(text, position, partial=True)
        ),
        len(text),
    )
    assert masker.starts.first(text, start) == expected
