"""redact's fast path: the stream masker, which skips partial matching where no match can start
(``MatchStarts``), emits exactly what masking the whole text emits, for every split of the text,
with the presets and with custom patterns of every kind (lookarounds, classes by category,
negations, case-insensitive ones, back-references); ``MatchStarts.first`` equals a
position-by-position reference."""

from __future__ import annotations

import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness_middleware._starts import MatchStarts, behind, earliest, longest, may_be_empty
from harness_middleware.redact import PRESETS, Masker

CUSTOM = {
    "lookahead": r"tok(?=en_)[a-z_]{2,12}",
    "lookbehind": r"(?<=id:)\d{3,6}",
    "category": r"\bpin-\w{4}\b",
    "negated": r"<[^>]{1,20}>",
    "optional": r"(?:x-)?api-?k(?:ey)?=[0-9a-f]{8}",
    "possessive": r"(?>zz)z*+q",
    "lazy": r"#\d+?#",
    "dot": r"~.{3}~",
    "branches": r"(?:foo|fob|bar)\d",
    "leading-lookahead": r"(?=\d)\d{3}-\d{4}",
    "empty-group": r"(-?)\d{2,3}%",
    "spaced": r"(?:token: |\d\d:)[a-f0-9]{6}",
}
"""Custom patterns with constructs the character sets bound."""

UNBOUNDED = {
    "ignore-case": r"(?i)secret-\d{3}",
    "local-ignore-case": r"pass(?i:word)=\S+",
    "backreference": r"(?P<q>['\"])[a-z]{3,9}(?P=q)",
    "fuzzy": r"(?:hunter2){e<=1}",
    "posix": r"[[:digit:]]{4}-[[:digit:]]{4}",
    "unicode-property": r"\p{Lu}{3}\d{3}",
}
"""Patterns without character sets: the masker scans every delta with partial matching."""

PATTERN_SETS = [
    dict(PRESETS),
    CUSTOM,
    {**PRESETS, **CUSTOM},
    UNBOUNDED,
    {**PRESETS, **UNBOUNDED},
    *({name: source} for name, source in {**CUSTOM, **UNBOUNDED}.items()),
]


MASKERS = [Masker(patterns, "[{name}]") for patterns in PATTERN_SETS]

WORDS = [
    "sk-",
    "sk-proj-",
    "AKIA",
    "ASIA",
    "AIza",
    "ghp_",
    "xoxb-",
    "Bearer ",
    "bearer\t",
    "@",
    ".",
    "-",
    "_",
    "bob",
    "example",
    "com",
    "io",
    "word",
    " ",
    "  ",
    "\n",
    "é",
    "€",
    "日本",
    "0123",
    "ABCD",
    "abcdef",
    "tok",
    "en_",
    "id:",
    "pin-",
    "<",
    ">",
    "x-",
    "api",
    "key=",
    "ey",
    "zz",
    "q",
    "#",
    "~",
    "foo",
    "fob",
    "bar",
    "secret-",
    "SECRET-",
    "pass",
    "WORD=",
    "'",
    '"',
    "hunter",
    "hunte2",
    "2",
    "XYZ",
    "%",
    "555",
    "12",
    "token: ",
    "99:",
]

texts = st.lists(st.sampled_from(WORDS), max_size=40).map("".join)


def pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({min(c, len(text)) for c in cuts})
    out, prev = [], 0
    for b in bounds:
        out.append(text[prev:b])
        prev = b
    out.append(text[prev:])
    return out


def run(masker: Masker, parts: list[str]) -> str:
    stream = masker.stream()
    return "".join([stream.feed(part) for part in parts] + [stream.flush()])


def first_reference(pattern: regex.Pattern[str], text: str, start: int) -> int:
    """Position by position: the first where a match starts or a match attempt reads to the end."""
    for position in range(start, len(text)):
        if pattern.match(text, position) or pattern.fullmatch(text, position, partial=True):
            return position
    return len(text)


