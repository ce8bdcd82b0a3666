"""Text crossing the process boundary: input decoded to clean Unicode, model text made safe for a terminal.

Input rule: the prompt (an argument or standard input) and the other text options must be UTF-8.
Python hands undecodable bytes of ``argv`` over as lone surrogates (``surrogateescape``, PEP 383),
which no adapter can encode; :func:`clean_argument` and :func:`read_stdin` replace each undecodable
byte with U+FFFD REPLACEMENT CHARACTER and report that they did, so the command prints one warning
line and sends text that every provider accepts.

Output rule: on a terminal, text from a model or a provider may not drive the terminal. C0 control
characters other than newline and tab, DEL and the C1 controls (ESC sequences, CSI ``\\x9b``,
carriage return, backspace, bell …) are shown in caret notation (``\\x1b`` → ``^[``, as ``cat -v``
shows them) by :func:`for_terminal`. Pipes and ``--json`` keep the exact text.
"""

from __future__ import annotations

import re
from typing import BinaryIO, Final, TextIO

__all__ = ["UNDECODABLE_WARNING", "clean_argument", "for_terminal", "read_stdin", "undecoded"]

UNDECODABLE_WARNING: Final = (
    "warning: the input is not valid UTF-8: each undecodable byte was replaced with U+FFFD (\N{REPLACEMENT CHARACTER})"
)
"""The one line printed on stderr when :func:`clean_argument` or :func:`read_stdin` replaced bytes."""

_SURROGATES: Final = re.compile("[\ud800-\udfff]")
_CONTROLS: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_argument(text: str) -> tuple[str, bool]:
    """``text`` from ``sys.argv`` (undecodable bytes as surrogates, PEP 383) as valid Unicode.

    Returns ``(text, replaced)``: each undecodable byte becomes U+FFFD; ``replaced`` tells
    whether any did. Text without surrogates is returned unchanged.
    """
    if not _SURROGATES.search(text):
        return text, False
    raw = text.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "replace"), True


def undecoded(text: str) -> str | None:
    """``text`` from ``sys.argv`` or a file name with each byte that was not UTF-8 (PEP 383
    surrogates) shown as a ``\\xNN`` escape, when it holds any; else ``None`` (it is text every
    encoder takes). For a name that must stay exact (a collection, a row id), where
    :func:`clean_argument`'s U+FFFD would make another name."""
    if not _SURROGATES.search(text):
        return None
    return text.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")


def _decode(raw: bytes) -> tuple[str, bool]:
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), True


def read_stdin(stream: TextIO) -> tuple[str, bool]:
    """All of ``stream`` (standard input) decoded as UTF-8; returns ``(text, replaced)``.

    The bytes are read from the binary buffer beneath ``stream`` when it has one (so the
    decoding does not depend on the locale); each undecodable byte becomes U+FFFD and
    ``replaced`` is ``True``. A stream without a buffer (an in-memory text stream) is read as
    text, lone surrogates replaced the same way.
    """
    buffer: BinaryIO | None = getattr(stream, "buffer", None)
    if buffer is None:
        return clean_argument(stream.read())
    return _decode(buffer.read())


def _caret(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"\\x{code:02x}"  # C1 controls (0x80-0x9f): no caret form


def for_terminal(text: str) -> str:
    """``text`` with every control character except ``\\n`` and ``\\t`` shown visibly.

    C0 controls become caret notation (``\\x1b`` → ``^[``, ``\\r`` → ``^M``), DEL ``^?``, C1
    controls ``\\x9b`` style escapes; nothing else changes.
    """
    return _CONTROLS.sub(_caret, text)
