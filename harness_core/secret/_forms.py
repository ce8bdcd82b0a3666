"""The encoded forms of a secret (:func:`representations`): every text form in which a secret
value may show up in output (see :mod:`harness_core.secret`), and its base64 forms at each byte
alignment with the edges that mix in the bytes around it (:class:`_Base64Form`)."""

from __future__ import annotations

import base64
import itertools
import json
import re
import string
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, NamedTuple
from urllib.parse import quote, quote_plus

import msgspec

from harness_core.secret._value import MIN_SECRET

__all__ = ["representations"]

_MIN_FRAGMENT: Final = 8  # shortest base64 fragment of a secret worth masking


def _py_inner(text: str, *, as_bytes: bool) -> set[str]:
    """The escaped inside of ``repr(text)`` (or of its UTF-8 bytes), as either quote style writes it."""
    value: Any = text.encode("utf-8") if as_bytes else text
    cut = 2 if as_bytes else 1
    forms = {repr(value)[cut:-1]}
    forced = repr(value + (b"'\"" if as_bytes else "'\""))[cut:-1]  # both quotes: ' is escaped
    forms.add(forced[: -len("\\'\"")])
    return forms


def _quoted(text: str) -> set[str]:
    """The inside of ``text`` as Python (``repr``, ``ascii``, bytes) and JSON string literals."""
    forms = _py_inner(text, as_bytes=False) | _py_inner(text, as_bytes=True)
    forms.add(ascii(text)[1:-1])
    forms.add(json.dumps(text)[1:-1])
    forms.add(json.dumps(text, ensure_ascii=False)[1:-1])
    forms.add(msgspec.json.encode(text).decode()[1:-1])
    return forms


def _escapes(text: str) -> set[str]:
    """``text`` as string literals (:func:`_quoted`) and percent-encoded as encoders do by default."""
    forms = _quoted(text)
    for encoded in (quote(text, safe=""), quote(text), quote_plus(text)):
        forms.add(encoded)
        forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded))
    return forms


def _base64_fragments(value: str) -> set[str]:
    """The base64 characters that depend on ``value`` alone, at each of the three byte alignments
    (so ``Basic base64(user:key)`` is caught whatever the user name), standard and URL-safe."""
    return {form.fragment for form in _base64_forms(value)}


_URL_SAFE: Final = str.maketrans("+/", "-_")  # RFC 4648 §5: base64url


class _Base64Form(NamedTuple):
    """One base64 encoding of a secret at one byte alignment (RFC 4648 §4/§5,
    https://www.rfc-editor.org/rfc/rfc4648#section-4): ``lead`` and ``trail`` are the characters of
    the partial 4-character groups at its edges that carry bits of the secret mixed with bits of
    the bytes around it (each position: the set of characters it can be, whatever those bytes
    are), ``fragment`` the characters in between, which depend on the secret alone."""

    lead: tuple[frozenset[str], ...]
    fragment: str
    trail: tuple[frozenset[str], ...]

    def translate(self, table: dict[int, int]) -> _Base64Form:
        """The same form in another alphabet (``table``: a ``str.translate`` table)."""
        return _Base64Form(
            tuple(frozenset(c.translate(table) for c in s) for s in self.lead),
            self.fragment.translate(table),
            tuple(frozenset(c.translate(table) for c in s) for s in self.trail),
        )

    def pattern(self) -> str:
        """A regular expression for the fragment with as much of each edge as is present: the
        lead's characters nearest the fragment first, the trail's likewise, then ``=`` padding."""
        lead = ""
        for chars in self.lead:
            lead = f"(?:{lead}{_char_class(chars)})?"
        trail = ""
        for chars in reversed(self.trail):
            trail = f"(?:{_char_class(chars)}{trail})?"
        return f"{lead}{re.escape(self.fragment)}{trail}={{0,2}}"

    def starts(self) -> Iterator[str]:
        """Every text an occurrence can start with up to the end of its fragment: each suffix of
        each possible lead (the empty one included) followed by the fragment."""
        for first in range(len(self.lead) + 1):
            for lead in itertools.product(*self.lead[first:]):
                yield "".join(lead) + self.fragment


def _char_class(chars: frozenset[str]) -> str:
    if len(chars) == 1:
        return re.escape(next(iter(chars)))
    return "[" + "".join(re.escape(c) for c in sorted(chars)) + "]"


def _group_chars(groups: Iterable[bytes], positions: range) -> tuple[frozenset[str], ...]:
    """For each of ``positions`` (0-3) in the one 4-character base64 group that encodes each of
    ``groups`` (3 bytes), the set of characters found there."""
    encoded = [base64.b64encode(group).decode() for group in groups]
    return tuple(frozenset(chars[p] for chars in encoded) for p in positions)


