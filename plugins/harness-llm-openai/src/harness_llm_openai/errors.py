"""Classifying OpenAI-style error bodies into harness error codes.

Error bodies come in three shapes (PROTOCOLS §1.3, §1.4):

- OpenAI / Groq / Ollama / DeepSeek: ``{"error": {"message", "type", "param", "code"}}`` with a
  string ``type``/``code`` (https://platform.openai.com/docs/guides/error-codes);
- OpenRouter / vLLM: the same envelope with a numeric, HTTP-like ``code``
  (https://openrouter.ai/docs/api/reference/errors-and-debugging);
- Mistral / old vLLM: a top-level ``{"object": "error", "message", "type", "code"}``.

:func:`refine_code` picks the codes that the HTTP status alone cannot tell (a 429 that is a
spent quota, a 400 that is a context overflow); :func:`inband_code` classifies an error reported
inside a 200 stream, where the HTTP status says nothing.
"""

from __future__ import annotations

from typing import Any, Final

from harness_core import ErrorCode
from harness_core.http import ErrorDetails, code_for_provider_type, code_for_status, describe_error_body

__all__ = ["classify_http_error", "inband_code", "refine_code"]

_SPECIFIC: Final[dict[str, ErrorCode]] = {
    # spent quota / billing: retrying does not help
    "insufficient_quota": "QUOTA",
    "credit_balance_exhausted": "QUOTA",
    "project_spend_limit_exceeded": "QUOTA",
    "billing_hard_limit_reached": "QUOTA",
    "insufficient_balance": "QUOTA",
    # context overflow
    "context_length_exceeded": "CONTEXT_LENGTH",
    "string_above_max_length": "CONTEXT_LENGTH",
    # rate limits (OpenAI, Mistral, Anthropic-style gateways)
    "rate_limit_exceeded": "RATE_LIMITED",
    "rate_limited": "RATE_LIMITED",
    "rate_limit_error": "RATE_LIMITED",
    "tokens_exceeded": "RATE_LIMITED",
    # overload
    "overloaded_error": "OVERLOADED",
    "overloaded": "OVERLOADED",
    "server_overloaded": "OVERLOADED",
    "insufficient_system_resource": "OVERLOADED",
    "engine_overloaded": "OVERLOADED",
    # content filtering decided on the prompt
    "content_filter": "CONTENT_FILTER",
    "content_policy_violation": "CONTENT_FILTER",
    "invalid_prompt": "CONTENT_FILTER",  # Responses API: the prompt was flagged by the usage policies
}
"""Type/code strings whose meaning is finer than any HTTP status."""

_GENERIC: Final[dict[str, ErrorCode]] = {
    "invalid_function_call": "BAD_REQUEST",  # Mistral
    "badrequesterror": "BAD_REQUEST",  # vLLM exception names
    "internalservererror": "SERVER",
}
"""Type strings that merely restate a status class, beyond harness_core.http's generic table."""

_CONTEXT_PHRASES: Final = (
    "exceeds the available context size",  # llama.cpp
    "maximum context length",  # OpenAI, vLLM
    "context length exceeded",
    "context_length_exceeded",
)


def _keys(error_type: str | None, error_code: str | int | None) -> list[str]:
    keys = [error_type.lower()] if error_type else []
    if isinstance(error_code, str) and error_code:
        keys.append(error_code.lower())
    return keys


def refine_code(error_type: str | None, error_code: str | int | None, message: str | None) -> ErrorCode | None:
    """The code an error body implies beyond its HTTP status, or ``None`` to keep the status's.

    Looks at ``type`` and string ``code`` (``insufficient_quota`` → QUOTA,
    ``context_length_exceeded`` → CONTEXT_LENGTH, ``rate_limit_exceeded`` / ``rate_limited`` →
    RATE_LIMITED, ``insufficient_system_resource`` → OVERLOADED …) and the message (llama.cpp's
    "exceeds the available context size" → CONTEXT_LENGTH).
    """
    for key in _keys(error_type, error_code):
        code = _SPECIFIC.get(key)
        if code is not None:
            return code
    if message:
        lowered = message.lower()
        if any(phrase in lowered for phrase in _CONTEXT_PHRASES):
            return "CONTEXT_LENGTH"
    return None


def inband_code(error_type: str | None, error_code: str | int | None, message: str | None) -> ErrorCode:
    """Classify an error reported inside a 200 stream (never by the HTTP status).

    Order: :func:`refine_code`; a numeric ``code`` (OpenRouter, vLLM) mapped like an HTTP status;
    generic type strings (``server_error`` → SERVER, ``invalid_request_error`` → BAD_REQUEST …);
    otherwise SERVER (the provider failed while generating).
    """
    refined = refine_code(error_type, error_code, message)
    if refined is not None:
        return refined
    numeric = _as_status(error_code)
    if numeric is not None:
        return code_for_status(numeric)
    for key in _keys(error_type, error_code):
        code = _GENERIC.get(key) or code_for_provider_type(key)
        if code is not None:
            return code
    return "SERVER"


def classify_http_error(status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
    """The :data:`harness_core.http.ErrorClassifier` of OpenAI-style servers.

    Refines the generic status mapping with :func:`refine_code` (a 429 ``insufficient_quota`` is
    QUOTA, a 400 ``context_length_exceeded`` is CONTEXT_LENGTH, Mistral's top-level
    ``object: "error"`` body is read like the nested one). Returns ``None`` to keep the status's
    code. Never raises.
    """
    details = describe_error_body(body)
    code = refine_code(details.provider_type, details.provider_code, details.message)
    return ErrorDetails(code=code) if code is not None else None


def _as_status(error_code: str | int | None) -> int | None:
    """A numeric error code (``502`` or ``"502"``) in the HTTP status range, else ``None``."""
    if isinstance(error_code, int):
        value = error_code
    elif isinstance(error_code, str) and error_code.isascii() and error_code.isdigit():
        value = int(error_code)
    else:
        return None
    return value if 400 <= value <= 599 else None
