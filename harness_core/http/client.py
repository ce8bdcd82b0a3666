"""The ``httpx.AsyncClient`` every HTTP adapter uses, configured one way (timeouts, pool,
no redirects).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

__all__ = ["make_client"]


def make_client(
    *,
    base_url: str = "",
    headers: Mapping[str, str] | None = None,
    connect_timeout: float = 10.0,
    read_timeout: float | None = 600.0,
    write_timeout: float | None = 60.0,
    pool_timeout: float | None = 30.0,
    max_connections: int = 100,
    max_keepalive_connections: int = 20,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` configured alike for every HTTP adapter.

    Timeouts are in seconds (``None`` = no limit). ``read_timeout`` bounds the silence between
    two reads of a streaming body, so a keep-alive comment resets it; the 600 s default allows
    long reasoning pauses (httpx's own default of 5 s does not). ``headers`` are sent with every
    request (put the API key here; httpx never logs it). Redirects are not followed. The caller
    closes the client (``await client.aclose()``).
    """
    return httpx.AsyncClient(
        base_url=base_url,
        headers=dict(headers or {}),
        timeout=httpx.Timeout(connect=connect_timeout, read=read_timeout, write=write_timeout, pool=pool_timeout),
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive_connections),
        transport=transport,
        follow_redirects=False,
    )
