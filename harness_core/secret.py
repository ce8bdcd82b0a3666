"""Everything about secrets in one place: :class:`Secret`, :class:`Redactor`, streaming
hold-back (:class:`ChunkScrubber`) and the logging filter (:class:`RedactFilter`).

Config fields holding keys or tokens are typed ``Secret``: its ``repr``, ``str`` and format
output are a fixed mask, and the value is read explicitly with :meth:`Secret.get_secret_value`
at the one place it is sent (an HTTP header).

A :class:`Redactor` knows every secret value of a configuration and masks it in text — not only
the value as written, but every representation output paths produce from it (see
:func:`representations`): Python ``repr``/``ascii`` and bytes-``repr`` escaping (an exception
message quoting a header), JSON escaping (``--json`` lines, trace files, cache rows), URL
percent-encoding (a query string: as encoders do, every character, or every character but
letters and digits), every character a JSON ``\\uXXXX`` escape, base64 (``Authorization:
Basic`` of ``user:key``, at any alignment), the value without surrounding whitespace and
lower-cased (a host name), and each of those escaped once more (``repr`` of a JSON text). Mask
text *before* encoding it; a redactor also catches what was encoded first, but only in the
encodings listed here.

Text that arrives in pieces (a streamed reply echoing a key across two deltas) is masked by
:class:`ChunkScrubber`: per content block it holds back the tail that could still begin a secret
until the next delta or the block's end decides. The same scrubber runs the ``redact``
middleware's regular-expression masking (any object with ``mask(text)`` and ``stream()``, see
:class:`Redaction`).
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import re
import string
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, NamedTuple, NoReturn, Protocol, overload, runtime_checkable
from urllib.parse import quote, quote_plus

import msgspec

from harness_core.hookspecs import hookimpl
from harness_core.types import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
)

__all__ = [
    "HTTP_LOGGERS",
    "MASK",
    "ChunkScrubber",
    "ConnectionString",
    "RedactFilter",
    "Redaction",
    "Redactor",
    "Secret",
    "SecretMasking",
    "TextStream",
    "mask_strings",
    "redacted_logging",
    "representations",
    "secret_problem",
    "secrets_of",
]

MASK: Final = "**********"
"""What a secret is replaced with in messages (the same mask :class:`Secret` shows)."""

MIN_SECRET: Final = 3
"""Values shorter than this many characters are never treated as secrets (they would mangle every
message and cannot be secrets worth the name)."""

_MIN_FRAGMENT: Final = 8  # shortest base64 fragment of a secret worth masking


class Secret:
    """An opaque wrapper around a secret string.

    Args:
        value: the secret text (a key, a token). Must be a non-empty ``str``.

    Raises:
        TypeError: ``value`` is not a ``str``.
        ValueError: ``value`` is empty.

    Equality compares values (so configs compare), hashing is supported, and pickling is
    refused (a pickle would carry the plain value to wherever it is written).
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"Secret expects a str, got {type(value).__name__}")
        if not value:
            raise ValueError("a Secret may not be empty")
        self._value = value

    def get_secret_value(self) -> str:
        """The plain secret, for the one place it is needed (e.g. an ``Authorization`` header)."""
        return self._value

    def secret_parts(self) -> tuple[str, ...]:
        """What of the value is masked wherever it appears (the whole value)."""
        return (self._value,)

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    def __str__(self) -> str:
        return MASK

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret cannot be pickled")


class ConnectionString(Secret):
    """A database setting: a file path, or a URL that may hold credentials
    (``postgresql://user:password@host/db``, RFC 3986 userinfo,
    https://www.rfc-editor.org/rfc/rfc3986#section-3.2.1). Only the URL's password is secret:
    a path or a host is shown in messages, so an operator can tell which database is meant."""

    __slots__ = ()

    def secret_parts(self) -> tuple[str, ...]:
        """The URL's password (as written and percent-decoded), or nothing for a path."""
        return connection_secrets(self.get_secret_value())


def connection_secrets(value: str) -> tuple[str, ...]:
    """The password of ``value`` when it is a URL with one (as written and percent-decoded), else ``()``."""
    from urllib.parse import unquote, urlsplit

    if "://" not in value:
        return ()
    try:
        password = urlsplit(value).password
    except ValueError:  # not a URL after all (a bad port): keep all of it secret
        return (value,)
    return tuple(dict.fromkeys((password, unquote(password)))) if password else ()


