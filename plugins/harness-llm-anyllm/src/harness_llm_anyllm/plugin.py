"""The ``anyllm`` plugin: its validated config and adapter registration.

Importing this module is cheap: any-llm (and the provider SDK behind it) is imported by the
adapter on its first request, so ``harness --help``, ``harness plugins`` and runs on other routes
never pay for it. plugins.yaml::

    plugins:
      anyllm:mistral:                  # one instance per provider
        provider: mistral              # an any-llm provider name
        routes: [mistral]              # MISTRAL_API_KEY from the environment

      anyllm:bedrock:
        provider: bedrock
        client_options: {region_name: eu-central-1}
        routes: [bedrock]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_core import hookimpl
from harness_core.kit import RegisterAdapter, RegisterEmbedder
from harness_llm_anyllm.config import AnyLLMConfig, Config, ModelConfig
from harness_llm_anyllm.providers import PROVIDERS

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_anyllm.adapter import AnyLLMAdapter

__all__ = ["AnyLLMConfig", "AnyLLMPlugin", "Config", "ModelConfig"]


class AnyLLMPlugin:
    """The ``anyllm`` plugin: registers one :class:`~harness_llm_anyllm.adapter.AnyLLMAdapter`
    for the configured routes, and as their embedder too when any-llm embeds with the provider
    (``ProviderFacts.embeddings``). The runtime closes the adapter (and the provider client) on
    exit."""

    Config = AnyLLMConfig

    def __init__(self, config: AnyLLMConfig) -> None:
        self.config = config
        self._built: AnyLLMAdapter | None = None

    def make_adapter(self) -> AnyLLMAdapter:
        """Build the adapter (cheap: any-llm loads on the first request)."""
        from harness_llm_anyllm.adapter import AnyLLMAdapter

        return AnyLLMAdapter(self.config)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register the adapter for the configured routes."""
        register(self.config.served_routes, self._shared_adapter())

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        """Register the same adapter object as the routes' embedder where any-llm embeds with
        the provider; otherwise nothing (an embedding request is ``UNSUPPORTED`` naming the route)."""
        if PROVIDERS[self.config.provider].embeddings:
            register(self.config.served_routes, self._shared_adapter())

    def _shared_adapter(self) -> AnyLLMAdapter:
        """The adapter both hooks register (built once)."""
        if self._built is None:
            self._built = self.make_adapter()
        return self._built

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.config.provider!r}, routes={self.config.served_routes!r})"
