"""The ``openai`` plugin: its validated config and adapter registration.

Importing this module is cheap (no httpx): the adapter module loads when the plugin registers
its adapter, so ``harness plugins`` stays fast.

plugins.yaml::

    plugins:
      openai: {}                                  # OPENAI_API_KEY from the environment
      openai:groq:                                # another OpenAI-compatible server
        base_url: https://api.groq.com/openai/v1
        api_key: ${{ env.GROQ_API_KEY }}
        routes: [groq]
"""

from __future__ import annotations

from harness_core.kit.plugin import HttpProviderPlugin
from harness_llm_openai.config import OPENAI_BASE_URL, Config, ModelConfig, OpenAIConfig, Timeout

__all__ = ["OPENAI_BASE_URL", "Config", "ModelConfig", "OpenAIConfig", "OpenAIPlugin", "Timeout"]


class OpenAIPlugin(HttpProviderPlugin[OpenAIConfig]):
    """The ``openai`` plugin: registers one :class:`~harness_llm_openai.adapter.OpenAIAdapter`
    for ``config.routes``. The runtime closes the adapter (and its HTTP client) on exit."""

    Config = OpenAIConfig
    adapter = "harness_llm_openai.adapter:OpenAIAdapter"
