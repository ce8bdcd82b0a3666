"""Header checks done when an adapter is built, before any request and without importing httpx:
:func:`check_headers` (RFC 9110 §5.1 field names, §5.5 field values,
https://www.rfc-editor.org/rfc/rfc9110#section-5); and the one encoding of HTTP Basic
credentials, :func:`basic_auth` (both transports, a ``base_url``'s userinfo and a proxy's).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Final

from harness_core.errors import LlmError
from harness_core.secret import secret_problem

__all__ = ["basic_auth", "check_headers"]

_NOT_TCHAR: Final = re.compile(r"[^!#$%&'*+\-.^_`|~0-9A-Za-z]")
"""A character that cannot be in an RFC 9110 ``token`` (§5.6.2), what a field name is made of."""


def check_headers(headers: Mapping[str, str], *, provider: str | None = None) -> None:
    """Refuse headers that cannot be sent, before any request.

    A field name must be an RFC 9110 token (no space, colon or control character; the error
    names the character and its position, not the name). A value with
    surrounding whitespace, a control character (``\\r``/``\\n`` of a CRLF ``.env`` file) or a
    non-ASCII character would make httpx fail at send time with a retryable-looking transport
    error quoting the value (:func:`harness_core.secret.secret_problem`).

    Raises:
        LlmError: ``CONFIG`` naming ``provider``, the header and the offending character; a
            value is never shown.
    """
    for name, value in headers.items():
        bad = _NOT_TCHAR.search(name)
        if bad is not None or not name:  # the name is not shown: a pasted "Name: value" line holds a key
            what = f"holds {bad.group()!a} at position {bad.start() + 1}" if bad is not None else "is empty"
            raise LlmError(
                "CONFIG",
                f"a header name {what}: field names are RFC 9110 tokens (letters, digits, !#$%&'*+-.^_`|~)",
                provider=provider,
            )
        problem = secret_problem(value, "its value")
        if problem is not None:
            raise LlmError("CONFIG", f"header {name!r}: {problem}", provider=provider)


def basic_auth(user: str, password: str) -> str:
    """The ``Authorization`` (or ``Proxy-Authorization``) value of HTTP Basic auth for ``user``
    and ``password`` (RFC 7617, UTF-8, https://www.rfc-editor.org/rfc/rfc7617#section-2):
    ``basic_auth("u", "p")`` → ``"Basic dTpw"``. Nothing is percent-decoded here."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
