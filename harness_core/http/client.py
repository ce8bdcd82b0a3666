"""The ``httpx.AsyncClient`` every HTTP adapter uses, configured one way (timeouts, pool,
no redirects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import httpx

from harness_core.errors import LlmError
from harness_core.secret import secret_problem

__all__ = ["ACCEPT_ENCODING", "check_headers", "make_client", "split_base_url"]

ACCEPT_ENCODING: Final = "gzip, deflate"
"""The ``Accept-Encoding`` every client sends: exactly the codings :class:`SSEStream` decodes
(httpx would otherwise advertise ``br``/``zstd`` whenever brotli or zstandard is installed)."""


def check_headers(headers: Mapping[str, str], *, provider: str | None = None) -> None:
    """Refuse header values that cannot be sent, before any request.

    A value with surrounding whitespace, a control character (``\\r``/``\\n`` of a CRLF
    ``.env`` file) or a non-ASCII character would make httpx fail at send time with a
    retryable-looking transport error quoting the value. Raises :class:`LlmError` ``CONFIG``
    naming the header and the character; the value is never shown.
    """
    for name, value in headers.items():
        problem = secret_problem(value, "its value")
        if problem is not None:
            raise LlmError("CONFIG", f"header {name!r}: {problem}", provider=provider)


def split_base_url(base_url: str) -> tuple[str, str]:
    """``"http://h/v1/?api-version=X"`` → ``("http://h/v1", "api-version=X")``.

    The path loses its trailing ``/`` so request paths join onto it; the query (an Azure-style
    ``api-version``) is kept apart and sent with every request (RFC 3986 §5.2,
    https://www.rfc-editor.org/rfc/rfc3986#section-5.2: a reference path replaces the query).
    """
    base, _, query = base_url.partition("?")
    base = base.partition("#")[0]
    return base.rstrip("/"), query.partition("#")[0]


def make_client(
    *,
    base_url: str = "",
    headers: Mapping[str, str] | None = None,
    provider: str | None = None,
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

    ``base_url`` may carry a query (``http://h/v1?api-version=X``): request paths are joined
    onto its path and the query is sent with every request (:func:`split_base_url`).
    ``Accept-Encoding`` is :data:`ACCEPT_ENCODING` unless ``headers`` set it.

    Raises:
        LlmError: ``CONFIG`` (naming ``provider``) for a header value that cannot be sent
            (:func:`check_headers`).
    """
    sent = dict(headers or {})
    if not any(name.lower() == "accept-encoding" for name in sent):
        sent["accept-encoding"] = ACCEPT_ENCODING
    check_headers(sent, provider=provider)
    base, query = split_base_url(base_url)
    return httpx.AsyncClient(
        base_url=base,
        params=httpx.QueryParams(query) if query else None,
        headers=sent,
        timeout=httpx.Timeout(connect=connect_timeout, read=read_timeout, write=write_timeout, pool=pool_timeout),
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive_connections),
        transport=transport,
        follow_redirects=False,
    )