def secret_problem(value: str, what: str = "the secret") -> str | None:
    """Why ``value`` cannot be a credential sent in an HTTP header, or ``None`` when it can.

    Refused: surrounding whitespace (a ``\\r`` left by a CRLF ``.env`` file, a pasted newline),
    control characters anywhere, and non-ASCII characters (header field values are visible
    ASCII, RFC 9110 §5.5, https://www.rfc-editor.org/rfc/rfc9110#section-5.5). The reason
    starts with ``what`` and never quotes the value: it names the character and its position.
    """
    if not value:
        return None
    if value != value.strip():
        where = "ends" if value[-1:].isspace() else "starts"
        char = value[-1] if where == "ends" else value[0]
        hint = " (a CRLF line ending, e.g. from a Windows .env file?)" if char == "\r" else ""
        return f"{what} {where} with whitespace {_char_name(char)}{hint}; remove it"
    for position, char in enumerate(value, 1):
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return f"{what} holds the control character {_char_name(char)} at position {position}; remove it"
        if ord(char) > 0x7E:
            return (
                f"{what} holds the non-ASCII character U+{ord(char):04X} at position {position}: "
                "HTTP header values are ASCII (a key copied with a typographic quote or dash?)"
            )
    return None


def _char_name(char: str) -> str:
    return ascii(char) if char != " " else "' ' (space)"


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


class TextStream(Protocol):
    """One block's text arriving in pieces: ``feed`` returns what can be shown now, ``flush`` the rest."""

    fed: bool
    """Whether :meth:`feed` was called at least once."""

    @property
    def emitted(self) -> str:
        """Everything returned so far, concatenated (the masked block)."""

    def feed(self, text: str) -> str:
        """Add ``text``; return the masked text that is decided now (possibly empty)."""

    def flush(self) -> str:
        """The block ended: mask and return everything held back."""


@runtime_checkable
class Redaction(Protocol):
    """A masking rule usable on whole texts (``mask``) and on streamed blocks (``stream``)."""

    def mask(self, text: str) -> str:
        """``text`` with every match masked."""

    def stream(self) -> TextStream:
        """A fresh masker for one block of streamed text."""


class Redactor:
    """Masks secret values, in every representation (:func:`representations`), out of text.

    The loader adds every value substituted from the environment (``${{ env.NAME }}``, in plugin
    configs and in ``defaults:``), every :class:`~harness_core.config.EnvFallback` value, and
    every value of a field typed :class:`Secret` (literal ones too); the runtime adds the
    ``Secret`` values of every plugin's config (:func:`secrets_of`). Calling the redactor
    (``redactor(text)``) or :meth:`mask` returns ``text`` with every form replaced by
    :data:`MASK`; :meth:`stream` masks a block arriving in pieces.
    """

    __slots__ = ("_built", "_forms", "_longest", "_pattern", "_prefixes", "_triples", "_values")

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._forms: dict[str, tuple[set[str], list[_Base64Form]]] = {}  # per value, computed once
        self._built = True  # whether the fields below reflect every value
        self._pattern: re.Pattern[str] | None = None
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
        self._pattern = re.compile("|".join([*alternatives, *map(re.escape, ordered)]))  # add() gave it a value
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
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)

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
        pattern = self._pattern
        if pattern is None:
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
        if pattern.search(text) is None:  # the common case: no occurrence at all
            return cut, False
        for match in pattern.finditer(text):  # never cut through an occurrence of a secret,
            if match.start() < cut < match.end() or match.end() == len(text):  # nor one that may grow
                cut = min(cut, match.start())
        return cut, True

    def stream(self) -> TextStream:
        """A masker for one block of streamed text (hold-back by :meth:`safe_end`)."""
        return _HoldBack(self.mask, self._cut)

    def __repr__(self) -> str:
        return f"Redactor({len(self._values)} secrets)"


class _HoldBack:
    """A :class:`TextStream` over a literal masker: shows the prefix ``cut`` allows.

    ``cut(text)`` is ``(safe end, whether text may hold something to mask)``: a shown part
    without any occurrence is passed as it is, without running the masker over it again.
    """

    __slots__ = ("_cut", "_mask", "_out", "_pending", "fed")

    def __init__(self, mask: Callable[[str], str], cut: Callable[[str], tuple[int, bool]]) -> None:
        self._mask = mask
        self._cut = cut
        self._pending = ""
        self._out: list[str] = []
        self.fed = False

    @property
    def emitted(self) -> str:
        return "".join(self._out)

    def feed(self, text: str) -> str:
        self.fed = True
        buffer = self._pending + text
        cut, found = self._cut(buffer)
        self._pending = buffer[cut:]
        shown = self._mask(buffer[:cut]) if found else buffer[:cut]  # a full slice is the same str
        self._out.append(shown)
        return shown

    def flush(self) -> str:
        rest, self._pending = self._pending, ""
        return self._emit(rest)

    def _emit(self, text: str) -> str:
        out = self._mask(text)
        self._out.append(out)
        return out


