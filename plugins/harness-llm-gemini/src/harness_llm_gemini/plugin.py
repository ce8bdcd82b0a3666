"""The ``gemini`` plugin: its validated config and adapter registration (the adapter kit's
:class:`~harness_core.kit.HttpProviderPlugin`).

Importing this module is cheap (no httpx): the adapter module loads when the plugin registers
its adapter, so ``harness plugins`` stays fast.

plugins.yaml::

    plugins:
      gemini: {}                                  # GOOGLE_API_KEY / GEMINI_API_KEY from the environment
      gemini:gateway:                             # a gateway speaking the Gemini API
        base_url: https://llm-gateway.example.com/v1beta
        api_key: ${{ env.GATEWAY_KEY }}
        routes: [gemini-gw]
"""

from __future__ import annotations

from harness_core.kit import HttpProviderPlugin
from harness_llm_gemini.config import GeminiConfig

__all__ = ["GeminiPlugin"]


class GeminiPlugin(HttpProviderPlugin[GeminiConfig]):
    """The ``gemini`` plugin: registers one :class:`~harness_llm_gemini.adapter.GeminiAdapter` for
    ``config.routes``, as their stream adapter and their embedder (``batchEmbedContents``). The
    runtime closes the adapter (and its HTTP client) on exit."""

    Config = GeminiConfig
    adapter = "harness_llm_gemini.adapter:GeminiAdapter"
    embeds = True
