"""httpx's transport API over aiohttp: :class:`AiohttpTransport`, the ``transport: aiohttp`` of an
HTTP provider (asyncio only).

Imported only when that transport is chosen (aiohttp costs ~100 ms of import). It keeps
`httpx-aiohttp <https://pypi.org/project/httpx-aiohttp/>`_ for what it does well, building the
``aiohttp.ClientSession`` and its connector from httpx's options (TLS context from ``verify``,
``cert`` and the environment, ``limits``, ``uds``, ``local_address``) and closing it; that setup
runs once per transport, and copying it would give two owners of the same mapping. The request
itself, paid on every upstream call, is our own :meth:`AiohttpTransport.handle_async_request`
(httpx-aiohttp's did work a request does not need: ~6 % of an upstream request's client side,
BENCHMARKS.md issue 25, "the aiohttp transport's own work"):

- the request headers go to aiohttp as one ``multidict.CIMultiDict`` built from
  ``request.headers.raw`` (:func:`aiohttp_headers`), not as the ``httpx.Headers`` whose
  ``items()`` decodes every header again and joins repeated ones into one ``a, b`` line: the
  request head is the one httpcore sends (names in their case, a repeated header repeated, no
  ``Content-Type`` of aiohttp's own);
- one ``aiohttp.ClientTimeout`` per distinct ``(connect, read, pool)`` timeout
  (:func:`client_timeout`), not one per request;
- the ``httpx.Response`` is built from aiohttp's raw response headers, with a body stream of
  our own.

Two more things differ from httpx-aiohttp's own transport: aiohttp's exceptions become the httpx
exceptions httpcore raises for the same fault (:func:`map_exception`; httpx-aiohttp's map reports
a dropped connection as ``ConnectTimeout``), so :func:`harness_core.http.error_from_exception`
classifies both transports alike; and a response body is read as it arrives (``readany``: every
read returns all the bytes received so far, so a burst of server-sent events costs one read).
"""

from __future__ import annotations

import functools
import urllib.request
from collections.abc import AsyncIterator, Mapping
from typing import Any, NoReturn

import aiohttp
import httpx
import httpx_aiohttp
from multidict import CIMultiDict, istr

from harness_core.http.finishing import BODY_RECEIVED
from harness_core.http.headers import basic_auth

__all__ = ["AiohttpTransport", "aiohttp_headers", "client_timeout", "map_exception"]

_HTTP_1_1 = b"HTTP/1.1"
_NO_AUTO_HEADERS = (istr("Content-Type"),)
"""Headers aiohttp adds unasked that httpcore does not: ``Content-Type:
application/octet-stream`` on a ``POST``, ``PUT`` or ``PATCH`` without one. (The others it adds
by default, ``Accept``, ``Accept-Encoding``, ``User-Agent``, ``Host``, httpx always sets.) Given
to aiohttp only for a request without a ``Content-Type``: skipping costs aiohttp a copy of the
headers (~11,000 instructions), and an adapter's request has one."""