class _PieceWise:
    """A :class:`Redaction` over a plain ``str -> str`` scrubber: each piece masked on its own."""

    def __init__(self, mask: Callable[[str], str]) -> None:
        self.mask = mask

    def stream(self) -> TextStream:
        return _HoldBack(self.mask, _whole)


def _whole(text: str) -> tuple[int, bool]:
    return len(text), True


class _Block:
    __slots__ = ("name", "stream")

    def __init__(self, stream: TextStream) -> None:
        self.stream = stream
        self.name: str | None = None  # a tool-call name from a dropped delta, for the next one


def _mask_all(start: BlockStart) -> bool:
    return True


class ChunkScrubber:
    """Rewrites a chunk stream so that what a :class:`Redaction` masks never shows, whatever the split.

    Args:
        redaction: a :class:`Redactor`, the ``redact`` middleware's masker, or any plain
            ``str -> str`` scrubber (then each piece is masked on its own).
        masks: which blocks to mask, decided on their ``block-start`` (default: all). A delta
            of a block never started is masked.

    ``feed(chunk)`` returns the chunks to show instead, in order: possibly none while text is
    held back; a ``block-end`` is preceded by a delta with the held-back rest, and its block
    holds exactly the concatenated masked deltas; a ``finish`` has its failure message masked.
    Other chunks pass unchanged.
    """

    def __init__(
        self,
        redaction: Redaction | Callable[[str], str],
        masks: Callable[[BlockStart], bool] = _mask_all,
    ) -> None:
        # a Redactor (every stream of the runtime's boundary) skips the runtime protocol check,
        # which costs ~10 µs per stream (typing collects the protocol's attributes each time)
        if type(redaction) is Redactor or isinstance(redaction, Redaction):
            self._redaction: Redaction = redaction
        else:
            self._redaction = _PieceWise(redaction)
        self._masks = masks
        self._blocks: dict[int, _Block] = {}
        self._plain: set[int] = set()

    def feed(self, chunk: StreamChunk) -> list[StreamChunk]:
        """The chunks to show for ``chunk`` (in order)."""
        kind = type(chunk)
        if kind is TextDelta or kind is ReasoningDelta:  # the hot path: a delta of a masked block
            block = self._blocks.get(chunk.index)  # type: ignore[union-attr]
            if block is not None:
                given: str = chunk.text  # type: ignore[union-attr]
                text = block.stream.feed(given)
                if text is given:  # nothing held back or masked: the chunk itself
                    return [chunk]
                return [msgspec.structs.replace(chunk, text=text)] if text else []
        return list(self._feed(chunk))

    def _feed(self, chunk: StreamChunk) -> Iterator[StreamChunk]:
        if isinstance(chunk, BlockStart):
            if self._masks(chunk):
                self._blocks[chunk.index] = _Block(self._redaction.stream())
            else:
                self._plain.add(chunk.index)
            yield chunk
            return
        if isinstance(chunk, Finish):
            yield self._finish(chunk)
            return
        index = getattr(chunk, "index", None)
        if not isinstance(index, int) or index in self._plain:
            if isinstance(chunk, BlockEnd):
                self._plain.discard(chunk.index)
            yield chunk  # unmasked blocks, usage
            return
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block(self._redaction.stream())
        if isinstance(chunk, TextDelta | ReasoningDelta):
            text = block.stream.feed(chunk.text)
            if text:
                yield msgspec.structs.replace(chunk, text=text)
        elif isinstance(chunk, ToolCallDelta):
            text = block.stream.feed(chunk.arguments_delta)
            block.name = chunk.name or block.name
            if text:
                yield msgspec.structs.replace(chunk, arguments_delta=text, name=block.name)
                block.name = None
        elif isinstance(chunk, BlockEnd):
            del self._blocks[index]
            yield from self._end(chunk, block)
        else:
            yield chunk  # a chunk kind we do not know that names a masked block: pass it on

    def _finish(self, chunk: Finish) -> Finish:
        """``chunk`` with its failure message masked (before anyone encodes it)."""
        failure = chunk.reason.failure
        if failure is None:
            return chunk
        message = self._redaction.mask(failure.message)
        if message == failure.message:
            return chunk
        reason = msgspec.structs.replace(chunk.reason, failure=msgspec.structs.replace(failure, message=message))
        return msgspec.structs.replace(chunk, reason=reason)

    def _end(self, chunk: BlockEnd, block: _Block) -> Iterator[StreamChunk]:
        """The final masked delta (if text was held back) and the masked ``block-end``."""
        tail = block.stream.flush()
        content = chunk.block
        mask = self._redaction.mask
        if isinstance(content, ToolCallBlock):
            if tail:
                yield ToolCallDelta(index=chunk.index, id=content.id, arguments_delta=tail, name=block.name)
            masked = block.stream.emitted if block.stream.fed else mask(content.arguments)
            yield BlockEnd(index=chunk.index, block=msgspec.structs.replace(content, arguments=masked))
            return
        if tail:
            delta_type = TextDelta if isinstance(content, TextBlock) else ReasoningDelta
            yield delta_type(index=chunk.index, text=tail)
        masked = block.stream.emitted if block.stream.fed else mask(content.text)
        yield BlockEnd(index=chunk.index, block=msgspec.structs.replace(content, text=masked))


