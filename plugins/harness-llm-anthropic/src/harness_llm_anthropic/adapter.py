"""The Anthropic adapter: serializer + HTTP/SSE transport + translator, glued together.

``POST {base_url}/v1/messages`` with ``stream: true``
(https://docs.anthropic.com/en/api/messages-streaming), headers ``x-api-key``,
``anthropic-version`` and the configured extras. The stages live in their own modules:
:mod:`~harness_llm_anthropic.serialize` (request body), :mod:`harness_core.http` (transport,
HTTP error mapping with :func:`~harness_llm_anthropic.errors.classifier`, abort racing, closing),
:mod:`~harness_llm_anthropic.translate` (events → chunks).

Error paths (SPEC §3.6):

- **raised** :class:`LlmError`: invalid options (``UNSUPPORTED`` / ``BAD_REQUEST``, before any
  I/O), HTTP status errors (code from the Anthropic error type, else the status; ``retry_after``
  and ``request-id`` kept), a 2xx that is not ``text/event-stream`` (``PROTOCOL``), malformed
  events (``PROTOCOL``), timeouts (``TIMEOUT``), resets and EOF before ``message_stop``
  (``NETWORK``);
- **finish{error}**: an in-band ``error`` event (e.g. ``overloaded_error`` → ``OVERLOADED``).

Abort: the pending read is abandoned, the response closed, open blocks closed and the stream
ends with ``usage`` (when reported) and ``finish{aborted}``. Cancellation propagates; the
response is closed on every exit path.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Final

import anyio

from harness_core.adapter import LlmAdapter
from harness_core.errors import LlmError
from harness_core.http import (
    check_headers,
    error_from_exception,
    error_from_response,
    make_client,
    open_sse_stream,
)
from harness_core.types import GenerateOptions, ModelInfo, StreamChunk
from harness_llm_anthropic.config import AnthropicConfig
from harness_llm_anthropic.errors import PROVIDER, classifier
from harness_llm_anthropic.serialize import build_body
from harness_llm_anthropic.translate import Translator
from harness_llm_anthropic.wire import MODELS_DECODER

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

__all__ = ["AnthropicAdapter"]

logger = logging.getLogger(__name__)

DRAIN_TIMEOUT: Final = 1.0
"""Seconds spent reading the rest of a body after ``message_stop`` so the connection can be reused."""

_MODELS_PAGE: Final = 1000


async def _drain(events: AsyncIterator[object]) -> None:
    """Read the (normally empty) rest of a finished response so its connection can be reused.

    Bounded by :data:`DRAIN_TIMEOUT`. A fault here comes after ``message_stop``: the generation is
    complete, so it only costs the connection; it is logged, not raised.
    """
    with anyio.move_on_after(DRAIN_TIMEOUT):
        try:
            async for _ in events:
                pass
        except LlmError as exc:
            logger.debug("ignored after message_stop: %s", exc)


class AnthropicAdapter(LlmAdapter):
    """Streams the Anthropic Messages API into :data:`StreamChunk` (SPEC §3).

    Args:
        config: the plugin config (:class:`~harness_llm_anthropic.config.AnthropicConfig`).
        transport: an optional ``httpx.AsyncBaseTransport`` (tests, proxies).

    One ``httpx.AsyncClient`` per adapter, created on first use and closed by :meth:`aclose`.
    """

    def __init__(self, config: AnthropicConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._messages_url = "/v1/messages"
        self._models_url = "/v1/models"
        headers = {"anthropic-version": config.anthropic_version, **config.headers}
        if config.api_key is not None:
            headers["x-api-key"] = config.api_key.get_secret_value()
        check_headers(headers, provider=PROVIDER)  # a key that cannot be sent is CONFIG, now
        self._headers = headers

    def _http(self) -> httpx.AsyncClient:
        client = self._client
        if client is None:
            config = self.config
            client = self._client = make_client(
                base_url=config.base_url,
                headers=self._headers,
                provider=PROVIDER,
                connect_timeout=config.timeout.connect,
                read_timeout=config.timeout.read,
                pool_timeout=config.pool_timeout,
                max_connections=config.max_connections,
                max_keepalive_connections=config.max_connections,
                transport=self._transport,
            )
        return client

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Generate with the Messages API; see the module docstring for the error paths.

        Raises:
            LlmError: as documented above; in-band errors end with ``finish{error}`` instead.
        """
        config = self.config
        model = options.model or ""
        body = build_body(
            options,
            max_tokens_default=config.max_tokens_default,
            budgets=config.budgets_for(model),
            default_effort=config.default_effort_for(model),
            structured_outputs=config.structured_outputs_for(model),
        )
        translator = Translator(model=options.model)
        client = self._http()
        request = client.build_request(
            "POST",
            self._messages_url,
            content=body,
            headers={"content-type": "application/json", "accept": "text/event-stream"},
        )
        abort = options.abort
        async with open_sse_stream(client, request, abort=abort, provider=PROVIDER, classifier=classifier) as events:
            translator.request_id = events.request_id
            async for event in events:
                if event.incomplete:
                    try:
                        chunks = translator.feed(event.event, event.data)
                    except LlmError as exc:  # the last event was cut by EOF: a network fault
                        raise translator.eof_error() from exc
                else:
                    chunks = translator.feed(event.event, event.data)
                for chunk in chunks:
                    yield chunk
                if translator.done:
                    await _drain(events)
                    return
            if events.aborted:
                reason = abort.reason if abort is not None and abort.reason else "aborted by the caller"
                for chunk in translator.abort(reason):
                    yield chunk
                return
        raise translator.eof_error()

    def resolve_model(self, model: str) -> ModelInfo:
        """Describe ``model``: configured token limits and the thinking effort ids (``off``
        first, then the budgets in increasing order). Any model id is accepted (the API
        decides)."""
        config = self.config
        budgets = config.budgets_for(model)
        efforts = ["off", *sorted(budgets, key=budgets.__getitem__)] if budgets else None
        spec = config.model_spec(model)
        return ModelInfo(
            model=model,
            context_window=spec.context_window if spec is not None else None,
            max_output_tokens=spec.max_output_tokens if spec is not None else None,
            reasoning_efforts=efforts,
            default_effort=config.default_effort_for(model) if efforts else None,
        )

    async def list_models(self) -> list[ModelInfo]:
        """``GET /v1/models`` (all pages), merged with the configured static facts.

        Raises:
            LlmError: HTTP errors mapped like :meth:`stream`'s; ``PROTOCOL`` for a body that is
                not a model list; ``TIMEOUT`` / ``NETWORK`` for transport faults.
        """
        import httpx
        import msgspec

        client = self._http()
        models: list[ModelInfo] = []
        params: dict[str, str | int] = {"limit": _MODELS_PAGE}
        while True:
            try:
                response = await client.get(self._models_url, params=params)
            except httpx.HTTPError as exc:
                raise error_from_exception(exc, provider=PROVIDER) from exc
            if not 200 <= response.status_code <= 299:
                raise error_from_response(
                    response.status_code, response.headers, response.content, provider=PROVIDER, classifier=classifier
                )
            try:
                page = MODELS_DECODER.decode(response.content)
            except msgspec.DecodeError as exc:
                raise LlmError("PROTOCOL", f"unexpected /v1/models response: {exc}", provider=PROVIDER) from exc
            for entry in page.data:
                info = self.resolve_model(entry.id)
                models.append(
                    msgspec.structs.replace(
                        info,
                        context_window=info.context_window or entry.max_input_tokens,
                        max_output_tokens=info.max_output_tokens or entry.max_tokens,
                    )
                )
            if not page.has_more or not page.last_id:
                return models
            params = {"limit": _MODELS_PAGE, "after_id": page.last_id}

    async def aclose(self) -> None:
        """Close the HTTP client (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
