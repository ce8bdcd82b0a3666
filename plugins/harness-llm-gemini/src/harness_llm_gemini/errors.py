"""Gemini error classification: ``google.rpc.Status`` bodies → stable :data:`ErrorCode`.

Gemini reports errors as ``{"error": {"code": <HTTP status>, "message", "status":
"<google.rpc code>", "details": [...]}}``, as non-2xx HTTP bodies (sometimes array-wrapped) and
in-band as an SSE ``data:`` event after HTTP 200
(https://ai.google.dev/gemini-api/docs/troubleshooting, https://google.aip.dev/193). Rules, first match wins:

- ``details[].reason`` ``API_KEY_INVALID`` (a bad key arrives as **400** ``INVALID_ARGUMENT``),
  or status ``UNAUTHENTICATED`` → ``AUTH``;
- ``INVALID_ARGUMENT`` whose message speaks of the token limit → ``CONTEXT_LENGTH``;
- ``FAILED_PRECONDITION`` (billing / region) → ``QUOTA`` when the message mentions billing,
  else ``PERMISSION``;
- the status names: ``PERMISSION_DENIED`` → ``PERMISSION``, ``NOT_FOUND``, ``RESOURCE_EXHAUSTED``
  → ``RATE_LIMITED``, ``UNAVAILABLE`` → ``OVERLOADED``, ``INTERNAL`` / ``DEADLINE_EXCEEDED`` /
  ``CANCELLED`` → ``SERVER``, ``INVALID_ARGUMENT`` → ``BAD_REQUEST``;
- otherwise the HTTP status decides.

``RetryInfo.retryDelay`` (``"37s"``, a protobuf ``Duration``) becomes ``retry_after`` when no
``Retry-After`` header was sent.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from harness_core import ErrorCode

if TYPE_CHECKING:  # pragma: no cover - typing only (harness_core.http imports httpx)
    from harness_core.http import ErrorDetails

__all__ = ["PROVIDER", "classifier", "classify", "retry_delay"]

PROVIDER: Final = "gemini"
"""The plugin name recorded on every :class:`~harness_core.errors.LlmError` this adapter raises."""

_BY_STATUS: Final[dict[str, ErrorCode]] = {
    "INVALID_ARGUMENT": "BAD_REQUEST",
    "UNAUTHENTICATED": "AUTH",
    "PERMISSION_DENIED": "PERMISSION",
    "NOT_FOUND": "NOT_FOUND",
    "RESOURCE_EXHAUSTED": "RATE_LIMITED",
    "UNAVAILABLE": "OVERLOADED",
    "INTERNAL": "SERVER",
    "DEADLINE_EXCEEDED": "SERVER",
    "CANCELLED": "SERVER",
}
_AUTH_REASONS: Final = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED", "ACCESS_TOKEN_EXPIRED"})
_CONTEXT_MARKERS: Final = ("input token count", "exceeds the maximum number of tokens", "context window")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)s\s*$")


def retry_delay(details: object) -> float | None:
    """Seconds of the first ``google.rpc.RetryInfo`` ``retryDelay`` in ``details``, or ``None``.

    ``retryDelay`` is a protobuf ``Duration`` in its JSON form: decimal seconds with an ``s``
    suffix (``"37s"``, ``"0.5s"``); anything else is ignored.
    """
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = _DURATION.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _reasons(details: object) -> list[str]:
    if not isinstance(details, list):
        return []
    return [d["reason"] for d in details if isinstance(d, dict) and isinstance(d.get("reason"), str)]


def classify(status: str | None, message: str | None, reasons: list[str]) -> ErrorCode | None:
    """The stable code for a Gemini error, or ``None`` to let the HTTP status decide.

    Args:
        status: the ``google.rpc`` code name (``"RESOURCE_EXHAUSTED"``), or ``None``.
        message: the error message (searched for token-limit and billing wording).
        reasons: the ``reason`` of every ``details`` entry (``"API_KEY_INVALID"`` …).
    """
    if any(reason in _AUTH_REASONS for reason in reasons):
        return "AUTH"
    lowered = (message or "").lower()
    if status == "INVALID_ARGUMENT" and any(marker in lowered for marker in _CONTEXT_MARKERS):
        return "CONTEXT_LENGTH"
    if status == "FAILED_PRECONDITION":
        return "QUOTA" if "billing" in lowered else "PERMISSION"
    return _BY_STATUS.get(status) if status is not None else None


def classifier(status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
    """The :data:`harness_core.http.ErrorClassifier` for Gemini error bodies.

    Reads ``error.status``, ``error.message`` and ``error.details`` of ``{"error": {...}}`` and
    returns the refined code, the first ``details[].reason`` as ``provider_code`` and the
    ``RetryInfo`` delay; ``None`` when the body is not Gemini's shape. For an in-band error
    (``status`` ``None``) ``error.code`` stands in for the HTTP status. Never raises.
    """
    from harness_core.http import ErrorDetails, code_for_status

    error = body.get("error") if body is not None else None
    if not isinstance(error, dict):
        return None
    rpc_status = error.get("status")
    message = error.get("message")
    details = error.get("details")
    reasons = _reasons(details)
    code = classify(
        rpc_status if isinstance(rpc_status, str) else None, message if isinstance(message, str) else None, reasons
    )
    http_code = error.get("code")
    if code is None and status is None and isinstance(http_code, int) and 400 <= http_code <= 599:
        code = code_for_status(http_code)
    return ErrorDetails(code=code, provider_code=reasons[0] if reasons else None, retry_after=retry_delay(details))
