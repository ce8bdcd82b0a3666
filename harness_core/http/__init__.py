"""HTTP transport shared by the HTTP adapters, one concept per module:

- :mod:`~harness_core.http.errors`: HTTP statuses, error bodies, in-band error payloads,
  ``Retry-After``, request ids and httpx exceptions → :class:`~harness_core.errors.LlmError`
  (providers refine the code through an :data:`ErrorClassifier`);
- :mod:`~harness_core.http.client`: the ``httpx.AsyncClient`` factory;
- :mod:`~harness_core.http.stream`: :func:`open_sse_stream` / :class:`SSEStream`;
- :mod:`~harness_core.http.decoding`: ``Content-Encoding`` of a streamed body;
- :mod:`~harness_core.http.finishing`: closing httpx's body generators.

Every public name is importable from here (``from harness_core.http import make_client``).
"""

from __future__ import annotations

from harness_core.http.client import ACCEPT_ENCODING, check_headers, make_client, split_base_url
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
from harness_core.http.stream import DEFAULT_CLOSE_TIMEOUT, SSEStream, open_sse_stream

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
