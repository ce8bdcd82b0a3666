"""Console access: the master key, or a revocable session cookie derived from it; CSRF tokens for forms.

* A person logs in with the master key; the console then sets ``harness_console`` =
  ``<issued unix seconds>.<nonce>.<HMAC-SHA256(master key, "console-session:<issued>.<nonce>")>``
  (HttpOnly, SameSite=Strict, path ``/console``, Secure over HTTPS), valid :data:`SESSION_SECONDS`.
  The signature makes a forged or altered cookie fail without a lookup, and changing the master
  key ends every session; the session is also stored server-side (its SHA-256 digest,
  :func:`session_digest`, in a :class:`~harness_gateway.console.sessions.Sessions`), and signing
  out deletes it there, so a copied cookie is refused from then on. The cookie reveals nothing
  about the key (HMAC, RFC 2104).
* Scripts may send the master key itself (``Authorization: Bearer …``) instead of a cookie.
* Every form carries a CSRF token, HMAC(master key, "console-csrf:<session cookie>"), checked on
  POST (a synchronizer token bound to the session). The login form, before any session, uses a
  double-submit token: a random cookie ``harness_console_login`` equal to the form field.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Final

from harness_gateway.request import decimal

__all__ = [
    "LOGIN_COOKIE",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "csrf_token",
    "new_login_token",
    "new_session",
    "same",
    "session_digest",
    "valid_session",
]

SESSION_COOKIE: Final = "harness_console"
LOGIN_COOKIE: Final = "harness_console_login"
SESSION_SECONDS: Final = 12 * 3600


def _mac(master: str, message: str) -> str:
    return hmac.new(master.encode(), message.encode(), hashlib.sha256).hexdigest()


def same(a: str, b: str) -> bool:
    """Constant-time string equality."""
    return hmac.compare_digest(a.encode(), b.encode())


def new_session(master: str, now: float | None = None) -> str:
    """A session cookie value issued at ``now`` (unix seconds), with a random 128-bit nonce."""
    issued = int(time.time() if now is None else now)
    body = f"{issued}.{secrets.token_urlsafe(16)}"
    return f"{body}.{_mac(master, f'console-session:{body}')}"


def valid_session(master: str, value: str | None, now: float | None = None) -> bool:
    """Whether ``value`` is a session cookie signed with ``master`` and issued in the last
    :data:`SESSION_SECONDS` (whether it was signed out is the session store's to say)."""
    if not value:
        return False
    body, _, mac = value.rpartition(".")
    issued, _, nonce = body.partition(".")
    when = decimal(issued)
    if when is None or not nonce:
        return False
    age = (time.time() if now is None else now) - when
    return 0 <= age < SESSION_SECONDS and same(mac, _mac(master, f"console-session:{body}"))


def session_digest(value: str) -> str:
    """What the session store keeps of a session cookie: its SHA-256 hex digest (a copy of the
    store gives no cookie)."""
    return hashlib.sha256(value.encode()).hexdigest()


def csrf_token(master: str, session: str) -> str:
    """The CSRF token of the forms of ``session`` (a session cookie value, or the master key
    itself for scripts)."""
    return _mac(master, f"console-csrf:{session}")


def new_login_token() -> str:
    """A random double-submit token for the login form (128 bits, URL-safe)."""
    return secrets.token_urlsafe(16)
