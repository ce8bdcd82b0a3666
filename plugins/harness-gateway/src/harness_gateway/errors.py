"""Errors as the gateway's clients expect them: HTTP status, ``retry-after``, OpenAI or Anthropic body.

Every failure the gateway answers with is a :class:`GatewayError`; a provider failure
(a ``finish{error}``'s :class:`~harness_core.Failure`) is turned into one by :func:`from_failure`. Bodies:

* OpenAI (https://platform.openai.com/docs/guides/error-codes):
  ``{"error": {"message", "type", "param", "code"}}``.
* Anthropic (https://docs.anthropic.com/en/api/errors):
  ``{"type": "error", "error": {"type", "message"}}``.

A transport failure (``NETWORK`` or ``TIMEOUT`` without an HTTP status: the upstream could not be
reached or stopped answering) reaches clients and the console as a stable message naming the
route and the kind of fault (:func:`public_failure`); its detail (the upstream URL, the errno
text) is for the server log only.

Provider authentication failures are 502, not 401: the client's key was fine, the gateway's
provider credentials were not (a 401 would make SDKs tell the user their key is wrong).

A failure that is not retryable (``retryable=False``: a key's spent budget) carries no
``retry-after`` but ``x-should-retry: false``, which the OpenAI and Anthropic SDKs honour before
their own status rules (their ``_should_retry``), and says so per dialect: OpenAI's quota answer
(429, ``type`` and ``code`` ``insufficient_quota``,
https://platform.openai.com/docs/guides/error-codes/api-errors) and Anthropic's
``billing_error`` (402, https://docs.anthropic.com/en/api/errors).

A generation that ends ``aborted`` while its client is still there (the drain timeout of a
shutdown or reload, an operator's abort from the console, an abort upstream) ends as a failure,
never as a complete answer (:func:`finish_error`, :func:`public_abort`): code ``ABORTED``, 503
when the gateway drained it (a retry, on the new runtime or another instance, may succeed), else
499; in a stream, the dialect's in-stream error after the partial output.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

import msgspec

from harness_core import ErrorCode, Failure, FinishReason

__all__ = ["DRAINED", "GatewayError", "finish_error", "from_failure", "public_abort", "public_failure"]

_STATUS: Final[dict[ErrorCode, int]] = {
    "NO_ADAPTER": 404,
    "DUPLICATE_ROUTE": 500,
    "CONFIG": 500,
    "UNSUPPORTED": 400,
    "AUTH": 502,
    "PERMISSION": 502,
    "NOT_FOUND": 404,
    "BAD_REQUEST": 400,
    "CONTEXT_LENGTH": 400,
    "CONTENT_FILTER": 400,
    "RATE_LIMITED": 429,
    "QUOTA": 429,
    "OVERLOADED": 503,
    "SERVER": 502,
    "TIMEOUT": 504,
    "NETWORK": 502,
    "PROTOCOL": 502,
    "ABORTED": 499,
    "INTERNAL": 500,
}

_OPENAI_TYPE: Final[dict[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}

_ANTHROPIC_TYPE: Final[dict[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
}


class GatewayError(Exception):
    """A failure answered to the client.

    Args:
        status: the HTTP status (400 … 504).
        message: text for the client; never holds a secret.
        code: a short machine code (``invalid_api_key``, ``budget_exceeded``, ``RATE_LIMITED`` …).
        param: the request field at fault (``messages[1].content``), when there is one.
        retry_after: seconds the client should wait (sent as the ``retry-after`` header, rounded up).
        retryable: ``False`` for a failure a retry cannot cure (see the module docstring); a
            non-retryable 429 is OpenAI's ``insufficient_quota`` and Anthropic's 402 ``billing_error``.
        openai_type: the OpenAI error ``type`` when it is not the status's usual one (OpenAI answers
            an unknown stored response with 404 ``invalid_request_error``).
        field: the vocabulary field (:class:`~harness_core.GenerateOptions`) a route's failure
            named (:attr:`harness_core.LlmError.field`); the dialect answering it names its own
            spelling of it as ``param`` (:attr:`~harness_gateway.dialect.Dialect.option_fields`).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        retry_after: float | None = None,
        retryable: bool = True,
        openai_type: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        self.openai_type = openai_type
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.retry_after = retry_after
        self.retryable = retryable

    @property
    def quota(self) -> bool:
        """A 429 no retry cures (a spent budget): answered as a quota / billing failure."""
        return self.status == 429 and not self.retryable

    def headers(self) -> dict[str, str]:
        """``{"retry-after": "<whole seconds>"}`` when a wait is known, ``{"x-should-retry":
        "false"}`` when not retryable, else ``{}``."""
        if not self.retryable:
            return {"x-should-retry": "false"}
        if self.retry_after is None:
            return {}
        return {"retry-after": str(max(1, math.ceil(self.retry_after)))}

    def openai_body(self) -> dict[str, Any]:
        """OpenAI's error object (the Chat Completions and Responses dialects; module docstring)."""
        kind = "insufficient_quota" if self.quota else _OPENAI_TYPE.get(self.status, "server_error")
        kind = self.openai_type or kind
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def anthropic_body(self) -> dict[str, Any]:
        """Anthropic's error body (the Messages dialect, answered with a 402 for a quota failure)."""
        kind = "billing_error" if self.quota else _ANTHROPIC_TYPE.get(self.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": self.message}}


def from_failure(failure: Failure) -> GatewayError:
    """The :class:`GatewayError` for a ``finish{error}``'s (or ``finish{aborted}``'s) failure
    (status from its stable code; a provider's ``NOT_FOUND`` names ``param: "model"``: what a
    request names that a provider does not find is its model; an ``ABORTED`` failure marked
    ``retryable``, the gateway's drain (:func:`public_abort`), is 503: the service is going away,
    a retry may succeed)."""
    status = 503 if failure.code == "ABORTED" and failure.retryable else _STATUS[failure.code]
    message = failure.message
    if failure.code in ("AUTH", "PERMISSION"):
        message = f"the provider rejected the gateway's credentials: {message}"
    param = "model" if failure.code == "NOT_FOUND" else None
    return GatewayError(
        status, message, code=failure.code, param=param, retry_after=failure.retry_after, field=failure.field
    )


def finish_error(reason: FinishReason) -> GatewayError | None:
    """The error a generation's finish ends the client's answer with, or ``None`` for a finish
    that did not fail: :func:`from_failure` of an ``error`` finish's failure, and of an
    ``aborted`` one's (a stream the gateway or its upstream aborted is not a complete answer;
    one without a failure gets a bare ``ABORTED``, 499). The one rule the encoders of every
    dialect and the relay's collected answers and early errors follow."""
    if reason.kind == "aborted":
        return from_failure(reason.failure or Failure("ABORTED", "the generation was aborted"))
    if reason.kind == "error" and reason.failure is not None:
        return from_failure(reason.failure)
    return None


DRAINED: Final = (
    "the generation was aborted: the gateway is shutting down or reloading and its drain timeout passed; "
    "retry the request"
)
"""The message of a generation the gateway aborted at the drain timeout (:func:`public_abort`)."""


def public_abort(reason: str | None, route: str, request_id: str, *, drained: bool) -> Failure:
    """The ``ABORTED`` failure clients, observers and the console are shown for a generation that
    ended ``aborted``.

    Args:
        reason: the reason the gateway fired the request's abort signal with (its own text:
            ``aborted by an operator from the console``, ``the client disconnected``), or ``None``
            when the signal did not fire (the route or its upstream aborted the generation). Shown
            as it is: every reason the gateway fires is a public sentence.
        route: the route requested, named in the message of an upstream abort.
        request_id: the request id, named in the message of an upstream abort (its detail, the
            adapter's message, is for the server log: the caller logs it).
        drained: the gateway aborted it at the drain timeout of a shutdown or reload
            (:meth:`~harness_gateway.runtime.GatewayRuntime.abort_all`): :data:`DRAINED`,
            ``retryable`` (503 in :func:`from_failure`).
    """
    if drained:
        return Failure("ABORTED", DRAINED, retryable=True)
    if reason is None:
        message = f"route {route!r} aborted the generation; details are in the gateway's log (request {request_id})"
        return Failure("ABORTED", message)
    return Failure("ABORTED", reason)


_TRANSPORT_KINDS: Final[dict[str, str]] = {
    "ConnectError": "connect error",
    "ConnectTimeout": "connect timeout",
    "ReadTimeout": "read timeout",
    "WriteTimeout": "write timeout",
    "PoolTimeout": "no free connection",
    "ReadError": "read error",
    "WriteError": "write error",
    "RemoteProtocolError": "connection dropped",
    "UnsupportedProtocol": "unsupported protocol",
}
"""httpx exception names (what :func:`harness_core.http.error_from_exception` starts a message
with, on either transport) → the words a client is shown."""

_LEADING_NAME: Final = re.compile(r"([A-Za-z]+)\b")


def public_failure(failure: Failure, route: str, request_id: str) -> Failure | None:
    """The failure clients and the console are shown instead of ``failure``, or ``None`` when
    ``failure`` can be shown as it is.

    A ``NETWORK`` or ``TIMEOUT`` failure without an HTTP status (a transport fault: its message
    quotes the upstream URL and the OS error) becomes ``route 'R' is unreachable (connect error);
    details are in the gateway's log (request ID)`` — the kind from the exception name the
    message starts with (:data:`_TRANSPORT_KINDS`), else ``network error`` / ``timeout``. The
    code, ``retryable`` and ``retry_after`` are kept; the caller logs the original message.
    """
    if failure.code not in ("NETWORK", "TIMEOUT") or failure.status is not None:
        return None
    leading = _LEADING_NAME.match(failure.message)
    default = "network error" if failure.code == "NETWORK" else "timeout"
    kind = _TRANSPORT_KINDS.get(leading.group(1), default) if leading else default
    message = f"route {route!r} is unreachable ({kind}); details are in the gateway's log (request {request_id})"
    return msgspec.structs.replace(failure, message=message)
