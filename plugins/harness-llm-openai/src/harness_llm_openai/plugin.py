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
      openai:responses:                           # the Responses API beside Chat Completions
        api: responses
        routes: [openai-responses]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness_core.kit import HttpProviderPlugin
from harness_llm_openai.config import OPENAI_BASE_URL, Config, ModelConfig, OpenAIConfig, Timeout

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core import LlmAdapter

__all__ = ["OPENAI_BASE_URL", "Config", "ModelConfig", "OpenAIConfig", "OpenAIPlugin", "Timeout"]


class OpenAIPlugin(HttpProviderPlugin[OpenAIConfig]):
    """The ``openai`` plugin: registers one :class:`~harness_llm_openai.adapter.OpenAIAdapter`
    (``api: chat``) or :class:`~harness_llm_openai.responses_adapter.ResponsesAdapter`
    (``api: responses``) for ``config.routes``, as their stream adapter and their embedder
    (``POST {base_url}/embeddings`` with either ``api``). The runtime closes the adapter (and
    its HTTP client) on exit."""

    Config = OpenAIConfig
    adapter = "harness_llm_openai.adapter:OpenAIAdapter"
    embeds = True

    def make_adapter(self) -> LlmAdapter:
        """The adapter of the configured ``api`` (its module, and httpx, imported only now)."""
        if self.config.api == "responses":
            from harness_llm_openai.responses_adapter import ResponsesAdapter

            return ResponsesAdapter(self.config)
        return super().make_adapter()