def mask_strings(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON-like builtins: ``str``, ``dict``, ``list``, ``tuple``, numbers, ``None``)
    with every string, mapping keys included, passed through ``redact``; tuples become lists,
    other values are returned as they are. Mask before encoding: what a sink stores or exports
    (a ledger row, a trace line, a span attribute) then never holds a secret, whatever the
    encoding."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {mask_strings(key, redact): mask_strings(item, redact) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [mask_strings(item, redact) for item in value]
    return value


class SecretMasking:
    """Mixin for a plugin that stores or exports data (a ledger, a log, a trace file, telemetry):
    it implements the ``use_redactor`` hook, keeping the masker the harness hands over when it
    starts, and offers :meth:`redact`, :meth:`mask_text` and :meth:`mask_data` to mask every
    string before it leaves the process (docs/hooks.md). Until the hook is called (a plugin used
    without a :class:`~harness_core.Harness`) nothing is masked.
    """

    _redact: Callable[[str], str] | None = None

    @hookimpl
    def use_redactor(self, redact: Callable[[str], str]) -> None:
        """Mask what ``redact`` masks (the configuration's secrets) in everything stored or exported."""
        self._redact = redact

    def redact(self, text: str) -> str:
        """``text`` with the configuration's secrets masked (unchanged before :meth:`use_redactor`)."""
        return text if self._redact is None else self._redact(text)

    @overload
    def mask_text(self, text: str) -> str: ...

    @overload
    def mask_text(self, text: None) -> None: ...

    def mask_text(self, text: str | None) -> str | None:
        """``text`` masked; ``None`` stays ``None``."""
        return None if text is None else self.redact(text)

    def mask_data(self, value: Any) -> Any:
        """``value`` (JSON-like builtins) with every string masked (:func:`mask_strings`)."""
        return value if self._redact is None else mask_strings(value, self._redact)


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


HTTP_LOGGERS: Final = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)
"""The loggers of the HTTP stack (httpx and httpcore's per-module loggers) whose DEBUG records
quote request and response headers."""


class RedactFilter(logging.Filter):
    """A :class:`logging.Filter` that scrubs secrets from every record it sees; it drops nothing.

    Attach it to a *handler* (``handler.addFilter(RedactFilter(loaded.redact))``): filters on a
    logger do not see records propagated from child loggers. It replaces the record's message
    (arguments merged in), its formatted traceback (``exc_text``; ``exc_info`` is kept so a
    formatter still knows there is one) and ``stack_info`` by their redacted text. ``redact`` is
    any ``str -> str`` scrubber, e.g. :meth:`harness_core.loader.LoadedConfig.redact`.
    """

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self.redact = redact
        self._loggers: list[logging.Logger] = []

    def attach(self, names: Iterable[str] = HTTP_LOGGERS) -> None:
        """Also scrub the records of the loggers ``names`` themselves (a filter on a logger sees
        the records logged on it, not those of its children, hence the full names). The
        :class:`~harness_core.runtime.Harness` does this for :data:`HTTP_LOGGERS` while it runs:
        a library caller's own DEBUG handlers then never see a key in httpcore's header dumps
        (a redirect's ``Location`` holding the key). Undo with :meth:`detach`."""
        for name in names:
            named = logging.getLogger(name)
            named.addFilter(self)
            self._loggers.append(named)

    def detach(self) -> None:
        """Remove this filter from the loggers :meth:`attach` added it to."""
        for named in self._loggers:
            named.removeFilter(self)
        self._loggers.clear()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


@contextmanager
def redacted_logging(redact: Callable[[str], str]) -> Iterator[RedactFilter]:
    """Within the block, every handler of the root logger scrubs secrets (a :class:`RedactFilter`).

    Handlers added inside the block are not covered; the filter is removed on exit.
    """
    handlers = list(logging.getLogger().handlers)
    redact_filter = RedactFilter(redact)
    for handler in handlers:
        handler.addFilter(redact_filter)
    try:
        yield redact_filter
    finally:
        for handler in handlers:
            handler.removeFilter(redact_filter)
