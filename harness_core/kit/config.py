"""The config every HTTP provider plugin shares: :class:`HttpProviderConfig` and :class:`HttpTimeouts`.

A plugin subclasses :class:`HttpProviderConfig`, gives its vendor's ``base_url`` and ``routes``
defaults, binds ``api_key`` to the vendor's environment variable with :func:`vendor_api_key`
(only ever sent to the vendor's own host), and adds its own fields. Cheap to import (no httpx),
so ``harness plugins`` stays fast. Field meanings are in ``docs/writing-an-adapter.md``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from harness_core.config import EnvFallback
from harness_core.secret import Secret

__all__ = ["HttpProviderConfig", "HttpTimeouts", "client_options", "vendor_api_key"]


class HttpTimeouts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """HTTP timeouts in seconds (``None`` waits forever).

    Fields:
        connect: TCP connect + TLS handshake.
        read: the longest silence between two reads of the stream (a keep-alive comment resets
            it); reasoning models may think for minutes, hence 600.
        write: sending the request body.
    """

    connect: float = 10.0
    read: float | None = 600.0
    write: float | None = 60.0


class HttpProviderConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Fields shared by every HTTP provider plugin's config (``plugins.yaml`` entry).

    Fields:
        base_url: the API root the adapter's request paths are appended to.
        api_key: the credential (a :class:`~harness_core.secret.Secret`); ``None`` sends none
            (local servers). Subclasses bind it to an environment variable with
            :func:`vendor_api_key`.
        routes: the routes this plugin instance serves.
        headers: extra HTTP headers sent with every request (they win over the adapter's).
        timeout: :class:`HttpTimeouts` in seconds.
        max_connections: size of the HTTP connection pool.
        pool_timeout: seconds to wait for a free pooled connection.
    """

    base_url: str = ""
    api_key: Secret | None = None
    routes: list[str] = msgspec.field(default_factory=list)
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    timeout: HttpTimeouts = msgspec.field(default_factory=HttpTimeouts)
    max_connections: int = 20
    pool_timeout: float = 30.0


def vendor_api_key(var: str, base_url: str) -> EnvFallback:
    """The :class:`~harness_core.config.EnvFallback` of a vendor key: ``api_key`` comes from
    ``$var`` only while ``base_url`` is the vendor's own, so the key never reaches another host,
    and there it is required (without one the plugin fails naming ``var``; ``api_key: null`` in
    the YAML opts out). Another host needs none::

        api_key: Annotated[Secret | None, vendor_api_key("OPENAI_API_KEY", OPENAI_BASE_URL)] = None
    """
    return EnvFallback(var, only_when={"base_url": base_url}, required=True)


def client_options(config: HttpProviderConfig) -> dict[str, Any]:
    """Keyword arguments of :func:`harness_core.http.make_client` from a config (base URL, which
    may carry a query sent with every request; timeouts; pool size); headers are the adapter's
    business."""
    timeout = config.timeout
    return {
        "base_url": config.base_url,
        "connect_timeout": timeout.connect,
        "read_timeout": timeout.read,
        "write_timeout": timeout.write,
        "pool_timeout": config.pool_timeout,
        "max_connections": config.max_connections,
        "max_keepalive_connections": config.max_connections,
    }
