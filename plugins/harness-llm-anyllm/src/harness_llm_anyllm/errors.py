"""Classifying any-llm's exceptions into harness's stable error codes, without leaking the key.

any-llm (created with ``unified_exceptions=True``) raises ``AnyLLMError`` subclasses carrying the
provider SDK's exception (``original_exception``), the HTTP status, the body's error ``type`` /
``code`` and, for rate limits, ``Retry-After`` (``any_llm/exceptions.py``,
``any_llm/utils/exception_handler.py``). :func:`error_from_library` maps them:

- an error inside a 200 stream: the body's ``type`` (``overloaded_error`` → OVERLOADED), else
  PROTOCOL (a chunk the SDK could not read);
- with an error status: the body's ``type``/``code`` where it says more than the status
  (``insufficient_quota`` → QUOTA, ``context_length_exceeded`` → CONTEXT_LENGTH …), else the
  status (429 RATE_LIMITED, 529 OVERLOADED …; ``harness_core.http.code_for_status``);
- without one: the transport exception underneath (an ``httpx`` timeout → TIMEOUT, a reset or
  cut body → NETWORK), else the library's class (``RateLimitError`` → RATE_LIMITED …);
- ``UnsupportedParameterError``, ``NotImplementedError`` and an SDK's "unexpected keyword
  argument" → UNSUPPORTED naming the option; a missing key or provider extra → CONFIG;
- ``retry_after`` from ``Retry-After`` / ``retry-after-ms``, ``request_id`` from the SDK
  exception or the ``x-request-id`` / ``request-id`` header;
- pydantic's ``ValidationError``: a chunk the library could not read → PROTOCOL (any-llm 1.40
  cannot read tool-call deltas without ``index``, which Gemini's OpenAI endpoint sends);
- anything else → INTERNAL, with its traceback logged.

Provider SDKs echo keys in messages ("Incorrect API key provided: sk-…abcd"): :func:`scrub`
masks the key and any token that shows a piece of it before a message leaves this module.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Mapping
from typing import Final

import httpx

from harness_core import MASK, ErrorCode, LlmError, Redactor
from harness_core.http import (
    ErrorDetails,
    code_for_provider_type,
    code_for_status,
    describe_error_body,
    error_from_exception,
    parse_error_body,
    parse_retry_after,
    request_id_from,
)
from harness_llm_openai.errors import refine_code

__all__ = ["error_from_library", "scrub"]

logger = logging.getLogger("harness_llm_anyllm")

_BY_CLASS: Final[dict[str, ErrorCode]] = {
    "RateLimitError": "RATE_LIMITED",
    "AuthenticationError": "AUTH",
    "ContextLengthExceededError": "CONTEXT_LENGTH",
    "ContentFilterError": "CONTENT_FILTER",
    "ModelNotFoundError": "NOT_FOUND",
    "InvalidRequestError": "BAD_REQUEST",
    "InsufficientFundsError": "QUOTA",
    "UpstreamProviderError": "SERVER",
    "GatewayTimeoutError": "TIMEOUT",
    "ProviderError": "SERVER",
}
"""any-llm's exception classes (by name: the module is loaded lazily) when no status says more."""

_REFINED_BY_CLASS: Final[dict[str, ErrorCode]] = {
    "ContextLengthExceededError": "CONTEXT_LENGTH",
    "ContentFilterError": "CONTENT_FILTER",
}
"""Classes that refine a generic 400 (any-llm read the message; OpenAI sends 400 for both)."""

_UNEXPECTED_KEYWORD: Final = re.compile(r"unexpected keyword argument '([^']+)'")
_TOKEN: Final = re.compile(r"[^\s'\"`,;()\[\]{}<>]+")
_PIECE: Final = 4
"""Characters of the key a token must show at its start or end to be masked."""


