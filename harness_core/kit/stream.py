"""The SSE-over-HTTP stream loop every HTTP adapter shares: one request, one translator.

:func:`stream_sse` sends the request through :func:`harness_core.http.open_sse_stream` (HTTP
error mapping with the adapter's classifier, ``Retry-After``, request id, a pending read ended
by the abort signal, the response closed shielded and bounded on every exit path) and
drives a :class:`~harness_core.kit.translator.StreamTranslator` over the events. The
stream obligations it keeps are described in ``docs/stream-obligations.md``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Final

import anyio

from harness_core.abort import abort_reason
from harness_core.errors import LlmError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

    from harness_core.abort import AbortSignal
    from harness_core.http import ErrorClassifier, SSEStream
    from harness_core.kit.translator import StreamTranslator
    from harness_core.types import StreamChunk

__all__ = ["DEFAULT_DRAIN_TIMEOUT", "stream_sse"]

logger = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT: Final = 1.0
"""Seconds spent reading the (normally empty) rest of a body after the terminal event, so the
connection goes back to the pool instead of being closed."""


async def stream_sse(
    client: httpx.AsyncClient,
    request: httpx.Request | Callable[[], httpx.Request],
    make_translator: Callable[[str | None], StreamTranslator],
    *,
    abort: AbortSignal | None = None,
    provider: str | None = None,
    classifier: ErrorClassifier | None = None,
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
) -> AsyncIterator[StreamChunk]:
    """Send ``request`` and yield the chunks a fresh translator makes of its events.

    Args:
        client: the adapter's ``httpx.AsyncClient``.
        request: the streaming request (``client.build_request(...)``), or a function building
            it, called on the first ``__anext__`` (so option errors it raises surface from the
            iteration, like every other error of the stream).
        make_translator: ``(request_id) -> StreamTranslator``, called once the response
            headers arrived (``request_id`` from ``x-request-id`` / ``request-id``; ``None``
            when the abort signal fired before the request was sent).
        abort: the caller's abort signal; when it fires the pending read is abandoned, the
            response closed and the translator's :meth:`~StreamTranslator.abort` chunks end
            the stream (``finish{aborted}``).
        provider: the plugin name stamped on errors.
        classifier: refines HTTP error codes (see :data:`harness_core.http.ErrorClassifier`).
        drain_timeout: seconds to read the rest of the body after the terminal event (a fault
            there is logged at debug level: the generation is complete).

    Raises:
        LlmError: mapped HTTP status errors (with ``retry_after`` and ``request_id``), a 2xx
            that is not ``text/event-stream`` (``PROTOCOL``), transport faults (``TIMEOUT`` /
            ``NETWORK``), the translator's protocol faults, and its :meth:`end_of_input` error
            when the body ended before the terminal event. Task cancellation propagates after
            the response is closed.
    """
    from harness_core.http.stream import open_sse_stream  # httpx: imported when a stream first runs

    if callable(request):
        request = request()
    async with open_sse_stream(client, request, abort=abort, provider=provider, classifier=classifier) as events:
        translator = make_translator(events.request_id)
        async for event in events:
            for chunk in translator.feed(event):
                yield chunk
            if translator.done:
                await _drain(events, drain_timeout)
                return
        final = translator.abort(abort_reason(abort)) if events.aborted else translator.end_of_input()
    for chunk in final:
        yield chunk


async def _drain(events: SSEStream, seconds: float) -> None:
    """Read the rest of a finished response, bounded by ``seconds`` (see
    :data:`DEFAULT_DRAIN_TIMEOUT`). Events after the terminal one are discarded."""
    with anyio.move_on_after(seconds):
        try:
            async for _ in events:
                pass
        except LlmError as exc:
            logger.debug("ignored after the terminal event: %s", exc)
