"""The ``deepseek`` plugin: its validated config and adapter registration.

Importing this module is cheap (no httpx). plugins.yaml::

    plugins:
      deepseek:                      # DEEPSEEK_API_KEY from the environment
        thinking: null               # "on" / "off": send DeepSeek's `thinking` field by default
        models:
          deepseek-chat: {reasoning_efforts: ["off", "on"], context_window: 128000}
"""

from __future__ import annotations

from harness_core.kit import HttpProviderPlugin
from harness_llm_deepseek.config import DEEPSEEK_BASE_URL, DeepSeekConfig, DeepSeekModelConfig, Thinking

__all__ = ["DEEPSEEK_BASE_URL", "DeepSeekConfig", "DeepSeekModelConfig", "DeepSeekPlugin", "Thinking"]


class DeepSeekPlugin(HttpProviderPlugin[DeepSeekConfig]):
    """The ``deepseek`` plugin: registers one :class:`~harness_llm_deepseek.adapter.DeepSeekAdapter`."""

    Config = DeepSeekConfig
    adapter = "harness_llm_deepseek.adapter:DeepSeekAdapter"
