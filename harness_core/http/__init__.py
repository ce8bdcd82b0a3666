"""HTTP transport shared by the HTTP adapters, one concept per module:

- :mod:`~harness_core.http.errors`: HTTP statuses, error bodies, in-band error payloads,
  ``Retry-After``, request ids and httpx exceptions → :class:`~harness_core.errors.LlmError`
  (providers refine the code through an :data:`ErrorClassifier`);
- :mod:`~harness_core.http.headers`: header checks at build time (:func:`check_headers`, no httpx);
- :mod:`~harness_core.http.client`: the ``httpx.AsyncClient`` factory (:class:`AdapterClient`);
- :mod:`~harness_core.http.transport`: its transport (httpcore or aiohttp, ``transport:``);
- :mod:`~harness_core.http.stream`: :func:`open_sse_stream` / :class:`SSEStream`;
- :mod:`~harness_core.http.decoding`: ``Content-Encoding`` of a streamed body;
- :mod:`~harness_core.http.finishing`: closing httpx's body generators.

Every public name is importable from here (``from harness_core.http import make_client``). Names
load on first use, so an adapter built but never used (a configured provider another route
serves the run) does not import httpx: its client is made, and httpx imported, on first send.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_core._lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only; at run time names load on first use
    from harness_core.http.client import (
        ACCEPT_ENCODING,
        AdapterClient,
        basic_auth_of,
        make_client,
        split_base_url,
    )
    from harness_core.http.errors import (
        ErrorClassifier,
        ErrorDetails,
        code_for_provider_type,
        code_for_status,
        describe_error_body,
        error_from_exception,
        error_from_payload,
        error_from_response,
        parse_error_body,
        parse_retry_after,
        request_id_from,
    )
    from harness_core.http.headers import basic_auth, check_headers
    from harness_core.http.stream import DEFAULT_CLOSE_TIMEOUT, SSEStream, open_sse_stream
    from harness_core.http.transport import (
        TransportName,
        make_transport,
        prefer_transport,
        preferred_transport,
        resolve_transport,
    )

__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_CLOSE_TIMEOUT",
    "AdapterClient",
    "ErrorClassifier",
    "ErrorDetails",
    "SSEStream",
    "TransportName",
    "basic_auth",
    "basic_auth_of",
    "check_headers",
    "code_for_provider_type",
    "code_for_status",
    "describe_error_body",
    "error_from_exception",
    "error_from_payload",
    "error_from_response",
    "make_client",
    "make_transport",
    "open_sse_stream",
    "parse_error_body",
    "parse_retry_after",
    "prefer_transport",
    "preferred_transport",
    "request_id_from",
    "resolve_transport",
    "split_base_url",
]

_LAZY = {
    "ACCEPT_ENCODING": "harness_core.http.client",
    "AdapterClient": "harness_core.http.client",
    "DEFAULT_CLOSE_TIMEOUT": "harness_core.http.stream",
    "ErrorClassifier": "harness_core.http.errors",
    "ErrorDetails": "harness_core.http.errors",
    "SSEStream": "harness_core.http.stream",
    "TransportName": "harness_core.http.transport",
    "basic_auth": "harness_core.http.headers",
    "basic_auth_of": "harness_core.http.client",
    "check_headers": "harness_core.http.headers",
    "code_for_provider_type": "harness_core.http.errors",
    "code_for_status": "harness_core.http.errors",
    "describe_error_body": "harness_core.http.errors",
    "error_from_exception": "harness_core.http.errors",
    "error_from_payload": "harness_core.http.errors",
    "error_from_response": "harness_core.http.errors",
    "make_client": "harness_core.http.client",
    "make_transport": "harness_core.http.transport",
    "open_sse_stream": "harness_core.http.stream",
    "parse_error_body": "harness_core.http.errors",
    "parse_retry_after": "harness_core.http.errors",
    "prefer_transport": "harness_core.http.transport",
    "preferred_transport": "harness_core.http.transport",
    "request_id_from": "harness_core.http.errors",
    "resolve_transport": "harness_core.http.transport",
    "split_base_url": "harness_core.http.client",
}

__getattr__ = lazy_exports(__name__, _LAZY)
