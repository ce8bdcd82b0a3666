"""``DeepSeekAdapter``: the OpenAI adapter with DeepSeek's serializer and translator.

``POST {base_url}/chat/completions`` (https://api-docs.deepseek.com/api/create-chat-completion).
DeepSeek has no embeddings endpoint: the plugin registers no embedder (an embedding request for
its routes is ``UNSUPPORTED`` naming the route) and :meth:`DeepSeekAdapter.embed` refuses too.
HTTP errors map as for OpenAI (402 insufficient balance → ``QUOTA``, 503 → ``OVERLOADED``,
https://api-docs.deepseek.com/quick_start/error_codes); keep-alive comments sent while a request
waits are ignored; an empty stream (closed after only keep-alives) raises ``NETWORK``.
"""

from __future__ import annotations

from harness_core import Embeddings, EmbedOptions, GenerateOptions, LlmError, ModelInfo
from harness_llm_deepseek.config import DeepSeekConfig
from harness_llm_deepseek.serialize import DeepSeekSerializer
from harness_llm_deepseek.translate import DeepSeekTranslator
from harness_llm_openai.adapter import OpenAIAdapter

__all__ = ["DeepSeekAdapter"]


class DeepSeekAdapter(OpenAIAdapter):
    """Adapter for DeepSeek's API (see :class:`~harness_llm_openai.adapter.OpenAIAdapter`).

    Args:
        config: the plugin's validated :class:`~harness_llm_deepseek.config.DeepSeekConfig`.
        transport: an httpx transport for the client (tests; default: the network).
    """

    config: DeepSeekConfig
    provider_name = "deepseek"
    gen_ai_provider_name = "deepseek"  # whatever the base_url: DeepSeek's API (a config may say another)

    def make_serializer(self) -> DeepSeekSerializer:
        """DeepSeek's serializer (``max_tokens``, thinking policy from the config)."""
        return DeepSeekSerializer(
            self.config,
            include_usage=self.config.include_usage,
            max_tokens_field=self.config.max_tokens_field or "max_tokens",
        )

    def make_translator(self, options: GenerateOptions, request_id: str | None) -> DeepSeekTranslator:
        """DeepSeek's translator (cache-hit usage, ``insufficient_system_resource``)."""
        return DeepSeekTranslator(request_id=request_id)

    async def embed(self, options: EmbedOptions) -> Embeddings:
        """DeepSeek serves no embeddings (https://api-docs.deepseek.com/api/deepseek-api).

        Raises:
            LlmError: ``UNSUPPORTED`` naming the provider, always, before any I/O.
        """
        raise LlmError("UNSUPPORTED", "DeepSeek has no embeddings endpoint", provider=self.provider)

    async def list_embedding_models(self) -> list[ModelInfo]:
        """None: DeepSeek serves no embeddings."""
        return []
