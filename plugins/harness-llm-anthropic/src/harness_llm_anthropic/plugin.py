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

from typing import TYPE_CHECKING

from harness_core.hookspecs import RegisterAdapter, hookimpl
from harness_llm_anthropic.config import AnthropicConfig

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_anthropic.adapter import AnthropicAdapter

__all__ = ["AnthropicPlugin"]


class AnthropicPlugin:
    """The ``anthropic`` plugin: registers one :class:`~harness_llm_anthropic.adapter.AnthropicAdapter`
    for ``config.routes``. The runtime closes the adapter (and its HTTP client) on exit."""

    Config = AnthropicConfig

    def __init__(self, config: AnthropicConfig | None = None) -> None:
        self.config = config if config is not None else AnthropicConfig()

    def make_adapter(self) -> AnthropicAdapter:
        """Build the adapter (imports httpx)."""
        from harness_llm_anthropic.adapter import AnthropicAdapter

        return AnthropicAdapter(self.config)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register the adapter for the configured routes."""
        register(self.config.routes, self.make_adapter())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.config.base_url!r}, routes={self.config.routes!r})"
