"""A string that never shows itself: :class:`Secret`.

Config fields holding keys or tokens are typed ``Secret``. Its ``repr``, ``str`` and format
output are a fixed mask, so a secret cannot leak through a log line, an error message, a
traceback's locals or ``harness config check`` output. The value is read explicitly with
:meth:`Secret.get_secret_value`, at the one place it is sent (an HTTP header).
"""

from __future__ import annotations

from typing import Final, NoReturn

__all__ = ["Secret"]

_MASK: Final = "**********"


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

    def __repr__(self) -> str:
        return f"Secret('{_MASK}')"

    def __str__(self) -> str:
        return _MASK

    def __format__(self, spec: str) -> str:
        return _MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret cannot be pickled")
