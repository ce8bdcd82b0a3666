"""Mapping provider failures to :class:`~harness_core.errors.LlmError`: HTTP statuses, error
bodies (JSON, array-wrapped, HTML, empty), in-band error payloads, ``Retry-After`` and request ids,
httpx exceptions.

Wire references: RFC 9110 §10.2.3 (``Retry-After``: delay-seconds or HTTP-date), OpenAI's
``retry-after-ms`` header (https://platform.openai.com/docs/guides/rate-limits).
"""

from __future__ import annotations

import datetime
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from harness_core._lazy import moved_names
from harness_core.errors import ErrorCode, LlmError
from harness_core.errors import truncate as _truncate

if TYPE_CHECKING:  # pragma: no cover - typing only; httpx is imported where an exception is mapped
    import httpx

__all__ = [
    "MAX_ERROR_BODY",
    "MAX_MESSAGE",
    "ErrorClassifier",
    "ErrorDetails",
    "code_for_provider_type",
    "code_for_status",
    "describe_error_body",
    "error_from_exception",
    "error_from_payload",
    "error_from_response",
    "parse_error_body",
    "parse_retry_after",
    "request_id_from",
]

MAX_MESSAGE: Final = 1000
"""Provider messages are truncated to this many characters."""

MAX_ERROR_BODY: Final = 64 * 1024
"""At most this many bytes of an error body are read."""


_REQUEST_ID_HEADERS: Final = ("x-request-id", "request-id", "x-generation-id")


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
    retry_after: float | None = None
    """Seconds to wait, taken from the body by a classifier (Gemini's ``RetryInfo.retryDelay``);
    a ``Retry-After`` header wins over it."""


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
    import email.utils  # ~8 ms of import (calendar): only for the rare HTTP-date form

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
    return obj, _truncate(_SPACES.sub(" ", text).strip(), MAX_MESSAGE)


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
    it pointed and that it was not followed. ``retry_after`` (:func:`parse_retry_after`, else
    the classifier's) and ``request_id`` (:func:`request_id_from`) come from the headers.
    Never raises.
    """
    obj, snippet = parse_error_body(body)
    generic, refined = _refine(status, obj, classifier)
    from http import HTTPStatus  # imported on the first error, not with every HTTP adapter

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
    retry_after = parse_retry_after(headers)
    return LlmError(
        refined.code or code_for_status(status),
        _truncate(message, MAX_MESSAGE),
        status=status,
        retry_after=refined.retry_after if retry_after is None else retry_after,
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
    retry_after = parse_retry_after(headers)
    return LlmError(
        code or default_code,
        _truncate(message, MAX_MESSAGE),
        status=status,
        retry_after=refined.retry_after if retry_after is None else retry_after,
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
    import httpx  # already imported by whoever raised ``exc``: this module stays cheap to import

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


__getattr__ = moved_names(__name__, {"truncate": "harness_core.errors"})
