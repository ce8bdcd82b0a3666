"""Who is calling: the key a request presents, the master key, a key's route permissions.

Every check compares secrets in constant time; a key's record comes from the state store
(:meth:`~harness_gateway.store.SqlStore.authenticate`), never from this module.
"""

from __future__ import annotations

import hmac

from starlette.requests import Request

from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord
from harness_gateway.store import SqlStore

__all__ = ["allowed", "authenticate", "may_scrape", "presented_key", "same_secret"]


def presented_key(request: Request) -> str | None:
    """The key ``request`` presents: ``Authorization: Bearer <key>``, else ``x-api-key``; ``None``
    without one."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


def same_secret(a: str, b: str) -> bool:
    """Whether two secrets are equal, compared in constant time."""
    return hmac.compare_digest(a.encode(), b.encode())


async def authenticate(
    store: SqlStore, request: Request, *, master_key: str | None, keys_required: bool
) -> KeyRecord | bool | None:
    """The caller's key record; ``True`` for the master key; ``None`` when anonymous is allowed.

    A key this gateway issued and then revoked (or that expired) is refused even where keys are
    optional (loopback): revoking must take effect everywhere. An unknown or missing key is
    anonymous there, since SDKs always send some key.

    Raises:
        GatewayError: 401 for a revoked or expired key; where keys are required, also for a
            missing or unknown one; 503 while ``store`` is unreachable.
    """
    presented = presented_key(request)
    if presented is not None and master_key is not None and same_secret(presented, master_key):
        return True
    record = await store.authenticate(presented) if presented else None
    if record is not None:
        if record.usable():
            return record
        state = "been revoked" if record.revoked_at is not None else "expired"
        raise GatewayError(401, f"this API key has {state}", code="invalid_api_key")
    if not keys_required:
        return None
    if presented is None:
        raise GatewayError(
            401, "an API key is required (Authorization: Bearer <key> or x-api-key)", code="missing_api_key"
        )
    raise GatewayError(401, "invalid API key", code="invalid_api_key")


def may_scrape(request: Request, *, protected: bool, secrets: tuple[str | None, ...]) -> bool:
    """Whether ``request`` may read ``/metrics``: always when not ``protected``, else with one of
    ``secrets`` (the master key, the metrics token; compared in constant time; the state store is
    not asked, so a scrape works while the database is down)."""
    if not protected:
        return True
    presented = presented_key(request)
    return presented is not None and any(secret is not None and same_secret(presented, secret) for secret in secrets)


def allowed(who: KeyRecord | bool | None, route: str) -> KeyRecord | None:
    """The key record of ``who`` (``None`` without keys).

    Raises:
        GatewayError: 403 when the key may not use ``route``.
    """
    key = who if isinstance(who, KeyRecord) else None
    if key is not None and not key.allows(route):
        raise GatewayError(
            403, f"key {key.name!r} may not use route {route!r}", code="route_not_allowed", param="model"
        )
    return key