class AiohttpTransport(httpx_aiohttp.AiohttpTransport):
    """An ``httpx.AsyncBaseTransport`` over one ``aiohttp.ClientSession`` (created on the first
    request, inside the running asyncio loop, by httpx-aiohttp's ``get_client``; closed by
    ``aclose``). Raises the httpx exceptions of :func:`map_exception`.

    Proxies: a ``proxy`` (an ``httpx.Proxy``) given to it carries every request. Without one,
    and with ``trust_env`` (the default, as httpx's own clients), the environment's proxies are
    used as httpx uses them over httpcore: ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` by
    the URL's scheme, none for a host ``NO_PROXY`` matches (lower- or upper-case names, through
    :func:`urllib.request.getproxies` when the transport is made and
    :func:`urllib.request.proxy_bypass`; which proxy a host gets is remembered per scheme, host
    and port). aiohttp's own ``trust_env`` is not used:
    it reads the environment and ``~/.netrc`` in a thread on every request."""

    def __init__(self, **options: Any) -> None:
        trust_env = bool(options.setdefault("trust_env", True))
        super().__init__(**options)
        self._environment: Mapping[str, str] = urllib.request.getproxies() if trust_env and self.proxy is None else {}
        self._proxies: dict[tuple[str, str, int | None], tuple[str, CIMultiDict[str]] | None] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through aiohttp and return its response once the status line and
        headers have arrived.

        The request's ``timeout`` extension (seconds, httpx's ``connect`` / ``read`` / ``pool``)
        becomes aiohttp's ``sock_connect`` / ``sock_read`` / ``connect`` (:func:`client_timeout`);
        its ``sni_hostname`` extension the TLS server name. With a ``proxy`` (an ``httpx.Proxy``
        given to the transport) the request goes through it, with the proxy's headers and its
        credentials (:func:`_proxy_of`). A body already read (bytes) is sent with its
        ``Content-Length``, an empty one as no body, a streamed one (an ``httpx.AsyncByteStream``)
        as aiohttp frames it (chunked unless a ``Content-Length`` is set; httpx's own
        ``Transfer-Encoding`` header is left to aiohttp). Redirects are not followed, bodies are
        neither compressed nor decompressed (httpx decodes), and aiohttp adds no
        ``Content-Type`` (:data:`_NO_AUTO_HEADERS`): the head is the one httpcore sends.

        The response body streams from aiohttp (:class:`_Body`); its
        :data:`~harness_core.http.finishing.BODY_RECEIVED` extension (a callable) tells whether
        all of it has arrived (closing it then needs no network read); ``http_version`` is
        ``HTTP/1.1`` and ``reason_phrase`` the status line's reason, when it has one.

        Raises:
            httpx.HTTPError: the fault, as :func:`map_exception` maps it.
        """
        session = self.client
        if not isinstance(session, aiohttp.ClientSession):
            session = self.client = self.get_client()
        extensions = request.extensions
        timeout = extensions.get("timeout", {})
        data: bytes | httpx.AsyncByteStream | None
        try:
            data = request.content or None
            streamed = False
        except httpx.RequestNotRead:
            data = request.stream  # type: ignore[assignment]  # an async request has an async stream
            streamed = True
        headers = aiohttp_headers(request.headers)
        if streamed:
            headers.popall("transfer-encoding", None)  # aiohttp frames a streamed body itself
        proxy_url: str | None
        proxy_headers: CIMultiDict[str] | None
        if self.proxy is not None:
            proxy_url, proxy_headers = _proxy_of(self.proxy)
        elif self._environment:
            proxy_url, proxy_headers = self._environment_proxy(request.url) or (None, None)
        else:
            proxy_url = proxy_headers = None
        try:
            response = await session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=data,
                allow_redirects=False,
                auto_decompress=False,
                compress=False,
                skip_auto_headers=None if "Content-Type" in headers else _NO_AUTO_HEADERS,  # ~3 µs when given
                timeout=client_timeout(timeout.get("connect"), timeout.get("read"), timeout.get("pool")),
                server_hostname=extensions.get("sni_hostname"),
                proxy=proxy_url,
                proxy_headers=proxy_headers,
            ).__aenter__()
        except Exception as exc:
            _reraise(exc, request)
        returned: dict[str, object] = {"http_version": _HTTP_1_1, BODY_RECEIVED: response.content.is_eof}
        if response.reason:
            returned["reason_phrase"] = response.reason.encode()
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=_Body(response, request),
            request=request,
            extensions=returned,
        )

    def _environment_proxy(self, url: httpx.URL) -> tuple[str, CIMultiDict[str]] | None:
        """The environment's proxy for ``url`` (:func:`_proxy_of`), ``None`` when it goes direct
        (no proxy for its scheme, or ``NO_PROXY`` names its host); remembered per origin."""
        origin = (url.scheme, url.host, url.port)
        if origin not in self._proxies:
            environment = self._environment
            chosen = environment.get(url.scheme) or environment.get("all")
            host = url.host if url.port is None else f"{url.host}:{url.port}"
            bypass = chosen is not None and bool(urllib.request.proxy_bypass(host))
            self._proxies[origin] = None if chosen is None or bypass else _proxy_of(httpx.Proxy(chosen))
        return self._proxies[origin]


def aiohttp_headers(headers: httpx.Headers) -> CIMultiDict[str]:
    """``headers`` as aiohttp takes them: a ``CIMultiDict`` of ``str``, one entry per raw header
    line (a repeated header stays repeated, in order; names keep their case).

    aiohttp writes header lines as UTF-8, so each name and value is decoded from its raw bytes as
    UTF-8: ASCII and UTF-8 values go on the wire byte for byte as httpcore sends them. When one
    header holds bytes that are not UTF-8, all are decoded with ``headers.encoding`` (httpx's
    fallback, ISO-8859-1) and reach the wire re-encoded as UTF-8, as they did through
    ``httpx.Headers.items()`` (aiohttp cannot send other bytes).
    """
    raw = headers.raw
    try:
        return CIMultiDict([(name.decode(), value.decode()) for name, value in raw])
    except UnicodeDecodeError:
        encoding = headers.encoding
        return CIMultiDict([(name.decode(encoding), value.decode(encoding)) for name, value in raw])


def _proxy_of(proxy: httpx.Proxy) -> tuple[str, CIMultiDict[str]]:
    """The proxy's URL (without its credentials) and aiohttp's ``proxy_headers``: the proxy's own
    headers (sent on the ``CONNECT`` of an ``https`` URL) and its credentials as an
    ``Authorization`` entry (:func:`~harness_core.http.headers.basic_auth`: UTF-8, as httpx
    encodes them), which aiohttp moves to the ``Proxy-Authorization`` header of the ``CONNECT``,
    or of the request itself for an ``http`` URL. (aiohttp's ``proxy_auth`` takes a
    ``BasicAuth``, deprecated in aiohttp 3.14, and encodes it as ISO-8859-1.)"""
    headers = aiohttp_headers(proxy.headers)
    if proxy.auth is not None:
        headers["Authorization"] = basic_auth(*proxy.auth)
    return str(proxy.url), headers


@functools.lru_cache(maxsize=64)
def client_timeout(connect: float | None, read: float | None, pool: float | None) -> aiohttp.ClientTimeout:
    """The ``aiohttp.ClientTimeout`` of httpx's ``connect`` / ``read`` / ``pool`` timeouts
    (seconds, ``None`` = no limit): ``sock_connect`` / ``sock_read`` / ``connect``, no ``total``.
    One object per distinct triple (it is immutable), the last 64 kept."""
    return aiohttp.ClientTimeout(sock_connect=connect, sock_read=read, connect=pool)


class _Body(httpx.AsyncByteStream):
    """A response body from aiohttp: each read returns what has arrived (``readany``)."""

    __slots__ = ("_request", "_response")

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        content = self._response.content
        try:
            while chunk := await content.readany():
                yield chunk
        except Exception as exc:
            _reraise(exc, self._request)

    async def aclose(self) -> None:
        """Release the connection: back to the pool after a complete body, closed otherwise."""
        self._response.release()


def _reraise(exc: Exception, request: httpx.Request) -> NoReturn:
    """Raise ``exc`` (an exception aiohttp raised, being handled) as :func:`map_exception` maps
    it, chained to it; as it is when it is no transport fault. An ``except`` clause, not a
    context manager: one fewer generator per request."""
    mapped = map_exception(exc, request)
    if mapped is None:
        raise exc
    raise mapped from exc


def map_exception(exc: BaseException, request: httpx.Request) -> httpx.HTTPError | None:
    """The httpx exception httpcore raises for the fault aiohttp reported as ``exc``
    (``None``: not a transport fault, re-raise it as it is).

    ``ConnectionTimeoutError`` → ``ConnectTimeout``; other ``TimeoutError`` (aiohttp's
    ``sock_read``) → ``ReadTimeout``; ``InvalidURL`` → ``UnsupportedProtocol``;
    ``ClientConnectorError`` → ``ConnectError``; a cut body,
    a dropped connection or a malformed response → ``RemoteProtocolError``; any other
    ``aiohttp.ClientError`` / ``OSError`` → ``ReadError``.
    """
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message, request=request)
    if isinstance(exc, TimeoutError):  # aiohttp's sock_read timeout derives from it
        return httpx.ReadTimeout(message, request=request)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(message, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message, request=request)
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientResponseError)):
        return httpx.RemoteProtocolError(message, request=request)
    if isinstance(exc, (aiohttp.ClientError, OSError)):
        return httpx.ReadError(message, request=request)
    return None
