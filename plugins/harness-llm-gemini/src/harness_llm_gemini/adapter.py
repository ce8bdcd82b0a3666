"""The Gemini adapter: serializer + HTTP/SSE transport + translator, glued together.

``POST {base_url}/models/{model}:streamGenerateContent?alt=sse``
(https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent) with the key in
the ``x-goog-api-key`` header (never in the URL) and the configured extra headers. The stages
live in their own modules: :mod:`~harness_llm_gemini.serialize` (request body),
:mod:`harness_core.http` (transport, HTTP error mapping with
:func:`~harness_llm_gemini.errors.classifier`, abort racing, closing),
:mod:`~harness_llm_gemini.translate` (events → chunks).

Error paths:

- **raised** :class:`LlmError`: invalid options (``UNSUPPORTED`` / ``BAD_REQUEST``, before any
  I/O), HTTP status errors (code from the ``google.rpc`` status and details: a bad key is a 400
  with ``API_KEY_INVALID`` → ``AUTH``; ``retry_after`` from ``Retry-After`` or ``RetryInfo``), a
  2xx that is not ``text/event-stream`` (``PROTOCOL``), malformed events (``PROTOCOL``), timeouts
  (``TIMEOUT``), resets and a body that ends before a ``finishReason`` (``NETWORK``);
- **finish{error}**: an in-band ``{"error": …}`` event, and the finish reasons
  ``MALFORMED_FUNCTION_CALL`` / ``UNEXPECTED_TOOL_CALL`` / ``TOO_MANY_TOOL_CALLS``.

Abort: the pending read is abandoned, the response closed, open blocks closed and the stream
ends with ``usage`` (when reported) and ``finish{aborted}``. Cancellation propagates; the
response is closed on every exit path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Final
from urllib.parse import quote

from harness_core.adapter import LlmAdapter
from harness_core.errors import LlmError
from harness_core.http import error_from_exception, error_from_response, make_client, open_sse_stream
from harness_core.types import GenerateOptions, ModelInfo, StreamChunk
from harness_llm_gemini.config import GeminiConfig
from harness_llm_gemini.errors import PROVIDER, classifier
from harness_llm_gemini.serialize import build_body
from harness_llm_gemini.translate import Translator
from harness_llm_gemini.wire import MODELS_DECODER

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

__all__ = ["GeminiAdapter"]

_MODELS_PAGE: Final = 1000
_GENERATE: Final = "generateContent"


def model_path(model: str) -> str:
    """The URL path of ``model`` under the API root: ``models/<id>`` (a full resource name such as
    ``tunedModels/x`` or ``models/gemini-2.5-flash`` is kept), each segment percent-encoded."""
    name = model if "/" in model else f"models/{model}"
    return "/".join(quote(segment, safe="-._~@") for segment in name.split("/"))


class GeminiAdapter(LlmAdapter):
    """Streams the Gemini API into :data:`StreamChunk` (see the module docstring).

    Args:
        config: the plugin config (:class:`~harness_llm_gemini.config.GeminiConfig`).
        transport: an optional ``httpx.AsyncBaseTransport`` (tests, proxies).

    One ``httpx.AsyncClient`` per adapter, created on first use and closed by :meth:`aclose`.
    """

    def __init__(self, config: GeminiConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._root = config.base_url.rstrip("/")

    def _http(self) -> httpx.AsyncClient:
        client = self._client
        if client is None:
            config = self.config
            headers = dict(config.headers)
            if config.api_key is not None:
                headers["x-goog-api-key"] = config.api_key.get_secret_value()
            client = self._client = make_client(
                headers=headers,
                connect_timeout=config.timeout.connect,
                read_timeout=config.timeout.read,
                pool_timeout=config.pool_timeout,
                max_connections=config.max_connections,
                max_keepalive_connections=config.max_connections,
                transport=self._transport,
            )
        return client

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Generate with ``streamGenerateContent``; see the module docstring for the error paths.

        Raises:
            LlmError: as documented above; in-band errors end with ``finish{error}`` instead.
        """
        config = self.config
        model = options.model or ""
        body = build_body(
            options,
            efforts=config.efforts_for(model),
            default_effort=config.default_effort_for(model),
            include_thoughts=config.include_thoughts,
        )
        translator = Translator(model=options.model)
        client = self._http()
        request = client.build_request(
            "POST",
            f"{self._root}/{model_path(model)}:streamGenerateContent",
            params={"alt": "sse"},
            content=body,
            headers={"content-type": "application/json", "accept": "text/event-stream"},
        )
        abort = options.abort
        async with open_sse_stream(client, request, abort=abort, provider=PROVIDER, classifier=classifier) as events:
            translator.request_id = events.request_id
            async for event in events:
                for chunk in translator.feed(event):
                    yield chunk
                if translator.done:
                    return
            if events.aborted:
                reason = abort.reason if abort is not None and abort.reason else "aborted by the caller"
                final = translator.abort(reason)
            else:
                final = translator.end_of_input()
            for chunk in final:
                yield chunk

    def resolve_model(self, model: str) -> ModelInfo:
        """Describe ``model``: configured token limits and the thinking effort ids in the order
        of the configured table. Any model id is accepted (the API decides)."""
        config = self.config
        efforts = config.efforts_for(model)
        spec = config.models.get(model)
        return ModelInfo(
            model=model,
            context_window=spec.context_window if spec is not None else None,
            max_output_tokens=spec.max_output_tokens if spec is not None else None,
            reasoning_efforts=list(efforts) or None,
            default_effort=config.default_effort_for(model) if efforts else None,
        )

    async def list_models(self) -> list[ModelInfo]:
        """``GET {base_url}/models`` (every page, https://ai.google.dev/api/models#method:-models.list):
        the models that support ``generateContent``, by id without the ``models/`` prefix, with
        their token limits (configured facts win) and, for thinking models, the effort ids.

        Raises:
            LlmError: HTTP errors mapped like :meth:`stream`'s; ``PROTOCOL`` for a body that is
                not a model list; ``TIMEOUT`` / ``NETWORK`` for transport faults.
        """
        import httpx
        import msgspec

        client = self._http()
        models: list[ModelInfo] = []
        params: dict[str, str | int] = {"pageSize": _MODELS_PAGE}
        while True:
            try:
                response = await client.get(f"{self._root}/models", params=params)
            except httpx.HTTPError as exc:
                raise error_from_exception(exc, provider=PROVIDER) from exc
            if not 200 <= response.status_code <= 299:
                raise error_from_response(
                    response.status_code, response.headers, response.content, provider=PROVIDER, classifier=classifier
                )
            try:
                page = MODELS_DECODER.decode(response.content)
            except msgspec.DecodeError as exc:
                raise LlmError("PROTOCOL", f"unexpected Gemini /models response: {exc}", provider=PROVIDER) from exc
            for entry in page.models:
                if _GENERATE not in entry.supportedGenerationMethods:
                    continue
                model = entry.name.removeprefix("models/")
                info = self.resolve_model(model)
                models.append(
                    msgspec.structs.replace(
                        info,
                        context_window=info.context_window or entry.inputTokenLimit,
                        max_output_tokens=info.max_output_tokens or entry.outputTokenLimit,
                        reasoning_efforts=info.reasoning_efforts if entry.thinking else None,
                        default_effort=info.default_effort if entry.thinking else None,
                    )
                )
            if not page.nextPageToken:
                return models
            params = {"pageSize": _MODELS_PAGE, "pageToken": page.nextPageToken}

    async def aclose(self) -> None:
        """Close the HTTP client (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