@settings(max_examples=300, deadline=None)
@given(
    index=st.integers(0, len(MASKERS) - 1),
    text=texts,
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
@example(index=0, text="key sk-proj-" + "a" * 30 + " mail bob@example.com end", cuts=[5, 13, 40])
@example(index=0, text="Bearer abcdefghijklmnopqrstuv= x", cuts=[3, 7, 8])
def test_stream_equals_the_whole_text(index: int, text: str, cuts: list[int]) -> None:
    masker = MASKERS[index]
    assert run(masker, pieces(text, cuts)) == masker.mask(text)
    assert masker.pattern is not None
    assert masker.mask(text) == masker.pattern.sub(masker._replace, text)  # a text without literals is skipped


def test_every_split_and_character_delta_equals_the_whole_text() -> None:
    text = "x Bearer abcdefghijklmnopqrstuvwxyz ok é€ mail bob.smith@example.co.uk id:12345 sk-" + "b" * 24 + " end"
    for masker in MASKERS:
        expected = masker.mask(text)
        for i in range(len(text) + 1):
            assert run(masker, [text[:i], text[i:]]) == expected
        assert run(masker, list(text)) == expected


def test_first_is_where_a_match_may_start() -> None:
    """``MatchStarts.first``: the first position with a complete or a partial match, for each text end."""
    for patterns in PATTERN_SETS:
        masker = Masker(patterns, "x")
        assert masker.pattern is not None
        assert masker.starts is not None
        text = "ab sk-pro AKIA12 bob@exa id:12 Bearer abc tok <ab pin-ab12 foo1 (SECRET-1 'abc' -12% 555-12"
        text += " token: ab 99:a"
        for end in range(len(text) + 1):
            for start in (0, end // 2, end):
                expected = first_reference(masker.pattern, text[:end], start)
                assert masker.starts.first(text[:end], start) == expected, (patterns, text[:end], start)


def test_unbounded_patterns_have_no_character_sets() -> None:
    for name, source in UNBOUNDED.items():
        starts = MatchStarts([source], regex.compile(f"(?P<_p0>{source})"))
        assert starts._always is None, name
    # an alternative bounded alone, unbounded inside the alternation (a global flag there)
    assert MatchStarts(["ab"], regex.compile("(?i)(?P<_p0>ab)"))._always is None


def test_ordinary_text_is_decided_without_partial_matching() -> None:
    """With the presets, a delta that cannot start a match is emitted whole at once."""
    stream = Masker(PRESETS, "x").stream()
    assert stream.feed("word ") == "word "
    assert stream.feed("more words, and. ") == "more words, and. "
    assert stream.feed(" held") == " "  # may be the start of an e-mail address
    assert stream.feed("@example.com") == ""  # more text may extend the match
    assert stream.feed(" ") == "x "  # decided
    assert stream.flush() == ""


def test_earliest_finds_a_partial_match_before_a_complete_one() -> None:
    """``regex``'s partial search reports the later complete match; ``earliest`` the partial one."""
    pattern = regex.compile(r"sk-[\w-]{20,}|xoxb-\w{5,}")
    text = "ok sk-xoxb-abcdefg"
    assert pattern.search(text, 0, partial=True).start() == 6  # type: ignore[union-attr]
    assert earliest(pattern, text, 0, len(text), frozenset("sx")) == 3
    assert earliest(pattern, text, 0, len(text), None) == 3
    assert earliest(pattern, text, 0, 2, None) == 2  # nothing before the limit
    assert earliest(pattern, "sk-ab xoxb-abcdefg", 0, 18, frozenset("sx")) == 6  # the complete one
    assert earliest(pattern, "sk-ab", 0, 5, None) == 0  # only a partial match
    assert earliest(pattern, "no key", 0, 6, None) == 6  # only the empty partial match at the end


def test_pattern_lengths() -> None:
    assert longest(PRESETS["bearer"]) == 212
    assert longest("a+b") is None
    assert longest(r"\p{L}{3}") is None  # syntax the tree does not know
    assert may_be_empty(r"(?<=a)b?")
    assert not may_be_empty("ab?")
    assert may_be_empty(r"\p{L}*")
    assert not may_be_empty(r"\p{L}+")


def test_look_behind_reach() -> None:
    assert behind(PRESETS["email"]) == 1  # ``\b``
    assert behind(r"\bab(?<=x.{3})(?<!y)\B") == 4
    assert behind(r"(?<=a(?<=bc))d") == 3
    assert behind(r"(?=x(?<=.{90}))x") == 90
    assert behind("a(?<=a+)") is None  # unbounded
    assert behind(r"\p{L}") is None  # not known
