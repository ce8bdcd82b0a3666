"""``OpenAIAdapter``: Chat Completions streaming and embeddings on the adapter kit (stages only).

``POST {base_url}/chat/completions`` with ``stream: true``
(https://platform.openai.com/docs/api-reference/chat/create); the body comes from
:class:`~harness_llm_openai.serialize.RequestSerializer`, the SSE events go through
:class:`~harness_llm_openai.translate.ChunkTranslator`. Transport, HTTP error mapping, abort
racing and response closing are the kit's (:class:`harness_core.kit.HttpAdapter`).

Error paths (``docs/stream-obligations.md``): HTTP errors, non-SSE 2xx bodies, malformed
payloads, resets and EOF before the terminal signal **raise** ``LlmError``; errors the server
reports inside the stream end it with ``finish{error}``. ``options.abort`` stops reading, closes
the response and ends with ``finish{aborted}``; task cancellation propagates after the response
is closed.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from harness_core import EmbeddingAdapter, Embeddings, EmbedOptions, GenerateOptions, LlmError, ModelInfo
from harness_core.kit import HttpAdapter, request_json
from harness_llm_openai.config import OPENAI_BASE_URL, OpenAIConfig
from harness_llm_openai.embed import EMBEDDINGS_PATH, decode_embeddings, encode_embed_request
from harness_llm_openai.errors import classify_http_error
from harness_llm_openai.semconv import provider_for_url
from harness_llm_openai.serialize import RequestSerializer
from harness_llm_openai.translate import ChunkTranslator

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

    from harness_core.http import ErrorDetails
    from harness_core.kit import StreamTranslator

__all__ = ["OpenAIAdapter"]


class OpenAIAdapter(HttpAdapter[OpenAIConfig], EmbeddingAdapter):
    """Adapter for OpenAI and OpenAI-compatible Chat Completions servers, and their embeddings
    (:meth:`embed`, at most ``config.embed_batch`` inputs a request).

    Args:
        config: the plugin's validated :class:`~harness_llm_openai.config.OpenAIConfig`.
        provider: the plugin name, used for ``provider_options`` and on errors.
        transport: an httpx transport for the client (tests; default: the network).

    Subclasses (DeepSeek) override :meth:`make_serializer`, :meth:`make_translator` and
    :meth:`resolve_model`.
    """

    provider_name = "openai"
    stream_path = "/chat/completions"
    wire = "openai-chat"
    models_path = "/models"

    def __init__(
        self, config: OpenAIConfig, *, provider: str | None = None, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        super().__init__(config, provider=provider, transport=transport)
        self.serializer = self.make_serializer()
        self.max_batch = config.embed_batch

    def gen_ai_provider(self, plugin: str) -> str | None:
        """The GenAI provider telemetry names (``gen_ai.provider.name``): the config's
        ``gen_ai_provider``, else :attr:`gen_ai_provider_name` (a subclass's vendor), else the
        one ``base_url``'s host names (:func:`~harness_llm_openai.semconv.provider_for_url`:
        ``openai`` only for OpenAI's own host, ``harness.openai_compatible`` for a host it does
        not know)."""
        return self.config.gen_ai_provider or self.gen_ai_provider_name or provider_for_url(self.config.base_url)

    def auth_headers(self) -> dict[str, str]:
        """``Authorization: Bearer …`` and ``OpenAI-Organization`` when configured."""
        headers = super().auth_headers()
        if self.config.organization:
            headers["openai-organization"] = self.config.organization
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

    def encode_request(self, options: GenerateOptions, info: ModelInfo) -> bytes:
        """The Chat Completions body (:meth:`RequestSerializer.encode`)."""
        return self.serializer.encode(options, info)

    def make_translator(self, options: GenerateOptions, request_id: str | None) -> StreamTranslator:
        """A fresh translator for one response."""
        return ChunkTranslator(provider=self.provider, request_id=request_id)

    def classify_error(self, status: int | None, body: dict[str, Any] | None) -> ErrorDetails | None:
        """OpenAI's refinements (:func:`~harness_llm_openai.errors.classify_http_error`)."""
        return classify_http_error(status, body)

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

    # ------------------------------------------------------------------ EmbeddingAdapter

    async def embed(self, options: EmbedOptions) -> Embeddings:
        """``POST {base_url}/embeddings`` for ``options.inputs`` (at most :attr:`max_batch`).

        Sends ``model`` (``options.model``, else ``config.embedding_model``), ``input``,
        ``dimensions`` when asked and always ``encoding_format: "base64"``; ``input_type`` has
        no OpenAI field and is not sent. Returns one float32 vector per input in input order
        (by the reply's ``index``), the served ``model`` and ``usage.prompt_tokens``.

        Raises:
            LlmError: ``BAD_REQUEST`` naming ``dimensions`` below 1 (before any I/O); an HTTP
                error classified like a stream's (401 ``AUTH``, 429 ``RATE_LIMITED`` / ``QUOTA``
                with ``retry_after``, 5xx ``SERVER`` / ``OVERLOADED``, 400 ``BAD_REQUEST``);
                ``TIMEOUT`` / ``NETWORK``; ``PROTOCOL`` for a reply of another shape
                (:func:`~harness_llm_openai.embed.decode_embeddings`).
        """
        if options.dimensions is not None and options.dimensions < 1:
            raise LlmError(
                "BAD_REQUEST",
                f"dimensions must be at least 1, got {options.dimensions}",
                provider=self.provider,
                field="dimensions",
            )
        model = options.model or self.config.embedding_model
        result = await request_json(
            self.client,
            EMBEDDINGS_PATH,
            partial(decode_embeddings, count=len(options.inputs), provider=self.provider),
            method="POST",
            content=encode_embed_request(options, model),
            provider=self.provider,
            classifier=self.classify_error,
        )
        if result.model is None:
            result.model = model
        return result

    async def list_embedding_models(self) -> list[ModelInfo]:
        """``GET {base_url}/models`` filtered to the ids naming ``embed`` (OpenAI's
        ``text-embedding-*``, Ollama's ``nomic-embed-text`` …), the configured
        ``embedding_model`` first (the list does not say which models embed).

        Raises:
            LlmError: as :meth:`list_models`.
        """
        ids = [info.model for info in await self.list_models()]
        default = self.config.embedding_model
        found = [default, *(model for model in ids if "embed" in model.lower() and model != default)]
        return [ModelInfo(model=model) for model in found]
