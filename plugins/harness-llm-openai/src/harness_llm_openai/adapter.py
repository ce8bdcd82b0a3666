"""``OpenAIAdapter``: Chat Completions streaming over httpx (thin: transport + stages).

``POST {base_url}/chat/completions`` with ``stream: true``
(https://platform.openai.com/docs/api-reference/chat/create); the body comes from
:class:`~harness_llm_openai.serialize.RequestSerializer`, the SSE events go through
:class:`~harness_llm_openai.translate.ChunkTranslator`. Transport, HTTP error mapping, abort
racing and response closing are :mod:`harness_core.http`'s.

Error paths (SPEC §3.6): HTTP errors, non-SSE 2xx bodies, malformed payloads, resets and EOF
before the terminal signal **raise** ``LlmError``; errors the server reports inside the stream
end it with ``finish{error}``. ``options.abort`` stops reading, closes the response and ends
with ``finish{aborted}``; task cancellation propagates after the response is closed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from harness_core.adapter import LlmAdapter
from harness_core.errors import LlmError
from harness_core.http import error_from_exception, error_from_response, make_client, open_sse_stream
from harness_core.types import GenerateOptions, ModelInfo, StreamChunk
from harness_llm_openai.errors import classify_http_error
from harness_llm_openai.plugin import OPENAI_BASE_URL, Config
from harness_llm_openai.serialize import RequestSerializer
from harness_llm_openai.translate import ChunkTranslator

__all__ = ["OpenAIAdapter"]


class OpenAIAdapter(LlmAdapter):
    """Adapter for OpenAI and OpenAI-compatible Chat Completions servers.

    Args:
        config: the plugin's validated :class:`~harness_llm_openai.plugin.Config`.
        provider: the plugin name, used for ``provider_options`` and on errors.
        transport: an httpx transport for the client (tests; default: the network).

    One ``httpx.AsyncClient`` per adapter, closed by :meth:`aclose`. Subclasses (DeepSeek)
    override :meth:`make_serializer`, :meth:`make_translator` and :meth:`resolve_model`.
    """

    def __init__(
        self, config: Config, *, provider: str = "openai", transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self.provider = provider
        self.serializer = self.make_serializer()
        self._client = make_client(
            base_url=config.base_url,
            headers=self._headers(),
            provider=provider,
            connect_timeout=config.timeout.connect,
            read_timeout=config.timeout.read,
            pool_timeout=config.pool_timeout,
            max_connections=config.max_connections,
            max_keepalive_connections=config.max_connections,
            transport=transport,
        )

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if self.config.api_key is not None:
            headers["authorization"] = "Bearer " + self.config.api_key.get_secret_value()
        if self.config.organization:
            headers["openai-organization"] = self.config.organization
        headers.update(self.config.headers)
        return headers

    # ------------------------------------------------------------------ stages (overridable)

    def make_serializer(self) -> RequestSerializer:
        """The request serializer for this server."""
        field = self.config.max_tokens_field
        if field is None:
            field = "max_completion_tokens" if self.config.base_url.rstrip("/") == OPENAI_BASE_URL else "max_tokens"
        return RequestSerializer(
            provider=self.provider, include_usage=self.config.include_usage, max_tokens_field=field
        )

    def make_translator(self, request_id: str | None) -> ChunkTranslator:
        """A fresh translator for one response."""
        return ChunkTranslator(provider=self.provider, request_id=request_id)

    # ------------------------------------------------------------------ LlmAdapter

    def resolve_model(self, model: str) -> ModelInfo:
        """Model facts from the ``models`` config; an unlisted model is accepted with none."""
        known = self.config.models.get(model)
        if known is None:
            return ModelInfo(model=model)
        return ModelInfo(
            model=model,
            context_window=known.context_window,
            max_output_tokens=known.max_output_tokens,
            reasoning_efforts=known.reasoning_efforts,
            default_effort=known.default_effort,
        )

    async def list_models(self) -> list[ModelInfo]:
        """``GET {base_url}/models`` (``{"data": [{"id": …}]}``), each resolved by
        :meth:`resolve_model`. Raises the mapped ``LlmError`` on HTTP or network failure and
        ``PROTOCOL`` on an unexpected body."""
        try:
            response = await self._client.get("/models")
        except httpx.HTTPError as exc:
            raise error_from_exception(exc, provider=self.provider) from exc
        if not 200 <= response.status_code <= 299:
            raise error_from_response(
                response.status_code,
                response.headers,
                response.content,
                provider=self.provider,
                classifier=classify_http_error,
            )
        try:
            data: Any = response.json()["data"]
            ids = [str(item["id"]) for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise LlmError("PROTOCOL", f"unexpected /models response: {exc!r}", provider=self.provider) from exc
        return [self.resolve_model(model) for model in ids]

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Stream one completion (see the module docs for error paths).

        Raises:
            LlmError: ``UNSUPPORTED`` / ``BAD_REQUEST`` before any I/O for options the protocol
                cannot honour or no model; HTTP status codes mapped per PROTOCOLS §6;
                ``PROTOCOL``, ``NETWORK``, ``TIMEOUT`` for transport faults.
        """
        if not options.model:
            raise LlmError("BAD_REQUEST", "options.model is required", provider=self.provider)
        body = self.serializer.encode(options, self.resolve_model(options.model))
        abort = options.abort
        if abort is not None and abort.fired:
            for chunk in self.make_translator(None).abort(abort.reason or "aborted"):
                yield chunk
            return
        request = self._client.build_request(
            "POST", "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        async with open_sse_stream(
            self._client, request, abort=abort, provider=self.provider, classifier=classify_http_error
        ) as events:
            translator = self.make_translator(events.request_id)
            async for event in events:
                for chunk in translator.feed_event(event):
                    yield chunk
                if translator.ended:
                    return
            if events.aborted:
                assert abort is not None
                final = translator.abort(abort.reason or "aborted")
            else:
                final = translator.eof()
            for chunk in final:
                yield chunk

    async def aclose(self) -> None:
        """Close the HTTP client and its connections."""
        await self._client.aclose()
