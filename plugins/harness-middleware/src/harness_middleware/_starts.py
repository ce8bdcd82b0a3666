r"""Where a match of a pattern may start in streamed text, cheaply; facts about a pattern's length.

The stream masker asks, for every delta, for the first position where a match starts or may
start once more text follows: a complete match, or a *partial* match of the ``regex`` module
(``partial=True``, https://github.com/mrabarnett/mrab-regex#partial-matches: a match attempt
that reads up to the end of the text). ``regex``'s own partial search does not answer that: it
reports a complete match whenever there is one, even when a partial match starts earlier (an
``sk-`` key still too short, a Slack token inside it already complete). :class:`MatchStarts`
answers from three facts about each alternative of the pattern, derived once from its syntax tree:

- ``first``: the characters a match can start with (the first character it consumes, or that a
  lookahead at its start reads);
- ``alphabet``: every character a match can consume or look at;
- ``literals``: texts one of which every complete match contains (``sk-``, ``@``, ``KIA`` or
  ``SIA``), the rarest in prose of the runs of literal characters the pattern requires.

A complete match needs one of some alternative's literals in the text: without any, no search is
made.
``regex`` reports a partial match at ``p`` only when matching from ``p`` read every character up
to the end of the text, so the text from ``p`` on is made of the alphabet of that alternative and
starts with one of its first characters: an alternative whose tail (the longest end of the text
made of its alphabet) holds none of its first characters cannot match partially, and one that
can is searched alone, from the start of that tail (:func:`earliest`). Assertions (``\b``,
``^``, lookbehind) are ignored: they only narrow where a match starts. The answer is exact.

The tree comes from CPython's own parser of ``re`` syntax (``re._parser``). ``regex`` syntax is a
superset of it, so a pattern the parser rejects or may read differently from ``regex`` (a literal
``{``: fuzzy-matching constraints ``{e<=1}``; ``[[``: POSIX classes and nested sets), one with a
back-reference or a conditional, or a case-insensitive one, gets no sets: :func:`earliest` over
the whole pattern answers. Character classes given by category (``\w``, ``\d``, ``\s``:
Unicode-wide), negated classes and ``.`` count as "any character".

:func:`longest`, :func:`behind` and :func:`may_be_empty` read the same tree: the longest match a
pattern can span and how far before a match it looks (``None``: unbounded or unknown), and
whether a pattern can match the empty string.
"""

from __future__ import annotations

import functools
import importlib
import re
import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

if TYPE_CHECKING:  # pragma: no cover - typing only; ``regex`` is imported where a pattern is compiled
    import regex

__all__ = ["MatchStarts", "behind", "earliest", "literal_filter", "longest", "may_be_empty", "plain"]

_Chars: TypeAlias = frozenset[str] | None
"""A set of characters; ``None`` is "any character"."""

_parser: Any = importlib.import_module("re._parser")  # CPython's parser of ``re`` syntax (3.11+)

_MAX_RANGE: Final = 4096  # characters of one class range written out; wider ranges count as "any"


class _Unsupported(Exception):
    """A construct whose characters cannot be bounded safely."""


