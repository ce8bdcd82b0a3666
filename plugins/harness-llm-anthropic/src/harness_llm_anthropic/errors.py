"""Anthropic error classification: provider error ``type`` → stable :data:`ErrorCode`.

Anthropic reports errors as ``{"type": "error", "error": {"type": ..., "message": ...}}``, both
as non-2xx HTTP bodies and in-band as an SSE ``error`` event after HTTP 200
(https://docs.anthropic.com/en/api/errors; ``shared/wire/PROTOCOLS.md`` §2.3). In-band errors
are classified by their ``type`` alone, never by the HTTP status (which is 200).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from harness_core import ErrorCode, LlmError
from harness_llm_anthropic.wire import WireError

if TYPE_CHECKING:  # pragma: no cover - typing only (harness_core.http imports httpx)
    from harness_core.http import ErrorDetails

__all__ = ["PROVIDER", "classifier", "classify", "inband_error"]

PROVIDER: Final = "anthropic"
"""The plugin name recorded on every :class:`LlmError` this adapter raises."""

_BY_TYPE: Final[dict[str, ErrorCode]] = {
    "invalid_request_error": "BAD_REQUEST",
    "authentication_error": "AUTH",
    "billing_error": "QUOTA",
    "permission_error": "PERMISSION",
    "not_found_error": "NOT_FOUND",
    "request_too_large": "CONTEXT_LENGTH",
    "rate_limit_error": "RATE_LIMITED",
    "api_error": "SERVER",
    "timeout_error": "TIMEOUT",
    "overloaded_error": "OVERLOADED",
}

_CONTEXT_MARKERS: Final = ("prompt is too long", "context window", "context length")


def classify(status: int | None, error_type: str | None, message: str | None) -> ErrorCode | None:
    """Refine an error from Anthropic's error ``type`` and ``message``.

    Args:
        status: the HTTP status (``None`` for an in-band error). The type decides, except that
            Anthropic also labels other 4xx statuses ``invalid_request_error`` (PROTOCOLS §2.3):
            then the status decides (a 401 stays ``AUTH``).
        error_type: ``error.type`` of the body (``"overloaded_error"`` …), or ``None``.
        message: ``error.message``, searched for context-overflow wording ("prompt is too long:
            205351 tokens > 200000 maximum" arrives as a 400 ``invalid_request_error``).

    Returns:
        The stable code, or ``None`` when the type is unknown (the caller keeps its status-based
        code).
    """
    if message is not None and error_type in (None, "invalid_request_error"):
        lowered = message.lower()
        if any(marker in lowered for marker in _CONTEXT_MARKERS):
            return "CONTEXT_LENGTH"
    if error_type is None:
        return None
    code = _BY_TYPE.get(error_type)
    if code == "BAD_REQUEST" and status is not None and status not in (400, 422):
        return None  # the generic type of every 4xx: the status is more precise
    return code


def inband_error(error: WireError | None, request_id: str | None = None) -> LlmError:
    """The :class:`LlmError` for an in-band ``error`` event (HTTP 200 already sent).

    An unknown or missing ``type`` becomes ``SERVER``: the provider reported a fault of its own.
    """
    error_type = error.type if error is not None else None
    message = (error.message if error is not None else None) or "error event without a message"
    code = classify(None, error_type, message) or "SERVER"
    return LlmError(
        code,
        f"Anthropic stream error ({error_type or 'unknown'}): {message}",
        provider=PROVIDER,
        provider_type=error_type,
        request_id=request_id,
    )


def classifier(status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
    """The :data:`harness_core.http.ErrorClassifier` for Anthropic error bodies.

    Reads ``error.type`` and ``error.message`` of ``{"type": "error", "error": {...}}`` and
    returns the refined code, or ``None`` (keep the status mapping) when the body is not
    Anthropic's shape or its type is unknown. Never raises.
    """
    from harness_core.http import ErrorDetails

    error = body.get("error") if body is not None else None
    if not isinstance(error, dict):
        return None
    error_type = error.get("type")
    message = error.get("message")
    code = classify(
        status, error_type if isinstance(error_type, str) else None, message if isinstance(message, str) else None
    )
    return None if code is None else ErrorDetails(code=code)
