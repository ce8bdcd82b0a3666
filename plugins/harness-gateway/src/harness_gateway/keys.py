"""Gateway API keys: how they are made, stored (a hash only) and what they allow.

A key is ``hk-`` followed by 43 URL-safe base64 characters (256 random bits from
:func:`secrets.token_urlsafe`; :data:`KEY_PATTERN` matches exactly that format, and
:func:`mask_keys` masks every key of it in text, so a key pasted into a prompt or echoed in a reply
is stored nowhere). It is shown once, when created; the store keeps only its SHA-256
digest (hex). A fast hash is the right one here: the key has full entropy, so no password
stretching is needed to make guessing infeasible, and lookups stay O(1).
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import sys
import time
import unicodedata
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from harness_core import MASK, route_suggestion
from harness_core.middleware import snippet

__all__ = [
    "KEY_PATTERN",
    "KEY_PREFIX",
    "LATEST_EXPIRY",
    "MAX_RATE",
    "KeyChange",
    "KeyRecord",
    "KeySpec",
    "KeySpecError",
    "hash_key",
    "mask_keys",
    "new_key",
    "shown_time",
    "split_routes",
    "unserved_routes",
]

KEY_PREFIX: Final = "hk-"
_KEY_BYTES: Final = 32  # 256 random bits
_KEY_CHARS: Final = -(-_KEY_BYTES * 4 // 3)  # unpadded base64 length: 43 characters

KEY_PATTERN: Final = re.compile(re.escape(KEY_PREFIX) + f"[A-Za-z0-9_-]{{{_KEY_CHARS}}}")
"""A gateway key as :func:`new_key` makes it: ``hk-`` and 43 characters of the URL-safe base64
alphabet (RFC 4648 §5, https://www.rfc-editor.org/rfc/rfc4648#section-5). The alphabet needs no
escaping in JSON, ``repr`` or a URL, so the plain form is every form a key takes in text."""


MAX_RATE: Final = 2**31 - 1
"""The largest ``rpm`` / ``tpm`` of a key (2,147,483,647): PostgreSQL keeps them in ``INTEGER``
columns (32-bit signed; SQLite's ``INTEGER`` holds 64 bits), so this is what every state store can
hold."""

LATEST_EXPIRY: Final = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
"""The latest expiry a key may have, unix seconds (253402300799.0, 9999-12-31 23:59:59 UTC: the
last second :mod:`datetime` can show, so ``harness keys list`` and the console can show it)."""

_DAY: Final = 86400.0  # seconds


def new_key() -> str:
    """A fresh random key (``hk-`` + 256 random bits, URL-safe base64; :data:`KEY_PATTERN`)."""
    return KEY_PREFIX + secrets.token_urlsafe(_KEY_BYTES)


def mask_keys(text: str) -> str:
    """``text`` with every gateway key (:data:`KEY_PATTERN`) replaced by the secret mask."""
    return KEY_PATTERN.sub(MASK, text) if KEY_PREFIX in text else text


def hash_key(key: str) -> str:
    """The SHA-256 hex digest stored for ``key``."""
    return hashlib.sha256(key.encode()).hexdigest()


class KeySpecError(ValueError):
    """A :class:`KeySpec` field is invalid: ``field`` names it (the ``param`` of the 400)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field} {message}")
        self.field = field
        self.reason = message
        """What is wrong, without the field's name (``must be a finite positive number, got 0``): for a
        caller that names the field its own way (``harness keys create --tpm``)."""


def shown_time(moment: float, pattern: str = "%Y-%m-%d %H:%M:%S UTC") -> str:
    """``moment`` (unix seconds) in UTC as ``pattern`` (:meth:`datetime.strftime`) writes it:
    ``2030-01-31 12:00:00 UTC`` by default; ``far future (1e+300)`` (``far past (…)``) for a time
    no date shows (after the year 9999: an expiry stored before :class:`KeySpec` bounded it).
    What ``harness keys list`` and the console show a key's times with; never raises."""
    try:
        return datetime.fromtimestamp(moment, UTC).strftime(pattern)
    except (OverflowError, OSError, ValueError):
        return f"{'far future' if moment > 0 else 'far past'} ({moment:g})"


_LATEST: Final = f"{shown_time(LATEST_EXPIRY)}, the latest expiry a key may have"


def _unprintable(text: str) -> str | None:
    """The first character of ``text`` that is a control, format or line/paragraph separator
    character (Unicode categories C* and Zl/Zp: a newline, NUL, a bidi override …), else ``None``."""
    return next((c for c in text if unicodedata.category(c)[0] == "C" or unicodedata.category(c) in ("Zl", "Zp")), None)


class KeySpec(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """What a new key may do.

    Fields:
        name: a label for people, unique among the gateway's live (unrevoked) keys
            (:meth:`~harness_gateway.store.SqlStore.create_key` refuses a taken one with a 409);
            printable text: no control or format characters (a newline would forge a row of
            ``harness keys list``).
        routes: the routes it may use (``None`` = every route; an empty list is refused: such a
            key could use nothing).
        budget: USD it may spend in total (``None`` = unlimited); a positive, finite float.
        rpm / tpm: requests / tokens (input + output) per rolling 60 s (``None`` = unlimited);
            from 1 to :data:`MAX_RATE`.
        expires_days: days until it stops working (``None`` = never); positive, and the expiry
            it makes (from now) at most :data:`LATEST_EXPIRY`.
        expires_at: or the unix time (seconds) it stops working, as ``/admin/keys`` lists it:
            after now, at most :data:`LATEST_EXPIRY`; at most one of the two.

    Expiries are checked against the clock (:func:`time.time`) when the spec is made.

    Raises:
        KeySpecError: (a ``ValueError``) naming the field at fault: an empty or unprintable name,
            a number that is not positive or finite, one beyond its bound (a store's column could
            not hold it, or no date could show the expiry), an expiry in the past, no route, or
            both expiries.
    """

    name: str
    routes: list[str] | None = None
    budget: float | None = msgspec.field(default=None)
    rpm: int | None = None
    tpm: int | None = None
    expires_days: float | None = None
    expires_at: float | None = None

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise KeySpecError("name", "must not be empty")
        bad = _unprintable(self.name)
        if bad is not None:
            raise KeySpecError("name", f"must be printable text, without control characters (found U+{ord(bad):04X})")
        now = time.time()
        days = math.floor((LATEST_EXPIRY - now) / _DAY)
        for field, value, most, bound in (
            ("budget", self.budget, sys.float_info.max, f"{sys.float_info.max!r}, the largest float"),
            ("rpm", self.rpm, MAX_RATE, f"{MAX_RATE}, what every state store can hold"),
            ("tpm", self.tpm, MAX_RATE, f"{MAX_RATE}, what every state store can hold"),
            ("expires_days", self.expires_days, days, f"{days} days from now: {_LATEST}"),
            ("expires_at", self.expires_at, LATEST_EXPIRY, f"{LATEST_EXPIRY:.0f}: {_LATEST}"),
        ):
            if value is None:
                continue
            # compared, never converted: an int too large for a float (10**400) is refused, not an
            # OverflowError; the value is quoted cut (snippet) as a JSON body may hold any digits
            if isinstance(value, bool) or not value > 0 or value == math.inf:
                raise KeySpecError(field, f"must be a finite positive number, got {snippet(repr(value))}")
            if value > most:
                raise KeySpecError(field, f"must be at most {bound}; got {snippet(repr(value))}")
        if self.expires_at is not None and self.expires_at <= now:
            raise KeySpecError(
                "expires_at",
                f"is in the past: {self.expires_at!r} is {shown_time(self.expires_at)}, before now ({shown_time(now)});"
                " it is the unix time (seconds) the key stops working",
            )
        if self.routes is not None and not self.routes:
            raise KeySpecError("routes", "must name at least one route (leave it out for every route)")
        if self.expires_days is not None and self.expires_at is not None:
            raise KeySpecError("expires_at", "cannot be given with expires_days: give one of the two")

    def expiry(self, now: float) -> float | None:
        """The unix time the key expires, for a key created at ``now`` (``None``: never)."""
        if self.expires_at is not None:
            return self.expires_at
        return now + self.expires_days * _DAY if self.expires_days is not None else None

    def unserved(self, served: Collection[str]) -> str | None:
        """Why :attr:`routes` does not fit the ``served`` routes (the gateway's generation and
        embedding routes): a message naming every route not served, each with the served route
        closest to it when one is (``'mokc' (did you mean 'mock'?)``: the one "did you mean" of a
        route, :func:`~harness_core.routing.route_suggestion`), then the served ones; ``None``
        when each is served (or the key may use every route). What ``harness gateway keys create
        --routes``, ``POST /admin/keys`` and the console refuse."""
        return unserved_routes(self.routes, served)


def split_routes(text: str) -> list[str]:
    """The routes of a comma-separated list as people type it (``--routes``, the console's form):
    ``"mock, other,"`` → ``["mock", "other"]`` (blanks dropped; an empty list is
    :class:`KeySpec`'s to refuse)."""
    return [route.strip() for route in text.split(",") if route.strip()]


def unserved_routes(routes: Collection[str] | None, served: Collection[str]) -> str | None:
    """Why ``routes`` (a key's, ``None``: every route) do not fit the ``served`` routes: the
    message of :meth:`KeySpec.unserved`, which a new key and a changed one (:class:`KeyChange`)
    are both refused with; ``None`` when every one is served."""
    unknown = [route for route in routes or () if route not in served]
    if not unknown:
        return None
    names = ", ".join(f"{route!r}{route_suggestion(route, sorted(served))}" for route in unknown)
    return f"{names} not served by this gateway (served: {', '.join(sorted(served)) or 'none'})"


class KeyChange(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """A change of a live key's settings (``PATCH /admin/keys/{id}``, ``harness keys update``):
    the fields of :class:`KeySpec`, each left out (``msgspec.UNSET``) kept as it is, ``None``
    (JSON ``null``) removing that limit: ``routes`` every route, ``budget`` / ``rpm`` / ``tpm``
    unlimited, ``expires_days`` / ``expires_at`` never expires. ``name`` cannot be removed.

    A key's spend is never changed: a budget set below what the key spent leaves it spent (every
    request refused), one raised above admits requests again at once (admission reads the key's
    row in its transaction, on every store).
    """

    name: str | msgspec.UnsetType = msgspec.UNSET
    routes: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    budget: float | msgspec.UnsetType | None = msgspec.UNSET
    rpm: int | msgspec.UnsetType | None = msgspec.UNSET
    tpm: int | msgspec.UnsetType | None = msgspec.UNSET
    expires_days: float | msgspec.UnsetType | None = msgspec.UNSET
    expires_at: float | msgspec.UnsetType | None = msgspec.UNSET

    def changes(self) -> list[str]:
        """The names of the fields given, in declaration order."""
        return [name for name in self.__struct_fields__ if getattr(self, name) is not msgspec.UNSET]

    def applied(self, key: KeyRecord, now: float) -> KeyRecord:
        """``key`` with this change at ``now`` (unix seconds), checked by :class:`KeySpec`'s rules
        (the owner of what a key may be): a kept expiry is not checked again (an expired key may
        get a budget), a new one must be after ``now``.

        Raises:
            KeySpecError: naming the field at fault, as :class:`KeySpec` does.
        """

        def given(value: object, kept: object) -> Any:
            return kept if value is msgspec.UNSET else value

        if self.routes == []:  # (KeySpec's message says to leave the field out, which keeps them here)
            raise KeySpecError(
                "routes", "must name at least one route (null, or `none` on the command line, for every route)"
            )
        expiry_given = self.expires_days is not msgspec.UNSET or self.expires_at is not msgspec.UNSET
        spec = KeySpec(
            name=given(self.name, key.name),
            routes=given(self.routes, key.routes),
            budget=given(self.budget, key.budget),
            rpm=given(self.rpm, key.rpm),
            tpm=given(self.tpm, key.tpm),
            expires_days=given(self.expires_days, None),
            expires_at=given(self.expires_at, None),
        )
        return msgspec.structs.replace(
            key,
            name=spec.name,
            routes=spec.routes,
            budget=spec.budget,
            rpm=spec.rpm,
            tpm=spec.tpm,
            expires_at=spec.expiry(now) if expiry_given else key.expires_at,
        )


class KeyRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A stored key (never its value). Times are unix seconds; money is USD."""

    id: str
    name: str
    routes: list[str] | None
    budget: float | None
    rpm: int | None
    tpm: int | None
    expires_at: float | None
    created_at: float
    revoked_at: float | None
    spent: float

    def usable(self, now: float | None = None) -> bool:
        """Neither revoked nor expired at ``now``."""
        moment = time.time() if now is None else now
        return self.revoked_at is None and (self.expires_at is None or moment < self.expires_at)

    def allows(self, route: str) -> bool:
        """Whether this key may use ``route``."""
        return self.routes is None or route in self.routes