class MatchStarts:
    """Where the partial-matching scan of a pattern reports its first match (see module doc).

    Args:
        sources: the alternatives of the pattern, in order.
        pattern: ``sources`` compiled as one alternation (``regex`` module), each in a group.
    """

    __slots__ = ("_always", "_by_last", "_literals", "_pattern")

    def __init__(self, sources: Sequence[str], pattern: regex.Pattern[str]) -> None:
        self._pattern = pattern
        checks = _checks(sources, pattern.pattern)
        self._always: _Bucket | None = None
        self._by_last: dict[str, _Bucket] = {}
        self._literals: re.Pattern[str] | None = None
        if checks is None:
            return  # no sets: the scan itself is asked
        self._literals = literal_filter(sources, pattern.pattern)
        # the alternatives whose alphabet holds each character (those without one hold every one)
        holding: dict[str, list[int]] = {}
        for i, check in enumerate(checks):
            for char in check[0] or ():
                holding.setdefault(char, []).append(i)
        buckets: dict[tuple[int, ...], _Bucket] = {}
        for char, found in holding.items():
            key = tuple(i for i, check in enumerate(checks) if check[0] is None or i in found)
            if key not in buckets:
                buckets[key] = _bucket([checks[i] for i in key])
            self._by_last[char] = buckets[key]
        self._always = _bucket([check for check in checks if check[0] is None])

    def may_match(self, text: str) -> bool:
        """Whether ``text`` may hold a complete match; ``False`` when it holds none of the
        texts that every match of an alternative contains (a search would find nothing)."""
        literals = self._literals
        return literals is None or literals.search(text) is not None

    def first(self, text: str, start: int) -> int:
        """The first position from ``start`` on where a match starts in ``text`` or may start
        once more text follows: the earliest of the first complete match and of every partial
        match (a match attempt that reads up to the end of ``text``); ``len(text)`` when none.

        Before that position no match can start, whatever text follows."""
        end = len(text)
        always = self._always
        if always is None:
            return earliest(self._pattern, text, start, end, None)
        pending = text[start:]
        first = end
        literals = self._literals
        if literals is None or literals.search(pending) is not None:  # :meth:`may_match`, inline
            found = self._pattern.search(text, start)
            if found is not None:
                first = found.start()
                if first == start:  # no partial match can start before it
                    return first
        # the alternatives whose alphabet holds the last character (a partial match reaches it)
        common, rare_chars, rare = self._by_last.get(pending[-1:], always)
        for alphabet, chars, alternative, _ in common + rare if not rare_chars.isdisjoint(pending) else common:
            # a partial match lies in the tail made of the alphabet, from one of its first characters
            tail = start if alphabet is None else start + len(pending.rstrip(alphabet))
            if tail < first and (chars is None or not chars.isdisjoint(text[tail:first])):
                first = earliest(alternative, text, tail, first, chars)
        return first


def earliest(pattern: regex.Pattern[str], text: str, start: int, limit: int, chars: _Chars) -> int:
    """The first position in ``start .. limit - 1`` where ``pattern`` matches ``text`` or
    matches it partially (a match attempt from there reads up to the end of ``text``); ``limit``
    when there is none. ``chars``: the characters a match can start with (``None``: any).

    ``regex``'s partial search reports a complete match when there is one, even when a partial
    match starts earlier: then the positions before it are tried one by one."""
    found = pattern.search(text, start, partial=True)
    stop = limit if found is None else min(found.start(), limit)
    if found is None or found.partial:  # no complete match: the first partial one (or an empty one at the end)
        return stop
    for position in range(start, stop):
        if (chars is None or text[position] in chars) and pattern.fullmatch(text, position, partial=True):
            return position
    return stop


def literal_filter(sources: Sequence[str], combined: str) -> re.Pattern[str] | None:
    """A plain ``re`` search for texts one of which every match of each of ``sources`` contains
    (``combined``: their alternation as compiled); ``None`` when that is not known for one of
    them. No match can lie in a text it does not find, so a masker can pass such a text on
    without compiling (or importing) ``regex``."""
    if _sets(combined) is None:  # also when one of ``sources`` is, or has an inline global flag
        return None
    sets = [_sets(source) for source in sources]
    if not all(bounded is not None and bounded[2] for bounded in sets):
        return None  # plain text search only when every alternative has its texts
    texts = sorted(set().union(*(bounded[2] for bounded in sets if bounded is not None)), key=lambda t: (-len(t), t))
    return re.compile("|".join(map(re.escape, texts)))


def plain(source: str) -> bool:
    """Whether ``source`` is plain ``re`` syntax that ``regex`` reads the same way (CPython's
    parser reads it; see module doc): then it needs no ``regex`` compile to be known valid."""
    return _parse(source) is not None


def longest(source: str) -> int | None:
    """The most characters a match of ``source`` can span; ``None`` when unbounded (``a+``) or
    not known (syntax only the ``regex`` module reads)."""
    width = _widths(source)
    return None if width is None or width[1] >= _parser.MAXWIDTH else width[1]


def may_be_empty(source: str) -> bool:
    """Whether ``source`` can match the empty string somewhere (``\\b``, ``x*``, ``(?=x)``);
    when its syntax tree is not known, whether it matches the empty text."""
    width = _widths(source)
    if width is not None:
        return width[0] == 0
    import regex  # syntax only ``regex`` reads: ask it

    return regex.fullmatch(source, "") is not None


def behind(source: str) -> int | None:
    """The most characters before the start of a match that ``source`` reads (look-behind,
    ``\\b``, ``\\B``); ``None`` when unbounded or not known."""
    tree = _parse(source)
    if tree is None or _sets(source) is None:
        return None
    reach = _behind(list(tree))
    return None if reach >= _parser.MAXWIDTH else reach


