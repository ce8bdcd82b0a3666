"""HTTP transport shared by the HTTP adapters: error mapping and an abortable SSE stream.

- :func:`code_for_status`, :func:`parse_retry_after`, :func:`request_id_from`,
  :func:`error_from_response`: turn a non-2xx response (JSON object, array-wrapped
  ``[{"error": …}]``, HTML, empty or non-UTF-8 body) into an :class:`~harness_core.errors.LlmError`
  with status, ``retry_after``, request id and a truncated provider message (PROTOCOLS §6).
  Providers refine the code through an :data:`ErrorClassifier`.
- :func:`error_from_payload`: the same for an in-band error object received with HTTP 200
  (``data: {"error": …}``, Anthropic ``event: error``).
- :func:`open_sse_stream`: send a streaming request with an ``httpx.AsyncClient`` and iterate
  :class:`~harness_core.sse.SSEEvent` objects, every read raced against the abort signal,
  response closed on exit (shielded and bounded, also on cancellation).
- :func:`make_client`: an ``httpx.AsyncClient`` configured the same way for every adapter.

Wire references: RFC 9110 §10.2.3 (``Retry-After``: delay-seconds or HTTP-date), OpenAI's
``retry-after-ms`` header (https://platform.openai.com/docs/guides/rate-limits), the WHATWG
event-stream format (``text/event-stream``, see :mod:`harness_core.sse`).
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import json
import math
import re
import time
import zlib
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from types import TracebackType
from typing import Any, Final, cast

import anyio
import httpx

from harness_core.abort import Aborted, AbortSignal, race
from harness_core.errors import ErrorCode, LlmError
from harness_core.secret import secret_problem
from harness_core.sse import DEFAULT_MAX_EVENT_SIZE, SSEDecoder, SSEEvent

__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_CLOSE_TIMEOUT",
    "ErrorClassifier",
    "ErrorDetails",
    "SSEStream",
    "check_headers",
    "code_for_provider_type",
    "code_for_status",
    "describe_error_body",
    "error_from_exception",
    "error_from_payload",
    "error_from_response",
    "make_client",
    "open_sse_stream",
    "parse_error_body",
    "parse_retry_after",
    "request_id_from",
    "split_base_url",
]

MAX_MESSAGE: Final = 1000
"""Provider messages are truncated to this many characters."""

MAX_ERROR_BODY: Final = 64 * 1024
"""At most this many bytes of an error body are read."""

DEFAULT_CLOSE_TIMEOUT: Final = 5.0
"""Seconds the shielded close of a response may take before it is abandoned."""

_REQUEST_ID_HEADERS: Final = ("x-request-id", "request-id", "x-generation-id")


# ---------------------------------------------------------------------- classification


@dataclass(frozen=True)
class ErrorDetails:
    """Fields describing a provider error; every one optional (``None`` = not known / keep).

    Returned by :func:`describe_error_body` (generic extraction) and by an
    :data:`ErrorClassifier` (provider-specific refinement, whose non-``None`` fields win).
    """

    code: ErrorCode | None = None
    message: str | None = None
    provider_type: str | None = None
    provider_code: str | None = None


ErrorClassifier = Callable[[int | None, "dict[str, Any] | None"], "ErrorDetails | None"]
"""``classifier(status, parsed_body) -> ErrorDetails | None``.

