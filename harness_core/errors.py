"""The error vocabulary: :class:`LlmError`, its stable codes and :class:`Failure`, the error as
a ``finish`` chunk carries it.

Every fault that crosses a harness boundary is an :class:`LlmError` carrying one of the stable
codes below (docs/vocabulary.md). Codes never change meaning; ``retryable`` is derived from the code, never
set by hand, so retry middleware and callers agree on what a second attempt can fix.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

import msgspec

__all__ = [
    "ERROR_CODES",
    "RETRYABLE_CODES",
    "SNIPPET_CHARS",
    "ErrorCode",
    "Failure",
    "InvalidOutputError",
    "LlmError",
    "snippet",
    "truncate",
]

ErrorCode = Literal[
    "NO_ADAPTER",
    "DUPLICATE_ROUTE",
    "CONFIG",
    "UNSUPPORTED",
    "AUTH",
    "PERMISSION",
    "NOT_FOUND",
    "BAD_REQUEST",
    "CONTEXT_LENGTH",
    "CONTENT_FILTER",
    "RATE_LIMITED",
    "QUOTA",
    "OVERLOADED",
    "SERVER",
    "TIMEOUT",
    "NETWORK",
    "PROTOCOL",
    "ABORTED",
    "INVALID_OUTPUT",
    "INTERNAL",
]
"""The stable error codes (docs/vocabulary.md). ``INTERNAL`` marks a bug inside an adapter.
``INVALID_OUTPUT``: the model's reply is not valid against the requested structured-output
schema or type (raised by ``generate_object`` as :class:`InvalidOutputError`)."""

ERROR_CODES: Final[frozenset[str]] = frozenset(get_args(ErrorCode))
"""Every valid :data:`ErrorCode`, for validation."""

RETRYABLE_CODES: Final[frozenset[str]] = frozenset({"RATE_LIMITED", "OVERLOADED", "SERVER", "TIMEOUT", "NETWORK"})
"""Codes for which a later identical request may succeed."""

_MAX_MESSAGE = 2000

SNIPPET_CHARS: Final = 200
"""Longest excerpt of a payload (an event, a response body, a provider's message) quoted in an
error message (docs/writing-an-adapter.md)."""


def truncate(text: str, limit: int = 1000) -> str:
    """``text`` cut to at most ``limit`` characters (default 1,000: a provider message, as
    ``harness_core.http.errors.truncate`` had it), ending with ``…`` when cut: the one cut rule of
    error text (messages, quoted payloads)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def snippet(data: str | bytes) -> str:
    """The excerpt of a payload an error message quotes: at most :data:`SNIPPET_CHARS`
    characters, ``…`` marking a cut (:func:`truncate`); bytes are read as UTF-8 with
    replacement characters."""
    if not isinstance(data, str):
        data = data[: SNIPPET_CHARS * 4].decode("utf-8", "replace")  # enough bytes for the excerpt
    return truncate(data, SNIPPET_CHARS)


class LlmError(Exception):
    """A classified failure of a generation, raised by adapters and the runtime.

    Args:
        code: one of :data:`ErrorCode`; anything else raises :class:`ValueError`.
        message: human-readable text (the provider's own message where there is one); it is
            truncated to 2,000 characters. It must never contain a secret.
        status: the HTTP status of the provider response, when the fault came with one.
        retry_after: seconds the provider asked us to wait (``Retry-After`` / ``retry-after-ms``).
        provider: the plugin name (``openai``, ``anthropic`` …) that classified the fault.
        provider_type: the provider's own error type string (``rate_limit_error`` …).
        provider_code: the provider's own error code (stringified when numeric).
        request_id: the provider's request id header, for support tickets.
        field: the :class:`~harness_core.GenerateOptions` field the fault is about
            (``"reasoning_effort"`` for an effort the model does not take), or the
            :class:`~harness_core.embedding.EmbedOptions` field of an embedding call's fault
            (``"dimensions"``), when it is one: a gateway answers it as its own client's
            spelling of that field. A provider option refused is ``provider_options.<key>``
            (``"provider_options.logprobs"``): a gateway names its client's field ``<key>``.

    ``retryable`` is true exactly for the codes in :data:`RETRYABLE_CODES`.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        provider: str | None = None,
        provider_type: str | None = None,
        provider_code: str | None = None,
        request_id: str | None = None,
        field: str | None = None,
    ) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown LlmError code {code!r}; expected one of {sorted(ERROR_CODES)}")
        message = truncate(message, _MAX_MESSAGE)
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.provider = provider
        self.provider_type = provider_type
        self.provider_code = provider_code
        self.request_id = request_id
        self.field = field

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later (derived from :attr:`code`)."""
        return self.code in RETRYABLE_CODES

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.code}{status}: {self.message}"

    def __repr__(self) -> str:
        return f"LlmError({self.code!r}, {self.message!r}, status={self.status!r})"

    def to_failure(self) -> Failure:
        """This error as the :class:`Failure` Struct carried by ``finish``."""
        return Failure(
            code=self.code,
            message=self.message,
            retryable=self.retryable,
            status=self.status,
            retry_after=self.retry_after,
            provider=self.provider,
            provider_type=self.provider_type,
            provider_code=self.provider_code,
            request_id=self.request_id,
            field=self.field,
        )

    @classmethod
    def from_failure(cls, failure: Failure) -> LlmError:
        """Rebuild the error a ``finish{error}`` chunk carries (used by ``generate``)."""
        return cls(
            failure.code,
            failure.message,
            status=failure.status,
            retry_after=failure.retry_after,
            provider=failure.provider,
            provider_type=failure.provider_type,
            provider_code=failure.provider_code,
            request_id=failure.request_id,
            field=failure.field,
        )


class InvalidOutputError(LlmError):
    """The model's structured output does not validate (code ``INVALID_OUTPUT``).

    Raised by :meth:`harness_core.Harness.generate_object` when the reply is not JSON or does not
    match the requested type. Not retryable by the code table (the same request may well give the
    same reply); a caller may still choose to ask again.

    Args:
        message: what is wrong, naming the JSON path of the first mismatch (``$.age``).
        text: the model's raw reply text, kept whole for inspection or repair.
        path: the JSON path of the first mismatch (``"$"`` for the root or for text that is not
            JSON at all).
        provider: the plugin name of the route that produced the reply.
    """

    def __init__(self, message: str, *, text: str, path: str = "$", provider: str | None = None) -> None:
        super().__init__("INVALID_OUTPUT", message, provider=provider)
        self.text = text
        self.path = path


class Failure(msgspec.Struct, frozen=True, omit_defaults=True):
    """What went wrong, carried by ``finish`` of kind ``error`` or ``aborted``.

    Mirrors :class:`LlmError` field for field; ``retry_after`` is in
    seconds.
    """

    code: ErrorCode
    message: str
    retryable: bool = False
    status: int | None = None
    retry_after: float | None = None
    provider: str | None = None
    provider_type: str | None = None
    provider_code: str | None = None
    request_id: str | None = None
    field: str | None = None