def _behind(items: list[Any]) -> int:
    """:func:`behind` of the sequence ``items`` (a look-behind inside a match reads back at most
    its own width from where it stands, which is not before the match's start)."""
    reach = 0
    for op, av in items:
        name = str(op)
        if name == "AT":
            reach = max(reach, 1 if str(av) in ("AT_BOUNDARY", "AT_NON_BOUNDARY") else 0)
        elif name in _ASSERTS and av[0] == -1:
            reach = max(reach, av[1].getwidth()[1] + _behind(list(av[1])))
        elif name not in _CHAR_OPS:
            reach = max([reach, *(_behind(child) for child in _children(name, av))])
    return reach


def _widths(source: str) -> tuple[int, int] | None:
    """``(shortest, longest)`` match of ``source``, ``None`` when its tree is not known (the
    patterns :class:`MatchStarts` has no sets for: ``regex`` may read them differently)."""
    tree = _parse(source)
    if tree is None or _sets(source) is None:
        return None
    low, high = tree.getwidth()
    return int(low), int(high)


_RARE: Final = 16  # an alternative starting with at most this many characters is checked only
# when one of them is in the text (a key's prefix: ``sk-``, ``AKIA``), as a group


def _bucket(checks: list[_Check]) -> _Bucket:
    """``checks`` as (always checked, the first characters of the rest, the rest)."""
    rare = tuple(check for check in checks if check[1] is not None and len(check[1]) <= _RARE)
    common = tuple(check for check in checks if check not in rare)
    return common, frozenset().union(*(check[1] or () for check in rare)), rare


_Check: TypeAlias = "tuple[str | None, frozenset[str] | None, regex.Pattern[str], frozenset[str]]"
"""One alternative: its alphabet (an ``str.rstrip`` argument), first characters (``None``: any),
the alternative compiled alone, and texts one of which every complete match contains (empty:
none known)."""

_Bucket: TypeAlias = tuple[tuple[_Check, ...], frozenset[str], tuple[_Check, ...]]


def _checks(sources: Sequence[str], combined: str) -> list[_Check] | None:
    """The :data:`_Check` of each of ``sources``, or ``None`` when one cannot be bounded."""
    import regex

    sets = [_sets(source) for source in sources]
    if _sets(combined) is None:  # also when one of ``sources`` is, or has an inline global flag
        return None
    checks: list[_Check] = []
    for source, bounded in zip(sources, sets, strict=True):
        assert bounded is not None  # part of ``combined``, which is bounded
        first, alphabet, literals = bounded
        rstrip = None if alphabet is None else "".join(sorted(alphabet))
        checks.append((rstrip, first, regex.compile(source), literals))
    return checks


@functools.lru_cache(maxsize=256)  # a masker asks for each pattern more than once
def _sets(source: str) -> tuple[_Chars, _Chars, frozenset[str]] | None:
    """``(first, alphabet, literals)`` of ``source`` (see module doc and :func:`_literals`),
    ``None`` when it cannot be bounded."""
    tree = _parse(source)
    if tree is None:
        return None  # not plain ``re`` syntax (or read differently): no sets, scan everything
    items = list(tree)
    try:
        if tree.state.flags & re.IGNORECASE:
            raise _Unsupported("IGNORECASE")
        return _first(items)[0], _alphabet(items), min(_required(items), key=_frequency, default=frozenset())
    except (_Unsupported, RecursionError):  # RecursionError: nested deeper than the walk can go
        return None


