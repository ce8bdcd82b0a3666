"""The ``anyllm`` plugin's config: :class:`AnyLLMConfig`, validated against the provider table
(no any-llm import)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from harness_core import EnvFallback, Secret
from harness_core.kit import DEFAULT_MAX_BATCH
from harness_llm_anyllm.providers import PROVIDERS
from harness_llm_openai.config import ModelConfig

__all__ = ["AnyLLMConfig", "Config", "ModelConfig"]

_KEY_FALLBACKS = tuple(
    EnvFallback(facts.env_var, only_when={"provider": name, "base_url": None})
    for name, facts in PROVIDERS.items()
    if facts.env_var is not None
)
"""One fallback per provider: its SDK's key variable, only while ``base_url`` is unset (the
provider's own host), so a vendor's key never travels to another host."""


class AnyLLMConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Config of one ``anyllm`` plugin instance (one provider).

    Fields:
        provider: the any-llm provider name (``mistral``, ``bedrock``, ``openai`` … see the
            README's provider list); one that cannot stream chat completions is refused.
        api_key: the provider's key. Omitted, it is read from the variable the provider's SDK
            documents (``MISTRAL_API_KEY`` …), but only while ``base_url`` is unset; with a
            ``base_url`` and no key, no variable is read (a keyless local server).
        base_url: the API root to use instead of the provider's own (any-llm's ``api_base``).
        routes: the routes this instance serves (default: ``[provider]``).
        models: static model facts by model id (the openai plugin's
            :class:`~harness_llm_openai.plugin.ModelConfig`: context window, reasoning efforts …).
        client_options: keyword arguments for the provider's client, passed to
            ``AnyLLM.create`` as given (``region_name``, ``client_args`` …).
        options: keyword arguments added to every request, as given (the provider's own
            request fields); ``GenerateOptions.provider_options["anyllm"]`` adds per request.
        include_usage: ask OpenAI-wire providers for usage (``stream_options.include_usage``).
        timeout: seconds per request, handed to the provider SDK (``None``: the SDK default).
        max_retries: the provider SDK's own retry count; ``None`` sends 0 where the SDK takes
            one (harness's ``retry`` middleware retries instead) and leaves the rest alone.
        embedding_model: the model of an embedding request that names none, for providers
            any-llm embeds with (``None``: such a request must name its model).
        embed_batch: most inputs per ``aembedding`` call (default 2,048, OpenAI's limit; set
            the provider's own, e.g. 96 for Cohere).
        gen_ai_provider: the GenAI provider telemetry names for these routes
            (``gen_ai.provider.name``); ``None``: the one ``provider`` maps to
            (:func:`~harness_llm_anyllm.providers.gen_ai_provider`).
    """

    provider: str
    api_key: Annotated[Secret | None, *_KEY_FALLBACKS] = None
    base_url: str | None = None
    routes: list[str] | None = None
    models: dict[str, ModelConfig] = msgspec.field(default_factory=dict)
    client_options: dict[str, Any] = msgspec.field(default_factory=dict)
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    include_usage: bool = True
    timeout: float | None = None
    max_retries: int | None = None
    embedding_model: str | None = None
    embed_batch: Annotated[int, msgspec.Meta(ge=1)] = DEFAULT_MAX_BATCH
    gen_ai_provider: Annotated[str, msgspec.Meta(min_length=1)] | None = None

    def __post_init__(self) -> None:
        """Refuse a provider any-llm does not know or cannot stream from.

        Raises:
            ValueError: naming the provider and the known ones (the loader reports it with the
                plugin name and YAML line).
        """
        facts = PROVIDERS.get(self.provider)
        if facts is None:
            known = ", ".join(sorted(PROVIDERS))
            raise ValueError(f"field 'provider': unknown any-llm provider {self.provider!r}; known: {known}")
        if not facts.streaming:
            raise ValueError(f"field 'provider': any-llm cannot stream chat completions from {self.provider!r}")
        if self.embedding_model is not None and not facts.embeddings:
            raise ValueError(f"field 'embedding_model': any-llm cannot embed with {self.provider!r}")
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError(f"field 'max_retries' must be at least 0, got {self.max_retries}")
        if self.routes is None:
            self.routes = [self.provider]  # shown by `harness plugins` like any configured route

    @property
    def served_routes(self) -> list[str]:
        """``routes`` (``[provider]`` when none were configured)."""
        return self.routes if self.routes is not None else [self.provider]


Config = AnyLLMConfig
"""Alias: the plugin's config type (``AnyLLMPlugin.Config``)."""