``status`` is the HTTP status (``None`` for an in-band error received with 200); ``parsed_body``
is the JSON error object (already unwrapped from an array) or ``None`` when the body was not a
JSON object. Return refined fields, e.g. ``ErrorDetails(code="QUOTA")`` for OpenAI's
``insufficient_quota``, or ``None`` to keep the generic mapping. It must not raise.
"""


def code_for_status(status: int) -> ErrorCode:
    """Map an HTTP status of a failed request to an error code (PROTOCOLS §6).

    400/422 ``BAD_REQUEST``, 401 ``AUTH``, 402 ``QUOTA``, 403 ``PERMISSION``, 404 ``NOT_FOUND``,
    408 ``TIMEOUT``, 409 ``SERVER`` (a conflict the provider asks to retry), 413
    ``CONTEXT_LENGTH``, 429 ``RATE_LIMITED``, 503/529 ``OVERLOADED``, other 5xx ``SERVER``, other
    4xx ``BAD_REQUEST``; anything else (1xx, 2xx, 3xx) is ``PROTOCOL`` (not a status a
    streaming request should end with).
    """
    code = _STATUS_CODES.get(status)
    if code is not None:
        return code
    if 500 <= status <= 599:
        return "SERVER"
    if 400 <= status <= 499:
        return "BAD_REQUEST"
    return "PROTOCOL"


_STATUS_CODES: Final[dict[int, ErrorCode]] = {
    400: "BAD_REQUEST",
    401: "AUTH",
    402: "QUOTA",
    403: "PERMISSION",
    404: "NOT_FOUND",
    408: "TIMEOUT",
    409: "SERVER",
    413: "CONTEXT_LENGTH",
    422: "BAD_REQUEST",
    429: "RATE_LIMITED",
    503: "OVERLOADED",
    529: "OVERLOADED",
}

_TYPE_CODES: Final[dict[str, ErrorCode]] = {
    "rate_limit_error": "RATE_LIMITED",
    "rate_limit_exceeded": "RATE_LIMITED",
    "rate_limited": "RATE_LIMITED",
    "resource_exhausted": "RATE_LIMITED",
    "too_many_requests": "RATE_LIMITED",
    "overloaded_error": "OVERLOADED",
    "overloaded": "OVERLOADED",
    "unavailable": "OVERLOADED",
    "service_unavailable": "OVERLOADED",
    "insufficient_system_resource": "OVERLOADED",
    "insufficient_quota": "QUOTA",
    "billing_error": "QUOTA",
    "payment_required": "QUOTA",
    "context_length_exceeded": "CONTEXT_LENGTH",
    "request_too_large": "CONTEXT_LENGTH",
    "authentication_error": "AUTH",
    "invalid_api_key": "AUTH",
    "unauthenticated": "AUTH",
    "permission_error": "PERMISSION",
    "permission_denied": "PERMISSION",
    "not_found_error": "NOT_FOUND",
    "model_not_found": "NOT_FOUND",
    "not_found": "NOT_FOUND",
    "invalid_request_error": "BAD_REQUEST",
    "invalid_argument": "BAD_REQUEST",
    "bad_request": "BAD_REQUEST",
    "api_error": "SERVER",
    "server_error": "SERVER",
    "internal_error": "SERVER",
    "internal": "SERVER",
    "deadline_exceeded": "SERVER",
    "timeout_error": "TIMEOUT",
}


def code_for_provider_type(value: str | None) -> ErrorCode | None:
    """Map a well-known provider error type/code string to an error code, or ``None``.

    Case-insensitive; covers OpenAI (``insufficient_quota``, ``context_length_exceeded``,
    ``server_error`` …), Anthropic (``overloaded_error``, ``rate_limit_error`` …), Gemini
    statuses (``RESOURCE_EXHAUSTED``, ``UNAVAILABLE`` …) and DeepSeek
    (``insufficient_system_resource``). Used for in-band errors, which have no useful status.
    """
    if not value:
        return None
    return _TYPE_CODES.get(value.lower())


def _lowered(headers: Mapping[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait before retrying, from response headers, or ``None``.

    ``retry-after-ms`` (milliseconds, OpenAI) wins over ``retry-after``, which is either
    delay-seconds (a float is accepted) or an HTTP-date (RFC 9110 §10.2.3; the delay is measured
    from ``now``, a Unix timestamp defaulting to the current time, and never negative). Malformed,
    negative or non-finite values are ignored. Header names are case-insensitive.
    """
    lowered = _lowered(headers)
    millis = _non_negative_float(lowered.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _non_negative_float(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # asctime dates and "-0000" carry no zone: HTTP dates are GMT
        when = when.replace(tzinfo=datetime.UTC)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _non_negative_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def request_id_from(headers: Mapping[str, str]) -> str | None:
    """The provider's request id (``x-request-id``, ``request-id`` or ``x-generation-id``)."""
    lowered = _lowered(headers)
    for name in _REQUEST_ID_HEADERS:
        value = lowered.get(name)
        if value:
            return value
    return None


def _truncate(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"<[^>]*>")
_SPACES = re.compile(r"\s+")


def parse_error_body(body: bytes) -> tuple[dict[str, Any] | None, str]:
    """Parse an error body tolerantly: ``(json_object_or_None, text_snippet)``.

    A JSON object is returned as is; a JSON array returns its first object (array-wrapped
    ``[{"error": …}]`` bodies); any other body gives ``None``. The snippet is the body as text
    (UTF-8 with replacement), whitespace collapsed and truncated to 1,000 characters; for HTML it
    is the ``<title>`` or the text without tags. Never raises.
    """
    try:
        parsed: Any = json.loads(body)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError: not JSON
        parsed = None
    obj: dict[str, Any] | None = None
    if isinstance(parsed, dict):
        obj = parsed
    elif isinstance(parsed, list):
        obj = next((item for item in parsed if isinstance(item, dict)), None)
    text = body.decode("utf-8", "replace").strip()
    if text.startswith("<"):
        title = _TITLE.search(text)
        text = title.group(1) if title else _TAGS.sub(" ", text)
    return obj, _truncate(_SPACES.sub(" ", text).strip())


def _as_str(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    return None


def describe_error_body(obj: dict[str, Any] | None) -> ErrorDetails:
    """Generic extraction of message / type / code from an error object.

    Understands ``{"error": {"message", "type", "code"}}`` (OpenAI, Anthropic and most
    compatible servers), ``{"error": {"message", "status", "code"}}`` (Gemini: ``status`` is
    the type), ``{"error": "text"}``, and top-level ``message`` / ``type`` / ``code`` /
    ``detail`` (Mistral, FastAPI servers). ``code`` is never set: classification is the job of
    the caller.
    """
    if obj is None:
        return ErrorDetails()
    error = obj.get("error")
    if isinstance(error, str):
        return ErrorDetails(message=error or None, provider_type=_as_str(obj.get("type")))
    source = error if isinstance(error, dict) else obj
    message = _as_str(source.get("message")) or _as_str(source.get("detail")) or _as_str(source.get("msg"))
    return ErrorDetails(
        message=message,
        provider_type=_as_str(source.get("type")) or _as_str(source.get("status")),
        provider_code=_as_str(source.get("code")),
    )


def _refine(
    status: int | None, obj: dict[str, Any] | None, classifier: ErrorClassifier | None
) -> tuple[ErrorDetails, ErrorDetails]:
    generic = describe_error_body(obj)
    refined = classifier(status, obj) if classifier is not None else None
    return generic, refined or ErrorDetails()


def error_from_response(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    provider: str | None = None,
    classifier: ErrorClassifier | None = None,
) -> LlmError:
    """Build the :class:`LlmError` for a non-2xx HTTP response.

    The code comes from the classifier when it returns one, else from :func:`code_for_status`
    (the generic type table is *not* applied to HTTP errors: e.g. OpenAI answers a bad key with
    401 and type ``invalid_request_error``). The message is the provider's message, else a body
    snippet, else the status phrase, truncated to 1,000 characters; a redirect (3xx) says where
    it pointed and that it was not followed. ``retry_after``
    (:func:`parse_retry_after`) and ``request_id`` (:func:`request_id_from`) come from the
    headers. Never raises.
    """
    obj, snippet = parse_error_body(body)
    generic, refined = _refine(status, obj, classifier)
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "error"
    message = refined.message or generic.message or snippet or f"HTTP {status} {phrase}"
    if 300 <= status <= 399:
        location = _lowered(headers).get("location")
        target = f"to {location!r}" if location else "without a Location"
        message = (
            f"HTTP {status} {phrase}: the server redirected {target}; redirects are not followed "
            "(point base_url at the final address)"
        )
    return LlmError(
        refined.code or code_for_status(status),
        _truncate(message),
        status=status,
        retry_after=parse_retry_after(headers),
        provider=provider,
        provider_type=refined.provider_type or generic.provider_type,
        provider_code=refined.provider_code or generic.provider_code,
        request_id=request_id_from(headers),
    )


def error_from_payload(
    payload: Any,
    *,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
    provider: str | None = None,
    classifier: ErrorClassifier | None = None,
    default_code: ErrorCode = "SERVER",
) -> LlmError:
    """Build the :class:`LlmError` for an in-band error object (received with HTTP 200).

    ``payload`` is the decoded JSON (``{"error": {...}}``, ``{"type": "error", "error": {...}}``,
    a list wrapping one, or a plain string). The code is, in order: the classifier's, the generic
    :func:`code_for_provider_type` of the provider code then type, :func:`code_for_status` of a
    non-2xx ``status``, else ``default_code``. Never classified by the HTTP 200. Never raises.
    """
    if isinstance(payload, list):
        payload = next((item for item in payload if isinstance(item, dict)), None)
    obj: dict[str, Any] | None
    if isinstance(payload, dict):
        obj = payload
    elif isinstance(payload, str):
        obj = {"error": payload}
    else:
        obj = None
    generic, refined = _refine(status, obj, classifier)
    provider_type = refined.provider_type or generic.provider_type
    provider_code = refined.provider_code or generic.provider_code
    code = refined.code or code_for_provider_type(provider_code) or code_for_provider_type(provider_type)
    if code is None and status is not None and not 200 <= status <= 299:
        code = code_for_status(status)
    message = refined.message or generic.message
    if message is None:
        message = json.dumps(payload, ensure_ascii=False) if payload else "provider reported an error without a message"
    headers = headers or {}
    return LlmError(
        code or default_code,
        _truncate(message),
        status=status,
        retry_after=parse_retry_after(headers),
        provider=provider,
        provider_type=provider_type,
        provider_code=provider_code,
        request_id=request_id_from(headers),
    )


def _request_of(exc: httpx.HTTPError) -> httpx.Request | None:
    """The request an httpx exception is about, or ``None`` (``.request`` raises when unset)."""
    try:
        return exc.request
    except (RuntimeError, AttributeError):  # StreamError subclasses carry no request at all
        return None


def error_from_exception(exc: httpx.HTTPError, *, provider: str | None = None) -> LlmError:
    """Map an httpx exception to an :class:`LlmError`.

    ``httpx.TimeoutException`` (connect, read, write, pool) → ``TIMEOUT``;
    ``httpx.DecodingError`` (a corrupt compressed body) → ``PROTOCOL``; any other
    ``httpx.RequestError`` (connect error, read error, reset, incomplete chunked body) →
    ``NETWORK``; anything else (``httpx.StreamError`` …, a bug in the caller) → ``INTERNAL``.
    The message names the exception type (asyncio's read errors often have no text), the
    request's method, host and path, and for a timeout the limit that ran out (seconds), e.g.
    ``ReadTimeout: no progress for 600 s (read timeout) on POST https://api.openai.com/v1/chat/completions``.
    The query string is left out (some providers put keys there).
    """
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    request = _request_of(exc)
    if isinstance(exc, httpx.TimeoutException) and request is not None:
        kind = {"ConnectTimeout": "connect", "ReadTimeout": "read", "WriteTimeout": "write", "PoolTimeout": "pool"}
        phase = kind.get(type(exc).__name__)
        limit = request.extensions.get("timeout", {}).get(phase) if phase else None
        if limit is not None:
            what = "no free connection" if phase == "pool" else "no progress"
            detail = f"{type(exc).__name__}: {what} for {limit:g} s ({phase} timeout)"
    if request is not None:
        url = request.url  # no userinfo, no query: either may hold a key
        port = f":{url.port}" if url.port is not None else ""
        detail += f" on {request.method} {url.scheme}://{url.host}{port}{url.path}"
    code: ErrorCode
    if isinstance(exc, httpx.TimeoutException):
        code = "TIMEOUT"
    elif isinstance(exc, httpx.DecodingError):
        code = "PROTOCOL"
    elif isinstance(exc, httpx.RequestError):
        code = "NETWORK"
    else:
        code = "INTERNAL"
    return LlmError(code, detail, provider=provider)


# ---------------------------------------------------------------------- client


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


# ---------------------------------------------------------------------- streaming


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

    Iteration yields :class:`~harness_core.sse.SSEEvent`; each read races ``abort`` and
    iteration simply ends (``events.aborted`` set) when it fires. A read failure raises
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
        self._inflate: _Inflater | None = None
        self._events: deque[SSEEvent] = deque()
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
            self._raw = response.aiter_raw()
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
                snippet = parse_error_body(await self._read_some(2048))[1]
                if not self.aborted:
                    content_type = response.headers.get("content-type") or "no content type"
                    raise LlmError(
                        "PROTOCOL",
                        f"expected a text/event-stream response, got {content_type!r}"
                        + (f": {_truncate(snippet, 200)}" if snippet else ""),
                        status=response.status_code,
                        provider=self._provider,
                        request_id=request_id_from(response.headers),
                    )
            else:
                self._inflate = _Inflater.for_encoding(response.headers.get("content-encoding", ""))
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

    async def __anext__(self) -> SSEEvent:
        events = self._events
        while not events:
            if self._done or self._raw is None:
                raise StopAsyncIteration
            try:
                chunk = await race(self._abort, self._raw.__anext__)
            except StopAsyncIteration:
                self._done = True
                self._decode(b"", final=True)
                if not events:
                    raise
                break
            except httpx.HTTPError as exc:
                self._done = True
                raise error_from_exception(exc, provider=self._provider) from exc
            if isinstance(chunk, Aborted):
                self._abort_now()
                raise StopAsyncIteration
            self._decode(chunk, final=False)
        return events.popleft()

    def _decode(self, data: bytes, *, final: bool) -> None:
        try:
            if self._inflate is not None:
                data = self._inflate.decode(data, final=final)
            if data:
                self._events.extend(self._decoder.feed(data))
            if final:
                last = self._decoder.close()
                if last is not None:
                    self._events.append(last)
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
            inflate = _Inflater.for_encoding(self.headers.get("content-encoding", ""))
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
        with anyio.move_on_after(self._close_timeout, shield=True):
            if self._raw is not None:
                await _finish_generator(cast("AsyncGenerator[bytes, None]", self._raw))
            if self.response is not None:
                await self.response.aclose()


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


class _Inflater:
    """Content-Encoding decoding (RFC 9110 §8.4.1) of ``gzip`` / ``deflate`` / ``identity``.

    httpx decodes inside ``aiter_bytes()``, a generator whose failure would strand the
    generators below it; decoding here keeps every generator under our control. Stacked codings
    are undone last-applied first. Corrupt data raises ``LlmError("PROTOCOL")``.
    """

    __slots__ = ("_steps",)

    def __init__(self, codings: list[str]) -> None:
        self._steps = [_InflateStep(coding) for coding in reversed(codings)]

    @classmethod
    def for_encoding(cls, header: str) -> _Inflater | None:
        """An inflater for a ``Content-Encoding`` header value, or ``None`` for identity."""
        codings = [c.strip().lower() for c in header.split(",") if c.strip().lower() not in ("", "identity")]
        if not codings:
            return None
        if any(c not in ("gzip", "x-gzip", "deflate") for c in codings):
            raise LlmError("PROTOCOL", f"unsupported content-encoding {header!r} (gzip and deflate are supported)")
        return cls(codings)

    def decode(self, data: bytes, *, final: bool = False) -> bytes:
        """Decode the next piece; ``final=True`` also flushes what the decompressors hold."""
        for step in self._steps:
            data = step.decode(data, final=final)
        return data


class _InflateStep:
    __slots__ = ("coding", "fresh", "state")

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.state = zlib.decompressobj(zlib.MAX_WBITS | 16 if coding != "deflate" else zlib.MAX_WBITS)
        self.fresh = True

    def decode(self, data: bytes, *, final: bool) -> bytes:
        try:
            out = self.state.decompress(data)
            if final:
                out += self.state.flush()
        except zlib.error as exc:
            if self.fresh and self.coding == "deflate":
                # some servers send raw deflate without the zlib wrapper (httpx tolerates it too)
                self.state = zlib.decompressobj(-zlib.MAX_WBITS)
                self.fresh = False
                return self.decode(data, final=final)
            raise LlmError("PROTOCOL", f"corrupt {self.coding}-encoded response body: {exc}") from exc
        self.fresh = self.fresh and not data
        return out


async def _finish_generator(iterator: AsyncGenerator[bytes, None]) -> None:
    """Finish httpx's chain of body generators without reading the network.

    ``aiter_raw()`` sits on a stack of nested async generators (httpx and httpcore). Closing
    only the outer one leaves the inner ones suspended; they are then finalised by the garbage
    collector, which trio reports as a ``ResourceWarning``. Resuming the chain inside an already
    cancelled scope instead makes the next network read raise the cancellation through every
    layer, so all of them finish (and httpcore closes the connection, which is not reusable
    mid-body). Bytes already buffered come out first and are discarded: we are closing. An
    exhausted iterator ends at once.
    """
    with anyio.CancelScope() as scope:
        scope.cancel()
        # StopAsyncIteration: already exhausted. HTTPError: the transport already failed.
        with contextlib.suppress(StopAsyncIteration, httpx.HTTPError):
            while True:
                await iterator.__anext__()
    await iterator.aclose()
