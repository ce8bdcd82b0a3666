"""httpx's transport API over aiohttp (`httpx-aiohttp <https://pypi.org/project/httpx-aiohttp/>`_):
:class:`AiohttpTransport`, the ``transport: aiohttp`` of an HTTP provider (asyncio only).

Imported only when that transport is chosen (aiohttp costs ~100 ms of import). It corrects two
things of httpx-aiohttp's own transport: its exception map (which reports a dropped connection
as ``ConnectTimeout``) becomes the httpx exceptions httpcore raises for the same fault, so
:func:`harness_core.http.error_from_exception` classifies both transports alike; and a response
body is read as it arrives (``readany``: every read returns all the bytes received so far, so a
burst of server-sent events costs one read).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx
import httpx_aiohttp
from httpx_aiohttp.transport import AiohttpResponseStream

from harness_core.http.finishing import BODY_RECEIVED

__all__ = ["AiohttpTransport", "map_exception"]


class AiohttpTransport(httpx_aiohttp.AiohttpTransport):
    """An ``httpx.AsyncBaseTransport`` over one ``aiohttp.ClientSession`` (created on the first
    request, inside the running asyncio loop; closed by ``aclose``). Raises the httpx exceptions
    of :func:`map_exception`."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; the response body streams from aiohttp (:class:`_Body`), and the
        response's :data:`~harness_core.http.finishing.BODY_RECEIVED` extension tells whether
        all of it has arrived (closing it then needs no network read)."""
        with _mapping(request):
            response = await super().handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, AiohttpResponseStream)
        response.stream = _Body(stream._aiohttp_response, request)
        response.extensions[BODY_RECEIVED] = stream._aiohttp_response.content.is_eof
        return response


class _Body(httpx.AsyncByteStream):
    """A response body from aiohttp: each read returns what has arrived (``readany``)."""

    __slots__ = ("_request", "_response")

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        content = self._response.content
        with _mapping(self._request):
            while chunk := await content.readany():
                yield chunk

    async def aclose(self) -> None:
        """Release the connection: back to the pool after a complete body, closed otherwise."""
        self._response.release()


@contextlib.contextmanager
def _mapping(request: httpx.Request) -> Iterator[None]:
    """Re-raise aiohttp's exceptions (or httpx-aiohttp's mapping of them) as :func:`map_exception`."""
    try:
        yield
    except Exception as exc:
        cause = exc.__cause__ if isinstance(exc, httpx.HTTPError) and exc.__cause__ is not None else exc
        mapped = map_exception(cause, request)
        if mapped is None:
            raise
        raise mapped from cause


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
