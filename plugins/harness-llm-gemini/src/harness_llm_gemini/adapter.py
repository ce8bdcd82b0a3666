"""The Gemini adapter: serializer + HTTP/SSE transport + translator, glued together.

``POST {base_url}/models/{model}:streamGenerateContent?alt=sse``
(https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent) with the key in
the ``x-goog-api-key`` header (never in the URL) and the configured extra headers. Built on the
adapter kit (:class:`~harness_core.kit.HttpAdapter`: client, stream loop, abort racing, closing,
HTTP error mapping); the Gemini stages live in their own modules:
:mod:`~harness_llm_gemini.serialize` (request body), :mod:`~harness_llm_gemini.errors` (error
classifier), :mod:`~harness_llm_gemini.translate` (events → chunks).

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

from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Final
from urllib.parse import quote, urlsplit

import msgspec

from harness_core import EmbeddingAdapter, Embeddings, EmbedOptions, GenerateOptions, LlmError, ModelInfo
from harness_core.kit import HttpAdapter, request_json
from harness_llm_gemini.config import GeminiConfig
from harness_llm_gemini.embed import decode_embeddings, encode_embed_request
from harness_llm_gemini.errors import PROVIDER, classifier
from harness_llm_gemini.serialize import build_body
from harness_llm_gemini.translate import Translator
from harness_llm_gemini.wire import MODELS_DECODER, WireModel, WireModelList

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

    from harness_core.http import ErrorDetails

__all__ = ["GeminiAdapter", "model_path"]

_MODELS_PAGE: Final = 1000


class _Counted(msgspec.Struct, rename="camel"):
    total_tokens: int


_COUNT_DECODER: Final = msgspec.json.Decoder(_Counted)
_GENERATE: Final = "generateContent"
_EMBED: Final = "embedContent"


def model_path(model: str) -> str:
    """The URL path of ``model`` under the API root: ``models/<id>`` (a full resource name such as
    ``tunedModels/x`` or ``models/gemini-2.5-flash`` is kept), each segment percent-encoded."""
    name = model if "/" in model else f"models/{model}"
    return "/".join(quote(segment, safe="-._~@") for segment in name.split("/"))


class GeminiAdapter(HttpAdapter[GeminiConfig], EmbeddingAdapter):
    """Streams the Gemini API into :data:`~harness_core.types.StreamChunk` and embeds through
    ``batchEmbedContents`` (see the module docstring and :meth:`embed`).
    ``GeminiAdapter(config, transport=…)`` as every kit adapter."""

    provider_name: ClassVar[str] = PROVIDER
    gen_ai_provider_name: ClassVar[str | None] = "gcp.gemini"
    models_path: ClassVar[str | None] = "/models"
    wire: ClassVar[str | None] = "gemini"

    def gen_ai_provider(self, plugin: str) -> str | None:
        """The GenAI provider telemetry names (``gen_ai.provider.name``): the config's
        ``gen_ai_provider``, else ``gcp.vertex_ai`` for a ``base_url`` on Vertex AI's hosts
        (``aiplatform.googleapis.com``, ``{region}-aiplatform.googleapis.com``: the same
        ``models/{model}:streamGenerateContent`` paths under a ``…/publishers/google`` root),
        else ``gcp.gemini`` (the Gemini API, or a gateway speaking it)."""
        if self.config.gen_ai_provider:
            return self.config.gen_ai_provider
        host = (urlsplit(self.config.base_url).hostname or "").lower()
        return "gcp.vertex_ai" if host.endswith("aiplatform.googleapis.com") else "gcp.gemini"

    def __init__(
        self, config: GeminiConfig, *, provider: str | None = None, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        super().__init__(config, provider=provider, transport=transport)
        self.max_batch = config.embed_batch

    async def embed(self, options: EmbedOptions) -> Embeddings:
        """``POST /{model_path}:batchEmbedContents``
        (https://ai.google.dev/api/embeddings#method:-models.batchembedcontents) for
        ``options.inputs`` (at most :attr:`max_batch`), with ``options.model`` or
        ``config.embedding_model``, ``taskType`` from ``input_type`` and
        ``outputDimensionality`` from ``dimensions``. Returns one float32 vector per input, in
        order; Gemini reports no usage (``usage`` ``None``).

        Raises:
            LlmError: ``BAD_REQUEST`` naming ``dimensions`` below 1 (before any I/O); HTTP errors
                classified like :meth:`stream`'s (a bad key ``AUTH``, 429 ``RATE_LIMITED`` with
                ``retry_after``, 5xx ``SERVER`` / ``OVERLOADED``); ``TIMEOUT`` / ``NETWORK``;
                ``PROTOCOL`` for a reply of another shape.
        """
        if options.dimensions is not None and options.dimensions < 1:
            raise LlmError(
                "BAD_REQUEST",
                f"dimensions must be at least 1, got {options.dimensions}",
                provider=self.provider,
                field="dimensions",
            )
        model = options.model or self.config.embedding_model
        path = model_path(model)
        result = await request_json(
            self.client,
            f"/{path}:batchEmbedContents",
            partial(decode_embeddings, count=len(options.inputs), provider=self.provider),
            method="POST",
            content=encode_embed_request(options, path),
            provider=self.provider,
            classifier=self.classify_error,
        )
        result.model = model
        return result

    async def list_embedding_models(self) -> list[ModelInfo]:
        """``GET {base_url}/models``, every page: the models that support ``embedContent``, by id
        without the ``models/`` prefix.

        Raises:
            LlmError: as :meth:`list_models`.
        """
        return [
            ModelInfo(model=entry.name.removeprefix("models/"))
            for entry in await self._model_entries()
            if _EMBED in entry.supportedGenerationMethods
        ]

    async def count_tokens(self, options: GenerateOptions) -> int:
        """``POST /{model_path}:countTokens`` (https://ai.google.dev/api/tokens) with the whole
        ``generateContent`` body as ``generateContentRequest`` (system instruction and tools
        counted too); returns ``totalTokens``.

        Raises:
            LlmError: ``BAD_REQUEST`` without a model and the serializer's errors, before any I/O;
                HTTP errors mapped like :meth:`stream`'s; ``PROTOCOL`` for a body without an
                integer ``totalTokens``.
        """
        if not options.model:
            raise LlmError("BAD_REQUEST", "options.model is required", provider=self.provider)
        path = model_path(options.model)
        body = msgspec.json.decode(self.encode_request(options, self.resolve_model(options.model)))
        counted = await request_json(
            self.client,
            f"/{path}:countTokens",
            _COUNT_DECODER.decode,
            method="POST",
            content=msgspec.json.encode({"generateContentRequest": {"model": path, **body}}),
            provider=self.provider,
            classifier=self.classify_error,
        )
        return counted.total_tokens

    def request_path(self, options: GenerateOptions) -> str:
        """``/{model_path}:streamGenerateContent?alt=sse`` (always SSE: without ``alt=sse`` the
        endpoint streams one JSON array)."""
        return f"/{model_path(options.model or '')}:streamGenerateContent?alt=sse"

    def auth_headers(self) -> dict[str, str]:
        """``x-goog-api-key`` (the key never goes into the URL); none without a key."""
        key = self.config.api_key
        return {} if key is None else {"x-goog-api-key": key.get_secret_value()}

    def encode_request(self, options: GenerateOptions, info: ModelInfo) -> bytes:
        """The ``generateContent`` body (:func:`~harness_llm_gemini.serialize.build_body`) with the
        model's effort table, default effort and ``include_thoughts``."""
        config = self.config
        model = info.model
        return build_body(
            options,
            efforts=config.efforts_for(model),
            default_effort=config.default_effort_for(model),
            include_thoughts=config.include_thoughts,
            max_inline_bytes=config.max_inline_bytes,
            unsigned_call_signature=config.unsigned_call_signature if config.is_gemini_3(model) else None,
        )

    def make_translator(self, options: GenerateOptions, request_id: str | None) -> Translator:
        """A :class:`~harness_llm_gemini.translate.Translator` tagged with the requested model."""
        return Translator(model=options.model, request_id=request_id)

    def classify_error(self, status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
        """:func:`harness_llm_gemini.errors.classifier`."""
        return classifier(status, body)

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
        """``GET {base_url}/models``, every page (https://ai.google.dev/api/models#method:-models.list):
        the models that support ``generateContent``, by id without the ``models/`` prefix, with
        their token limits (configured facts win) and, for thinking models, the effort ids.

        Raises:
            LlmError: HTTP errors mapped like :meth:`stream`'s; ``PROTOCOL`` for a body that is
                not a model list; ``TIMEOUT`` / ``NETWORK`` for transport faults.
        """
        models: list[ModelInfo] = []
        for entry in await self._model_entries():
            if _GENERATE not in entry.supportedGenerationMethods:
                continue
            info = self.resolve_model(entry.name.removeprefix("models/"))
            models.append(
                msgspec.structs.replace(
                    info,
                    context_window=info.context_window or entry.inputTokenLimit,
                    max_output_tokens=info.max_output_tokens or entry.outputTokenLimit,
                    reasoning_efforts=info.reasoning_efforts if entry.thinking else None,
                    default_effort=info.default_effort if entry.thinking else None,
                )
            )
        return models

    async def _model_entries(self) -> list[WireModel]:
        """Every entry of ``GET /models``, page after page."""
        entries: list[WireModel] = []
        params: dict[str, str | int] = {"pageSize": _MODELS_PAGE}
        while True:
            page: WireModelList = await request_json(
                self.client,
                "/models",
                MODELS_DECODER.decode,
                params=params,
                provider=self.provider,
                classifier=self.classify_error,
            )
            entries.extend(page.models)
            if not page.nextPageToken:
                return entries
            params = {"pageSize": _MODELS_PAGE, "pageToken": page.nextPageToken}