@functools.lru_cache(maxsize=256)
def _parse(source: str) -> Any:
    """The syntax tree of ``source``; ``None`` when it is not plain ``re`` syntax (or may be
    read differently by ``regex``: ``[[``, see module doc)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # FutureWarning: ``[[`` that ``regex`` may read otherwise
            return _parser.parse(source)
    except (re.error, Warning, RecursionError, OverflowError, ValueError):
        return None


def _union(a: _Chars, b: _Chars) -> _Chars:
    return None if a is None or b is None else a | b


def _chars(op: str, av: Any) -> _Chars:
    """The characters one character position (``LITERAL``, ``IN``, …) accepts."""
    if op == "LITERAL":
        if av == ord("{"):
            raise _Unsupported("{")  # ``regex`` may read fuzzy-matching constraints here
        return frozenset(chr(av))
    if op != "IN":
        return None  # NOT_LITERAL, ANY
    chars: set[str] = set()
    for kind, value in av:
        kind = str(kind)
        if kind == "LITERAL":
            chars.add(chr(value))
        elif kind == "RANGE" and value[1] - value[0] < _MAX_RANGE:
            chars.update(chr(c) for c in range(value[0], value[1] + 1))
        else:  # NEGATE, CATEGORY, wide ranges
            return None
    return frozenset(chars)


_CHAR_OPS: Final = frozenset({"LITERAL", "NOT_LITERAL", "ANY", "IN"})
_REPEATS: Final = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})
_ASSERTS: Final = frozenset({"ASSERT", "ASSERT_NOT"})


def _children(op: str, av: Any) -> Iterable[list[Any]]:
    """The sub-sequences of a group-like node (repeats, groups, branches, lookarounds)."""
    if op in _REPEATS:
        return [list(av[2])]
    if op == "SUBPATTERN":
        if av[1] & re.IGNORECASE:  # (?i:…)
            raise _Unsupported("IGNORECASE")
        return [list(av[3])]
    if op == "ATOMIC_GROUP":
        return [list(av)]
    if op == "BRANCH":
        return [list(branch) for branch in av[1]]
    if op in _ASSERTS:
        return [list(av[1])]
    raise _Unsupported(op)  # back-references, conditionals


def _first(items: list[Any]) -> tuple[_Chars, bool]:
    """The characters a match of the sequence ``items`` can start with, and whether it can be
    empty (zero-width items are; a lookahead's first characters count: it reads them)."""
    first: _Chars = frozenset()
    for op, av in items:
        name = str(op)
        if name in _CHAR_OPS:
            return _union(first, _chars(name, av)), False
        if name == "AT" or (name in _ASSERTS and av[0] != 1):
            continue  # zero-width; a lookbehind reads only characters before the match
        results = [_first(child) for child in _children(name, av)]
        for child_first, _ in results:
            first = _union(first, child_first)
        if name in _ASSERTS:
            nullable = True
        elif name == "BRANCH":
            nullable = any(child_nullable for _, child_nullable in results)
        elif name in _REPEATS:
            nullable = av[0] == 0 or results[0][1]
        else:
            nullable = results[0][1]
        if not nullable:
            return first, False
    return first, True


def _alphabet(items: list[Any]) -> _Chars:
    """Every character the sequence ``items`` can consume or look at."""
    alphabet: _Chars = frozenset()
    for op, av in items:
        name = str(op)
        if name in _CHAR_OPS:
            alphabet = _union(alphabet, _chars(name, av))
        elif name != "AT":
            for child in _children(name, av):
                alphabet = _union(alphabet, _alphabet(child))
        if alphabet is None:
            return None
    return alphabet


def _required(items: list[Any]) -> list[frozenset[str]]:
    """Sets of texts such that every match of the sequence ``items`` contains one text of each:
    its runs of literal characters (outside groups), and what its groups, repeats of at least one
    and branches (one text of each branch) require."""
    required: list[frozenset[str]] = []
    run = ""
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            run += chr(av)
            continue
        if name == "AT":
            continue  # a zero-width assertion does not break a run
        if run:
            required.append(frozenset({run}))
            run = ""
        if name in ("SUBPATTERN", "ATOMIC_GROUP") or (name in _REPEATS and av[0] >= 1):
            required += _required(next(iter(_children(name, av))))
        elif name == "BRANCH":
            children = list(_children(name, av))
            branches = [min(found, key=_frequency) for found in map(_required, children) if found]
            if len(branches) == len(children):  # each branch requires something
                required.append(frozenset().union(*branches))
    if run:
        required.append(frozenset({run}))
    return required


def _frequency(texts: frozenset[str]) -> float:
    """A rough frequency in prose of the most frequent of ``texts`` (per character: a lowercase
    letter 1/25, a space 1/6, an uppercase letter, digit or common punctuation 1/100, any other
    character 1/5,000)."""
    most = 0.0
    for text in texts:
        frequency = 1.0
        for char in text:
            if char == " ":
                frequency /= 6
            elif char.islower():
                frequency /= 25
            elif char.isupper() or char.isdigit() or char in ".,;:'\"-!?()":
                frequency /= 100
            else:
                frequency /= 5000
        most = max(most, frequency)
    return most
