"""The redactor: :class:`Redactor` masks every known secret value, in every representation
(:func:`~harness_core.secret.representations`), out of text; :func:`secrets_of` collects the
:class:`~harness_core.secret.Secret` values of a plugin or a config into one."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from harness_core.secret._forms import _base64_forms, _Base64Form, _text_forms
from harness_core.secret._holdback import TextStream, _HoldBack
from harness_core.secret._value import MASK, MIN_SECRET, Secret

__all__ = ["Redactor", "secrets_of"]


class Redactor:
    """Masks secret values, in every representation (:func:`representations`), out of text.

    The loader adds every value substituted from the environment (``${{ env.NAME }}``, in plugin
    configs and in ``defaults:``), every :class:`~harness_core.config.EnvFallback` value, and
    every value of a field typed :class:`Secret` (literal ones too); the runtime adds the
    ``Secret`` values of every plugin's config (:func:`secrets_of`). Calling the redactor
    (``redactor(text)``) or :meth:`mask` returns ``text`` with every form replaced by
    :data:`MASK`; :meth:`stream` masks a block arriving in pieces.
    """

    __slots__ = ("_built", "_forms", "_longest", "_matcher", "_prefixes", "_triples", "_values")

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._forms: dict[str, tuple[set[str], list[_Base64Form]]] = {}  # per value, computed once
        self._built = True  # whether the fields below reflect every value
        self._matcher: _Matcher | None = None  # the masking expression and its literal anchors
        self._prefixes: frozenset[str] = frozenset()
        self._longest = 0  # the longest prefix: computed once here, never per streamed delta
        self._triples: frozenset[str] = frozenset()  # every 3 characters in a row of a form

    def add(self, value: str) -> None:
        """Treat ``value`` (and its representations) as a secret from now on.

        Cheap: the masking expression and the texts a form can start with are built once, when
        the redactor is next used (so adding many secrets builds them once, not once each).
        """
        if len(value) >= MIN_SECRET and value not in self._values:
            self._values.add(value)
            self._built = False

    def _build(self) -> None:
        """Build the masking expression and the set of texts an occurrence can start with (every
        proper prefix of a plain or escaped form, and of each base64 form from any character of
        its leading partial group on), and the set of 3-character runs of those texts."""
        forms: set[str] = set()
        encoded: list[_Base64Form] = []
        values = list(self._values)  # a snapshot: a logging thread may mask while a value is added
        for value in values:
            known = self._forms.get(value)
            if known is None:
                known = self._forms[value] = (_text_forms(value), _base64_forms(value))
            forms |= known[0]
            encoded += known[1]
        fragments = {form.fragment for form in encoded}
        ordered = sorted(forms - fragments, key=len, reverse=True)  # longest first: a form inside another
        # base64 forms first, with their edges: the match then starts at the first masked character
        alternatives = [f.pattern() for f in sorted(encoded, key=lambda f: len(f.fragment), reverse=True)]
        pattern = re.compile("|".join([*alternatives, *map(re.escape, ordered)]))  # add() gave it a value
        self._matcher = _Matcher(pattern, [*ordered, *fragments])  # one assignment: a thread sees both or neither
        starts = forms.union(fragments, *(form.starts() for form in encoded))
        self._prefixes = frozenset(start[:k] for start in starts for k in range(1, len(start)))
        self._longest = max(map(len, self._prefixes), default=0)
        self._triples = frozenset(start[i : i + 3] for start in starts for i in range(len(start) - 2))
        self._built = len(values) == len(self._values)  # values only grow: one added meanwhile waits

    def update(self, other: Redactor) -> None:
        """Add every secret ``other`` knows."""
        for value in other._values:
            self.add(value)

    def __bool__(self) -> bool:
        return bool(self._values)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def __call__(self, text: str) -> str:
        """``text`` with every known secret, in every representation, replaced by :data:`MASK`."""
        if not self._built:
            self._build()
        matcher = self._matcher
        if matcher is None or not matcher.may_occur(text):
            return text
        return matcher.pattern.sub(MASK, text)

    mask = __call__

    def safe_end(self, text: str) -> int:
        """How much of ``text`` (a prefix length) can be shown now when more text may follow.

        The rest is held back: its longest tail that is the start of some masked form of a
        secret (the plain value, an escaped or percent-encoded form, a base64 form from any
        character of its leading partial group that carries bits of the secret), and any
        occurrence of a secret that the cut would split or that ends ``text`` (it may grow: a
        base64 form's trailing partial group). ``len(text)`` when nothing needs to wait, which
        is the case for ordinary text.
        """
        return self._cut(text)[0]

    def _cut(self, text: str) -> tuple[int, bool]:
        """:meth:`safe_end` and whether ``text`` holds an occurrence (if not, nothing to mask)."""
        if not self._built:
            self._build()
        matcher = self._matcher
        if matcher is None:
            return len(text), False
        cut = len(text)
        longest = min(self._longest, cut)
        if longest > 2 and text[-3:] not in self._triples:  # no longer tail can start a form
            longest = 2
        prefixes = self._prefixes
        for k in range(longest, 0, -1):
            if text[-k:] in prefixes:
                cut -= k
                break
        if not matcher.may_occur(text) or matcher.pattern.search(text) is None:  # the common case
            return cut, False
        for match in matcher.pattern.finditer(text):  # never cut through an occurrence of a secret,
            if match.start() < cut < match.end() or match.end() == len(text):  # nor one that may grow
                cut = min(cut, match.start())
        return cut, True

    def stream(self) -> TextStream:
        """A masker for one block of streamed text (hold-back by :meth:`safe_end`)."""
        return _HoldBack(self.mask, self._cut)

    def __repr__(self) -> str:
        return f"Redactor({len(self._values)} secrets)"


class _Matcher:
    """The masking expression of a :class:`Redactor` and a quick test that lets text without any
    occurrence skip it.

    Every occurrence contains one of ``literals`` whole (a text form, or the fragment of a base64
    form, which its pattern requires: :meth:`_Base64Form.pattern`), so it contains the first
    :attr:`size` characters of one (:attr:`anchors`, the shortest literal's length at most 8):
    text shorter than that, or holding no anchor, has none. ``str`` containment is a fast
    substring search, where the expression tries every alternative at every position (~2.6
    million instructions for 850 characters of ordinary text and two key-sized secrets;
    BENCHMARKS.md, issue 25 item 3).
    """

    __slots__ = ("anchors", "pattern", "size")

    def __init__(self, pattern: re.Pattern[str], literals: list[str]) -> None:
        self.pattern = pattern
        self.size = min(8, *map(len, literals))
        self.anchors = tuple(sorted({literal[: self.size] for literal in literals}))

    def may_occur(self, text: str) -> bool:
        """Whether ``text`` may hold an occurrence (``False``: it certainly holds none)."""
        if len(text) < self.size:
            return False
        for anchor in self.anchors:  # noqa: SIM110 (a loop: a generator costs more than the search on a delta)
            if anchor in text:
                return True
        return False


def secrets_of(value: Any, redactor: Redactor | None = None) -> Redactor:
    """A :class:`Redactor` holding every :class:`Secret` found in ``value``.

    ``value`` is walked through msgspec Structs (their fields, and what a Struct's own
    ``secret_parts()`` method returns: a secret inside a plain field, such as the password of a
    ``base_url``), a plugin's ``config`` attribute, mappings, lists and tuples; ``redactor``
    (when given) is filled and returned.
    """
    found = Redactor() if redactor is None else redactor
    seen: set[int] = set()

    def walk(item: Any) -> None:
        if id(item) in seen:
            return
        seen.add(id(item))
        if isinstance(item, Secret):
            for part in item.secret_parts():
                found.add(part)
        elif isinstance(item, msgspec.Struct):
            parts = getattr(item, "secret_parts", None)  # a config that holds a secret inside a
            if callable(parts):  # plain field (HttpProviderConfig: base_url's userinfo password)
                for part in parts():
                    found.add(part)
            for field in item.__struct_fields__:
                walk(getattr(item, field, None))
        elif isinstance(item, dict):
            for child in item.values():
                walk(child)
        elif isinstance(item, list | tuple):
            for child in item:
                walk(child)

    walk(value)
    config = getattr(value, "config", None)
    if config is not None:
        walk(config)
    return found
