"""An abortable server-sent-events response: :func:`open_sse_stream` / :class:`SSEStream` (a
pending read ends when the abort signal fires, the response closed shielded and bounded on every
exit path). The event format is :mod:`harness_core.sse`'s (WHATWG ``text/event-stream``).
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from types import TracebackType
from typing import Any, Final, cast

import anyio
import httpx

from harness_core.abort import Aborted, AbortSignal, race
from harness_core.errors import LlmError, snippet
from harness_core.http.decoding import Inflater
from harness_core.http.errors import (
    MAX_ERROR_BODY,
    ErrorClassifier,
    error_from_exception,
    error_from_response,
    parse_error_body,
    request_id_from,
)
from harness_core.http.finishing import body_received, finish_generator
from harness_core.sse import DEFAULT_MAX_EVENT_SIZE, SSEDecoder, SSEEvent

__all__ = ["DEFAULT_CLOSE_TIMEOUT", "SSEStream", "open_sse_stream"]

DEFAULT_CLOSE_TIMEOUT: Final = 5.0
"""Seconds the shielded close of a response may take before it is abandoned."""


def open_sse_stream(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    abort: AbortSignal | None = None,
    provider: str | None = None,
    classifier: ErrorClassifier | None = None,
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    on_comment: Callable[[str], object] | None = None,
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
) -> SSEStream:
    """Send ``request`` as a streaming request; use the result as ``async with … as events``.

    Example::

        request = client.build_request("POST", "/chat/completions", json=body)
        async with open_sse_stream(client, request, abort=options.abort, provider="openai") as events:
            async for event in events:
                ...                      # SSEEvent; event.incomplete marks an EOF-cut last event
            if events.aborted:
                ...                      # finish{aborted}

    On enter (nothing is sent when ``abort`` already fired; ``events.aborted`` is then true):

    - a non-2xx status raises :func:`error_from_response` (the body is read, at most 64 KiB,
      and never reaches the SSE decoder);
    - a 2xx whose content type is not ``text/event-stream`` raises ``LlmError("PROTOCOL")``
      naming the content type;
    - httpx exceptions raise :func:`error_from_exception` (``TIMEOUT`` / ``NETWORK``).

    Iteration yields :class:`~harness_core.sse.SSEEvent`; when ``abort`` fires, a pending read
    ends and iteration simply ends (``events.aborted`` set). Over HTTP/1.1 the signal shuts the
    connection's socket down (one subscription per stream, nothing per read; the connection is
    not reused); where the transport exposes no socket every read is raced against it
    (:func:`~harness_core.abort.race`). A read failure raises
    ``TIMEOUT`` / ``NETWORK`` / ``PROTOCOL`` (oversize event). An event cut by EOF is yielded
    last with ``incomplete=True``. On exit the response is closed, shielded from cancellation and
    bounded by ``close_timeout`` seconds, whatever the exit path.
    """
    return SSEStream(
        client,
        request,
        abort=abort,
        provider=provider,
        classifier=classifier,
        decoder=SSEDecoder(max_event_size=max_event_size, on_comment=on_comment),
        close_timeout=close_timeout,
    )


class _BodyBytes(httpx.AsyncByteStream):
    """An in-memory request body iterated without a generator (see ``SSEStream.__aenter__``)."""

    __slots__ = ("_body",)

    def __init__(self, body: bytes) -> None:
        self._body = body

    def __aiter__(self) -> AsyncIterator[bytes]:
        return _OneChunk(self._body)


class _OneChunk:
    """An async iterator over exactly one bytes chunk (no async generator to finalise)."""

    __slots__ = ("_chunk",)

    def __init__(self, chunk: bytes) -> None:
        self._chunk: bytes | None = chunk

    def __aiter__(self) -> _OneChunk:
        return self

    async def __anext__(self) -> bytes:
        chunk, self._chunk = self._chunk, None
        if chunk is None:
            raise StopAsyncIteration
        return chunk


class SSEStream:
    """An open server-sent-events response; see :func:`open_sse_stream`.

    Attributes:
        response: the ``httpx.Response`` (``None`` when abort fired before it arrived).
        aborted: true once the abort signal ended the request or the iteration.
    """

    __slots__ = (
        "_abort",
        "_classifier",
        "_client",
        "_close_timeout",
        "_closed",
        "_decoder",
        "_done",
        "_events",
        "_inflate",
        "_provider",
        "_raw",
        "_request",
        "_socket",
        "_unwatch",
        "aborted",
        "response",
    )

    def __init__(
        self,
        client: httpx.AsyncClient,
        request: httpx.Request,
        *,
        abort: AbortSignal | None,
        provider: str | None,
        classifier: ErrorClassifier | None,
        decoder: SSEDecoder,
        close_timeout: float,
    ) -> None:
        self._client = client
        self._request = request
        self._abort = abort
        self._provider = provider
        self._classifier = classifier
        self._decoder = decoder
        self._close_timeout = close_timeout
        self._raw: AsyncIterator[bytes] | None = None
        self._inflate: Inflater | None = None
        self._events: deque[SSEEvent] = deque()
        self._socket: Any = None  # the connection's socket, shut down when the abort signal fires
        self._unwatch: Callable[[], None] | None = None
        self._done = False
        self._closed = False
        self.aborted = False
        self.response: httpx.Response | None = None

    @property
    def status_code(self) -> int | None:
        """The HTTP status, or ``None`` without a response."""
        return None if self.response is None else self.response.status_code

    @property
    def headers(self) -> httpx.Headers:
        """The response headers (empty without a response)."""
        return httpx.Headers() if self.response is None else self.response.headers

    @property
    def request_id(self) -> str | None:
        """The provider's request id header, if any (:func:`request_id_from`)."""
        return request_id_from(self.headers)

    async def __aenter__(self) -> SSEStream:
        request = self._request
        if isinstance(request.stream, httpx.ByteStream):
            # httpx iterates an in-memory body through an async generator; a send that fails
            # half-way (a dead keep-alive connection) leaves that generator unfinished, and trio
            # reports it as a leak. A plain iterator has nothing to finalise.
            request.stream = _BodyBytes(request.content)
        try:
            result = await race(self._abort, lambda: self._client.send(request, stream=True))
        except httpx.HTTPError as exc:
            raise error_from_exception(exc, provider=self._provider) from exc
        if isinstance(result, Aborted):
            self._abort_now()
            return self
        self.response = response = result
        try:
            # the transport's byte stream itself: ``aiter_raw`` adds a generator, a chunker list
            # and byte counting per read, none of which this stream uses (it decodes and closes)
            # (an async client's response always has an async byte stream)
            self._raw = cast("httpx.AsyncByteStream", response.stream).__aiter__()
            if not 200 <= response.status_code <= 299:
                body = await self._read_some(MAX_ERROR_BODY)
                if not self.aborted:
                    raise error_from_response(
                        response.status_code,
                        response.headers,
                        body,
                        provider=self._provider,
                        classifier=self._classifier,
                    )
            elif _media_type(response.headers.get("content-type", "")) != "text/event-stream":
                body_text = parse_error_body(await self._read_some(2048))[1]
                if not self.aborted:
                    content_type = response.headers.get("content-type") or "no content type"
                    raise LlmError(
                        "PROTOCOL",
                        f"expected a text/event-stream response, got {content_type!r}"
                        + (f": {snippet(body_text)}" if body_text else ""),
                        status=response.status_code,
                        provider=self._provider,
                        request_id=request_id_from(response.headers),
                    )
            else:
                self._inflate = Inflater.for_encoding(response.headers.get("content-encoding", ""))
                if self._abort is not None:
                    self._watch(self._abort, response)
        except LlmError as exc:
            if exc.provider is None:
                exc.provider = self._provider
            await self.aclose()
            raise
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> SSEStream:
        return self

    def _watch(self, abort: AbortSignal, response: httpx.Response) -> None:
        """Make the abort signal end pending reads by shutting the connection's socket down,
        instead of racing every read against it (a task and a subscription per read). Without
        a socket to reach (a transport that exposes none) every read is raced instead."""
        network = response.extensions.get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if not callable(getattr(sock, "shutdown", None)):  # a socket.socket, or trio's socket
            return
        unwatch = abort._subscribe(self._shut_down)
        if unwatch is None:  # fired since the request was sent
            self._abort_now()
            return
        self._socket = sock
        self._unwatch = unwatch

    def _shut_down(self) -> None:
        """The abort signal fired (run on the event loop): wake a pending read with end of file.
        The connection is not reused: httpcore sees the body cut short and closes it."""
        if not self._done and self._socket is not None:
            with contextlib.suppress(OSError):  # already closed by the peer or by us
                self._socket.shutdown(socket.SHUT_RDWR)

    async def __anext__(self) -> SSEEvent:
        events = self._events
        abort = self._abort
        while not events:
            if self._done or self._raw is None:
                raise StopAsyncIteration
            watched = self._socket is not None
            if watched and abort is not None and abort.fired:  # fired between two reads
                self._abort_now()
                raise StopAsyncIteration
            try:
                chunk: bytes | Aborted
                if abort is None or watched:  # no race to run: one coroutine less per read
                    chunk = await self._raw.__anext__()
                else:
                    chunk = await race(abort, self._raw.__anext__)
            except StopAsyncIteration:
                if watched and abort is not None and abort.fired:  # the shut-down socket's end of file
                    self._abort_now()
                    raise
                self._done = True
                events.extend(self._decode(b"", final=True))
                if not events:
                    raise
                break
            except httpx.HTTPError as exc:
                if watched and abort is not None and abort.fired:  # the body cut short by the abort
                    self._abort_now()
                    raise StopAsyncIteration from None
                self._done = True
                raise error_from_exception(exc, provider=self._provider) from exc
            if isinstance(chunk, Aborted):
                self._abort_now()
                raise StopAsyncIteration
            decoded = self._decode(chunk, final=False)
            if len(decoded) == 1:  # the usual read: one whole event, no queue needed
                return decoded[0]
            events.extend(decoded)
        return events.popleft()

    def _decode(self, data: bytes, *, final: bool) -> list[SSEEvent]:
        """The events ``data`` completes (and at the end, the one the end cut short)."""
        try:
            if self._inflate is not None:
                data = self._inflate.decode(data, final=final)
            decoded = self._decoder.feed(data) if data else []
            if final:
                last = self._decoder.close()
                if last is not None:
                    decoded.append(last)
            return decoded
        except LlmError as exc:  # oversize event or corrupt compressed body
            self._done = True
            exc.provider = self._provider
            raise

    async def _read_some(self, limit: int) -> bytes:
        """Read up to ``limit`` bytes of the body (raced against abort) for an error message.

        The body is decompressed when possible; otherwise the raw bytes are kept (it only
        feeds a message).
        """
        assert self._raw is not None
        parts: list[bytes] = []
        size = 0
        while size < limit:
            try:
                chunk = await race(self._abort, self._raw.__anext__)
            except StopAsyncIteration:
                break
            except httpx.HTTPError:  # the status already explains the failure; keep what arrived
                break
            if isinstance(chunk, Aborted):
                self._abort_now()
                break
            parts.append(chunk)
            size += len(chunk)
        body = b"".join(parts)
        try:
            inflate = Inflater.for_encoding(self.headers.get("content-encoding", ""))
            if inflate is not None:
                body = inflate.decode(body, final=True)
        except LlmError:  # unsupported or corrupt encoding: show the raw bytes instead
            pass
        return body[:limit]

    def _abort_now(self) -> None:
        self.aborted = True
        self._done = True

    async def aclose(self) -> None:
        """Close the response (shielded, bounded by ``close_timeout``). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._done = True
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._raw is not None and self.response is not None and body_received(self.response):
            # the whole body has arrived (the aiohttp transport): finishing reads buffered bytes
            # and closing does no I/O, so nothing can wait and no bounded, shielded scope is needed
            await finish_generator(cast("AsyncGenerator[bytes, None]", self._raw), received=True)
            await self.response.aclose()
            return
        with anyio.move_on_after(self._close_timeout, shield=True):
            if self._raw is not None:
                await finish_generator(cast("AsyncGenerator[bytes, None]", self._raw))
            if self.response is not None:
                await self.response.aclose()


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()
