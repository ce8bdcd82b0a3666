"""The ``httpx.AsyncClient`` every HTTP adapter uses, configured one way (timeouts, pool,
no redirects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlsplit

import httpx

from harness_core.errors import LlmError
from harness_core.http.headers import basic_auth, check_headers
from harness_core.http.transport import make_transport, resolve_transport

if TYPE_CHECKING:  # pragma: no cover - typing only (httpx's own alias of what a cookie store takes)
    from httpx._types import CookieTypes

__all__ = ["ACCEPT_ENCODING", "AdapterClient", "basic_auth_of", "make_client", "split_base_url"]

ACCEPT_ENCODING: Final = "gzip, deflate"
"""The ``Accept-Encoding`` every client sends: exactly the codings :class:`SSEStream` decodes
(httpx would otherwise advertise ``br``/``zstd`` whenever brotli or zstandard is installed)."""


def split_base_url(base_url: str) -> tuple[str, str]:
    """``"http://h/v1/?api-version=X"`` → ``("http://h/v1", "api-version=X")``.

    The path loses its trailing ``/`` so request paths join onto it; the query (an Azure-style
    ``api-version``) is kept apart and sent with every request (RFC 3986 §5.2,
    https://www.rfc-editor.org/rfc/rfc3986#section-5.2: a reference path replaces the query).
    """
    base, _, query = base_url.partition("?")
    base = base.partition("#")[0]
    return base.rstrip("/"), query.partition("#")[0]


def basic_auth_of(base_url: str) -> tuple[str, str | None]:
    """``base_url`` without its userinfo, and the ``Authorization`` value that userinfo stands
    for: ``"http://u:p@h/v1"`` → ``("http://h/v1", "Basic dTpw")`` (:func:`basic_auth` of the
    percent-decoded user and password);
    ``None`` without userinfo. Sending it as a header, not in the URL, makes both transports
    behave alike (aiohttp refuses a URL with credentials next to an ``Authorization`` header).
    """
    parts = urlsplit(base_url)
    if "@" not in parts.netloc:
        return base_url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return parts._replace(netloc=host).geturl(), basic_auth(unquote(user), unquote(password))


class _Cookies(httpx.Cookies):
    """httpx's cookie store, skipping a response that sets no cookie.

    httpx hands every response to the cookie jar, wrapping it and its request in ``urllib``
    objects first (the URL re-parsed, the headers copied into an ``email`` message): ~18 µs per
    request, 4 % of the time to the first chunk, for the ``Set-Cookie`` a model API hardly ever
    sends. A response with one is stored exactly as before.
    """

    def extract_cookies(self, response: httpx.Response) -> None:
        """Store the cookies of ``response``'s ``Set-Cookie`` headers (none: nothing to do)."""
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


_MAX_HEADS: Final = 64
"""Request heads an :class:`AdapterClient` keeps (an adapter sends one or two: its hosts and its
requests' headers); past it they are made again."""


class AdapterClient(httpx.AsyncClient):
    """The ``httpx.AsyncClient`` of :func:`make_client`: an ``AsyncClient`` whose cookie store
    (``client.cookies``, public httpx API) skips responses without ``Set-Cookie``, and whose
    :meth:`build_request` builds an adapter's ``POST`` of a JSON body from headers merged once."""

    def __init__(self, *, cookies: CookieTypes | None = None, **options: Any) -> None:
        super().__init__(**options)
        self._store = _Cookies(cookies)
        self._heads: dict[tuple[object, ...], httpx.Headers | None] = {}
        """Per ``(method, URL netloc, request headers)``, the request head httpx builds for it
        without its ``Content-Length`` (``None``: one :meth:`build_request` cannot reproduce)."""
        self._heads_for: tuple[list[tuple[bytes, bytes]], httpx.Timeout, dict[str, Any]] | None = None
        """The client's headers and timeout :attr:`_heads` were made with, and that timeout as
        the request extension httpx gives it."""

    def build_request(
        self,
        method: str,
        url: httpx.URL | str,
        *,
        content: Any = None,
        data: Any = None,
        files: Any = None,
        json: Any = None,
        params: Any = None,
        headers: Any = None,
        cookies: Any = None,
        timeout: Any = httpx.USE_CLIENT_DEFAULT,
        extensions: Any = None,
    ) -> httpx.Request:
        """``httpx.AsyncClient.build_request``, the same request (head, body, extensions).

        The request every adapter sends, a non-empty ``bytes`` body to an absolute
        ``httpx.URL`` with a mapping of headers and nothing else per request, while the client
        has no cookies and no query parameters, is built from the head httpx built for the first
        such request of that method, host and headers (the client's headers merged with the
        request's, ``Host`` first), plus its ``Content-Length``: httpx merges the client's
        headers and normalises every header twice per request (~80 µs on the loaded test
        machine, where this takes ~17 µs; BENCHMARKS.md, issue 25). The heads are made again
        when the client's ``headers`` or ``timeout`` change, and at most :data:`_MAX_HEADS` are
        kept (a caller sending other headers on every request gets no leak); any other request
        is httpx's own.
        """
        if (
            content.__class__ is not bytes
            or not content
            or url.__class__ is not httpx.URL
            or data is not None
            or files is not None
            or json is not None
            or params is not None
            or cookies is not None
            or extensions is not None
            or timeout is not httpx.USE_CLIENT_DEFAULT
            or self.params
            or self._store
            or not url.is_absolute_url
        ):
            return super().build_request(
                method,
                url,
                content=content,
                data=data,
                files=files,
                json=json,
                params=params,
                headers=headers,
                cookies=cookies,
                timeout=timeout,
                extensions=extensions,
            )
        state = self._heads_for
        client_headers = self.headers.raw
        if state is None or state[1] is not self.timeout or state[0] != client_headers:
            state = self._heads_for = (client_headers, self.timeout, self.timeout.as_dict())
            self._heads.clear()
        key = (method, url.netloc, tuple(headers.items()) if headers else ())
        heads = self._heads
        if key not in heads:
            if len(heads) >= _MAX_HEADS:
                heads.clear()
            request = super().build_request(method, url, content=content, headers=headers)
            raw = request.headers.raw
            length = (b"Content-Length", str(len(content)).encode())
            heads[key] = httpx.Headers(raw[:-1]) if raw and raw[-1] == length else None
            return request
        head = heads[key]
        if head is None:
            return super().build_request(method, url, content=content, headers=headers)
        request = httpx.Request(
            method, url, headers=head, stream=httpx.ByteStream(content), extensions={"timeout": state[2]}
        )
        request.headers["Content-Length"] = str(len(content))
        request.read()
        return request

    @property
    def cookies(self) -> httpx.Cookies:
        """The cookies sent with requests (a response's ``Set-Cookie`` adds to them)."""
        return self._store

    @cookies.setter
    def cookies(self, cookies: CookieTypes) -> None:
        self._store = _Cookies(cookies)


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
    backend: str = "auto",
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` configured alike for every HTTP adapter.

    Timeouts are in seconds (``None`` = no limit). ``read_timeout`` bounds the silence between
    two reads of a streaming body, so a keep-alive comment resets it; the 600 s default allows
    long reasoning pauses (httpx's own default of 5 s does not). ``headers`` are sent with every
    request (put the API key here; httpx never logs it). Redirects are not followed. The caller
    closes the client (``await client.aclose()``).

    ``base_url`` may carry a query (``http://h/v1?api-version=X``): request paths are joined
    onto its path and the query is sent with every request (:func:`split_base_url`). A
    ``user:password@`` in it is sent as an ``Authorization: Basic`` header on every request
    (:func:`basic_auth_of`), never in the URL.
    ``Accept-Encoding`` is :data:`ACCEPT_ENCODING` unless ``headers`` set it.

    ``transport`` (tests, proxies) wins; otherwise ``backend`` picks the network transport:
    ``"auto"``, ``"httpcore"`` or ``"aiohttp"`` (:func:`harness_core.http.resolve_transport`).

    Raises:
        LlmError: ``CONFIG`` (naming ``provider``) for a header value that cannot be sent
            (:func:`check_headers`), a ``backend`` that cannot be used here, or a ``base_url``
            with a ``user:password@`` while ``headers`` set ``Authorization`` too (an ``api_key``:
            a request carries one of them only).
    """
    sent = dict(headers or {})
    base_url, basic = basic_auth_of(base_url)
    if basic is not None:
        if any(name.lower() == "authorization" for name in sent):
            raise LlmError(
                "CONFIG",
                "base_url holds a user:password (sent as HTTP Basic auth) and the headers set Authorization "
                "too (an api_key?): keep one of them",
                provider=provider,
            )
        sent["authorization"] = basic
    if not any(name.lower() == "accept-encoding" for name in sent):
        sent["accept-encoding"] = ACCEPT_ENCODING
    check_headers(sent, provider=provider)
    base, query = split_base_url(base_url)
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive_connections)
    if transport is None:
        transport = make_transport(resolve_transport(backend, provider=provider), limits=limits)
    return AdapterClient(
        base_url=base,
        params=httpx.QueryParams(query) if query else None,
        headers=sent,
        timeout=httpx.Timeout(connect=connect_timeout, read=read_timeout, write=write_timeout, pool=pool_timeout),
        limits=limits,
        transport=transport,
        follow_redirects=False,
    )
