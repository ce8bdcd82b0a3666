"""The ``gemini`` plugin: its validated config and adapter registration.

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

from typing import TYPE_CHECKING

from harness_core.hookspecs import RegisterAdapter, hookimpl
from harness_llm_gemini.config import GeminiConfig

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_gemini.adapter import GeminiAdapter

__all__ = ["GeminiPlugin"]


class GeminiPlugin:
    """The ``gemini`` plugin: registers one :class:`~harness_llm_gemini.adapter.GeminiAdapter` for
    ``config.routes``. The runtime closes the adapter (and its HTTP client) on exit."""

    Config = GeminiConfig

    def __init__(self, config: GeminiConfig | None = None) -> None:
        self.config = config if config is not None else GeminiConfig()

    def make_adapter(self) -> GeminiAdapter:
        """Build the adapter (imports httpx)."""
        from harness_llm_gemini.adapter import GeminiAdapter

        return GeminiAdapter(self.config)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register the adapter for the configured routes."""
        register(self.config.routes, self.make_adapter())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.config.base_url!r}, routes={self.config.routes!r})"
