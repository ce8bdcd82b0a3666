"""``OpenAIAdapter``: Chat Completions streaming on the adapter kit (stages only).

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

from typing import TYPE_CHECKING, Any

from harness_core.kit.adapter import HttpAdapter
from harness_core.types import GenerateOptions, ModelInfo
from harness_llm_openai.config import OPENAI_BASE_URL, OpenAIConfig
from harness_llm_openai.errors import classify_http_error
from harness_llm_openai.serialize import RequestSerializer
from harness_llm_openai.translate import ChunkTranslator

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

    from harness_core.http import ErrorDetails
    from harness_core.kit.translator import StreamTranslator

__all__ = ["OpenAIAdapter"]


class OpenAIAdapter(HttpAdapter[OpenAIConfig]):
    """Adapter for OpenAI and OpenAI-compatible Chat Completions servers.

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