def scrub(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` in every representation harness's
    :class:`~harness_core.secret.Redactor` knows (escaped, JSON, URL- and base64-encoded), and
    every token showing its first or last four characters (an SDK's "sk-…abcd" echo), replaced by
    the mask. Keys shorter than 8 characters are only masked whole."""
    if not secret:
        return text
    redactor = Redactor()
    redactor.add(secret)
    text = redactor(text)
    if len(secret) < 2 * _PIECE:
        return text
    head, tail = secret[:_PIECE], secret[-_PIECE:]

    def mask(match: re.Match[str]) -> str:
        token = match.group(0)
        return MASK if token.startswith(head) or token.endswith(tail) else token

    return _TOKEN.sub(mask, text)


def _headers_of(exc: BaseException | None) -> Mapping[str, str]:
    """Response headers of an SDK exception (``headers``, ``response.headers`` or Mistral's
    ``raw_response.headers``), or none."""
    for holder in (exc, getattr(exc, "response", None), getattr(exc, "raw_response", None)):
        headers = getattr(holder, "headers", None)
        if isinstance(headers, Mapping):
            return headers
    return {}


def _body_details(exc: BaseException | None) -> ErrorDetails:
    """Type, code and message of an SDK exception's error body (a dict or Mistral's raw text)."""
    body = getattr(exc, "body", None)
    if isinstance(body, str):
        body, _ = parse_error_body(body.encode())
    return describe_error_body(body if isinstance(body, dict) else None)


def _transport_error(exc: BaseException | None, provider: str, secret: str | None) -> LlmError | None:
    """The transport failure at the root of ``exc`` (through causes and contexts), if any:
    an httpx (or Mistral's httpx2 fork) timeout → TIMEOUT, a corrupt body → PROTOCOL, any other
    transport error (reset, refused, cut body) → NETWORK."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, httpx.HTTPError):
            mapped = error_from_exception(exc, provider=provider)
            return LlmError(mapped.code, scrub(mapped.message, secret), provider=provider)
        if type(exc).__module__.split(".")[0] == "httpx2" or isinstance(exc, OSError):
            name = type(exc).__name__
            code: ErrorCode = "TIMEOUT" if "Timeout" in name else "PROTOCOL" if "Decoding" in name else "NETWORK"
            return LlmError(code, scrub(f"{name}: {exc}", secret), provider=provider)
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def error_from_library(
    exc: BaseException,
    *,
    provider: str = "anyllm",
    library_provider: str,
    secret: str | None = None,
    reading: bool = False,
) -> LlmError:
    """Map an exception raised by any-llm (or its provider SDK) to an :class:`LlmError`.

    Args:
        exc: what the library raised.
        provider: the plugin name stamped on the error.
        library_provider: the any-llm provider name, named in messages.
        secret: the configured key, masked out of every message.
        reading: the stream was open (a pydantic ``ValidationError`` is then a chunk the
            library could not read: ``PROTOCOL``; before, an argument it refused: ``BAD_REQUEST``).

    Never raises; an exception it cannot classify becomes ``INTERNAL`` and is logged with its
    traceback (the log record's message is scrubbed the same way).
    """
    if isinstance(exc, LlmError):
        return exc
    name = type(exc).__name__
    original = getattr(exc, "original_exception", None)
    message = scrub(str(getattr(exc, "message", None) or exc), secret)
    where = f"any-llm provider {library_provider!r}"
    if name == "UnsupportedParameterError":
        return LlmError("UNSUPPORTED", f"{where}: {message}", provider=provider)
    if isinstance(exc, NotImplementedError):
        return LlmError("UNSUPPORTED", f"{where}: {message or 'not implemented'}", provider=provider)
    if name == "MissingApiKeyError":
        return LlmError("CONFIG", f"{where}: no api_key configured: {message}", provider=provider)
    if isinstance(exc, ImportError):
        return LlmError(
            "CONFIG",
            f"{where} needs its SDK: pip install 'any-llm-sdk[{library_provider}]' ({message})",
            provider=provider,
        )
    if name == "ValidationError" and type(exc).__module__.startswith("pydantic"):
        if reading:
            return LlmError(
                "PROTOCOL", f"{where}: the library could not read a stream chunk: {message}", provider=provider
            )
        return LlmError("BAD_REQUEST", f"{where}: the library refused an argument: {message}", provider=provider)
    unexpected = _UNEXPECTED_KEYWORD.search(message)
    if unexpected is not None:
        return LlmError("UNSUPPORTED", f"option {unexpected.group(1)!r} is not supported by {where}", provider=provider)
    if name not in _BY_CLASS:
        transport = _transport_error(exc, provider, secret)
        if transport is not None:
            return transport
        trace = scrub("".join(traceback.format_exception(exc)), secret)  # the key may sit in any frame's text
        logger.error("unexpected error from %s:\n%s", where, trace)
        return LlmError("INTERNAL", f"{where}: {name}: {message}", provider=provider)
    status: int | None = getattr(exc, "status_code", None)
    details = _body_details(original)
    error_type: str | None = getattr(exc, "error_type", None) or details.provider_type
    error_code: str | None = getattr(exc, "code", None) or details.provider_code
    headers = _headers_of(original)
    code: ErrorCode
    if status is not None and 200 <= status <= 299:
        # an error inside a 200 stream (Anthropic's `event: error`), or a body the SDK could not read
        code = refine_code(error_type, error_code, message) or code_for_provider_type(error_type) or "PROTOCOL"
        status = None
    elif status is not None and 400 <= status <= 599:
        code = refine_code(error_type, error_code, message) or code_for_status(status)
        if code == "BAD_REQUEST":
            code = _REFINED_BY_CLASS.get(name, code)
    else:
        transport = _transport_error(original, provider, secret)
        if transport is not None and name == "ProviderError":
            return transport
        code = refine_code(error_type, error_code, message) or _BY_CLASS[name]
        status = None
    retry_after = parse_retry_after(headers)
    raw_retry = getattr(exc, "retry_after", None)
    if retry_after is None and isinstance(raw_retry, str):
        retry_after = parse_retry_after({"retry-after": raw_retry})
    request_id = getattr(original, "request_id", None)
    return LlmError(
        code,
        message,
        status=status,
        retry_after=retry_after,
        provider=provider,
        provider_type=error_type,
        provider_code=error_code,
        request_id=request_id if isinstance(request_id, str) else request_id_from(headers),
    )