def _base64_forms(value: str) -> list[_Base64Form]:
    """The base64 forms of ``value`` worth masking (fragment of at least 8 characters), at each of
    the three byte alignments, standard and URL-safe alphabets."""
    raw = value.encode("utf-8")
    forms: list[_Base64Form] = []
    for offset in range(3):
        padded = b"\0" * offset + raw
        encoded = base64.b64encode(padded).decode()
        start = 4 if offset else 0  # the first group mixes in bytes before the value
        fragment = encoded[start : (len(padded) // 3) * 4]  # the last partial group mixes in what follows
        if len(fragment) < _MIN_FRAGMENT:
            continue
        # a character carries bits of the value when its 6 bits end after the bytes before it
        # (lead) or start before the value's end (trail); the other bytes of the group vary
        # (only the low 4 bits of the byte before, and the high 4 bits of the byte after, reach
        # a character that carries bits of the value: 16 values of each cover every case)
        lead = _group_chars(
            (bytes([0] * (offset - 1) + [before]) + raw[: 3 - offset] for before in range(16)) if offset else (),
            range(next(p for p in range(4) if 6 * p + 6 > 8 * offset), 4) if offset else range(0),
        )
        rest = len(padded) % 3
        trail = _group_chars(
            (raw[len(raw) - rest :] + bytes([after]) + b"\0" * (2 - rest) for after in range(0, 256, 16))
            if rest
            else (),
            range(next(p for p in range(4) if 6 * p >= 8 * rest)) if rest else range(0),
        )
        form = _Base64Form(lead, fragment, trail)
        forms.append(form)
        url_safe = form.translate(_URL_SAFE)
        if url_safe != form:
            forms.append(url_safe)
    return forms


def representations(value: str) -> set[str]:
    """Every text form in which ``value`` may show up in output (see the module doc).

    Returns the set of strings to mask (the value itself included); forms shorter than
    :data:`MIN_SECRET` characters are left out, and a value that short has none.
    """
    if len(value) < MIN_SECRET:
        return set()
    return _text_forms(value) | _base64_fragments(value)


_UNRESERVED: Final = frozenset(string.ascii_letters + string.digits + "-._~")
"""The characters RFC 3986 §2.3 lets a URL carry unencoded (https://www.rfc-editor.org/rfc/rfc3986#section-2.3)."""


def _percent(text: str, keep: Callable[[str], bool], hex_format: str) -> str:
    """``text`` percent-encoded (UTF-8 bytes, RFC 3986 §2.1) except the characters ``keep`` allows."""
    return "".join(c if keep(c) else "".join(hex_format % b for b in c.encode("utf-8")) for c in text)


def _json_unicode(text: str, hex_format: str) -> str:
    """``text`` with every character written as a JSON ``\\uXXXX`` escape (UTF-16 code units,
    surrogate pairs beyond U+FFFF; RFC 8259 §7, https://www.rfc-editor.org/rfc/rfc8259#section-7)."""
    units = text.encode("utf-16-be")
    return "".join("\\u" + hex_format % int.from_bytes(units[i : i + 2]) for i in range(0, len(units), 2))


def _encodings(text: str) -> set[str]:
    """The encodings of every character of ``text`` (upper- and lower-case hex): each character
    percent-encoded, each character but letters and digits percent-encoded (an unreserved ``-``
    written ``%2D``), and each character a JSON ``\\uXXXX`` escape. :func:`_escapes` covers what
    encoders produce by default (only the characters that need it)."""
    forms: set[str] = set()
    for two, four in (("%%%02X", "%04X"), ("%%%02x", "%04x")):
        forms.add(_percent(text, lambda c: False, two))
        forms.add(_percent(text, lambda c: c.isascii() and c.isalnum(), two))
        forms.add(_json_unicode(text, four))
    return forms


def _text_forms(value: str) -> set[str]:
    """:func:`representations` without the base64 forms."""
    # as written and without surrounding whitespace (an empty strip is dropped with the other
    # short forms); lower-cased as well (a host name in a URL is: ``http://sk-abc….invalid``),
    # and upper-cased (a server that echoes what it got upper-cased: ``SK-ABC…``)
    bases = {value, value.strip()}
    cased = bases | {base.lower() for base in bases} | {base.upper() for base in bases}
    forms = set(cased)
    for base in cased:
        forms |= _escapes(base)
    for form in list(forms):  # an escape of an escape (repr of a JSON body)
        forms |= _escapes(form)
    for base in bases:  # each character encoded, and that in a string literal (JSON of JSON)
        for encoded in _encodings(base):
            forms |= {encoded} | _quoted(encoded)
    return {form for form in forms if len(form) >= MIN_SECRET}
