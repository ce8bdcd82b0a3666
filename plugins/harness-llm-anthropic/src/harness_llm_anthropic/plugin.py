"""The ``anthropic`` plugin: its validated config and adapter registration.

Importing this module is cheap (no httpx): the adapter module loads when the plugin registers
its adapter, so ``harness plugins`` stays fast.

plugins.yaml::

    plugins:
      anthropic: {}                               # ANTHROPIC_API_KEY from the environment
      anthropic:gateway:                          # a gateway speaking the Messages API
        base_url: https://llm-gateway.example.com
        api_key: ${{ env.GATEWAY_KEY }}
        routes: [claude-gw]
"""

from __future__ import annotations

from harness_core.kit import HttpProviderPlugin
from harness_llm_anthropic.config import AnthropicConfig

__all__ = ["AnthropicPlugin"]


class AnthropicPlugin(HttpProviderPlugin[AnthropicConfig]):
    """The ``anthropic`` plugin: registers one :class:`~harness_llm_anthropic.adapter.AnthropicAdapter`
    for ``config.routes``. The runtime closes the adapter (and its HTTP client) on exit."""

    Config = AnthropicConfig
    adapter = "harness_llm_anthropic.adapter:AnthropicAdapter"
