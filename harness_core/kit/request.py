"""One JSON request helper for the non-streaming calls of an HTTP adapter (``list_models``,
``count_tokens``).

Errors are mapped exactly as for streams (:mod:`harness_core.http`): network faults and
timeouts by :func:`~harness_core.http.error_from_exception`, non-2xx statuses by
:func:`~harness_core.http.error_from_response` with the adapter's classifier, a body the
decoder rejects as ``PROTOCOL``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from harness_core.errors import LlmError
from harness_core.http import error_from_exception, error_from_response

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

    from harness_core.http import ErrorClassifier

__all__ = ["request_json"]

T = TypeVar("T")


async def request_json(
    client: httpx.AsyncClient,
    path: str,
    decode: Callable[[bytes], T],
    *,
    method: str = "GET",
    params: Mapping[str, str | int] | None = None,
    content: bytes | None = None,
    provider: str | None = None,
    classifier: ErrorClassifier | None = None,
) -> T:
    """Send one request and return ``decode(body)`` of its 2xx response.

    Args:
        client: the adapter's ``httpx.AsyncClient`` (``path`` is relative to its base URL).
        path: the request path, e.g. ``"/models"``.
        decode: turns the body bytes into the result; it raises ``ValueError`` /
            ``KeyError`` / ``TypeError`` (``msgspec.DecodeError`` is a ``ValueError``) for a
            body of the wrong shape.
        method: the HTTP method.
        params: query parameters.
        content: a JSON request body (sent with ``content-type: application/json``).
        provider / classifier: as for :func:`harness_core.kit.stream_sse`.

    Raises:
        LlmError: ``TIMEOUT`` / ``NETWORK`` for transport faults, the mapped code of a non-2xx
            status (with ``retry_after`` and ``request_id``), ``PROTOCOL`` naming ``path`` for
            a body ``decode`` rejects.
    """
    import httpx  # the client's own module: importing this one stays cheap (no httpx)

    try:
        headers = None if content is None else {"content-type": "application/json"}
        response = await client.request(method, path, params=params, content=content, headers=headers)
    except httpx.HTTPError as exc:
        raise error_from_exception(exc, provider=provider) from exc
    if not 200 <= response.status_code <= 299:
        raise error_from_response(
            response.status_code, response.headers, response.content, provider=provider, classifier=classifier
        )
    try:
        return decode(response.content)
    except (ValueError, KeyError, TypeError) as exc:
        raise LlmError("PROTOCOL", f"unexpected {path} response: {exc!r}", provider=provider) from exc
