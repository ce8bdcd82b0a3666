"""The secret value: :class:`Secret` (a config field holding a key or a token: its ``repr``,
``str`` and format output are a fixed mask, the value is read explicitly with
:meth:`Secret.get_secret_value` at the one place it is sent), :class:`ConnectionString` (only a
URL's password is secret), :data:`MASK`, :data:`MIN_SECRET` and :func:`secret_problem` (whether a
value can be sent in an HTTP header)."""

from __future__ import annotations

from typing import Final, NoReturn

__all__ = ["MASK", "MIN_SECRET", "ConnectionString", "Secret", "connection_secrets", "secret_problem"]

MASK: Final = "**********"
"""What a secret is replaced with in messages (the same mask :class:`Secret` shows)."""

MIN_SECRET: Final = 3
"""Values shorter than this many characters are never treated as secrets (they would mangle every
message and cannot be secrets worth the name)."""


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
