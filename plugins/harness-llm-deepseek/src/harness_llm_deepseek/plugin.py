"""The ``deepseek`` plugin: its validated config and adapter registration.

Importing this module is cheap (no httpx). plugins.yaml::

    plugins:
      deepseek:                      # DEEPSEEK_API_KEY from the environment
        thinking: null               # "on" / "off": send DeepSeek's `thinking` field by default
        models:
          deepseek-chat: {reasoning_efforts: ["off", "on"], context_window: 128000}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Final, Literal

import msgspec

from harness_core.config import EnvFallback
from harness_core.hookspecs import RegisterAdapter, hookimpl
from harness_core.secret import Secret
from harness_llm_openai.plugin import ModelConfig, OpenAIConfig

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_deepseek.adapter import DeepSeekAdapter

__all__ = ["DEEPSEEK_BASE_URL", "DeepSeekConfig", "DeepSeekModelConfig", "DeepSeekPlugin", "Thinking"]

DEEPSEEK_BASE_URL: Final = "https://api.deepseek.com"
"""DeepSeek's endpoint; the only base URL ``DEEPSEEK_API_KEY`` is sent to by default."""

Thinking = Literal["on", "off"]
"""Thinking mode: sent as ``"thinking": {"type": "enabled" | "disabled"}``."""


class DeepSeekModelConfig(ModelConfig, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Per-model facts and policy (adds to :class:`~harness_llm_openai.plugin.ModelConfig`).

    Fields:
        thinking: this model's default thinking mode (overrides the plugin-level ``thinking``).
        replay_reasoning: send reasoning back as ``reasoning_content`` on assistant tool-call
            turns (required by DeepSeek's thinking mode); ``False`` for deployments of the older
            ``deepseek-reasoner`` that reject the field; ``None`` = the plugin-level setting.

    ``reasoning_efforts`` (e.g. ``["off", "on"]``) are the ids ``reasoning_effort`` may take:
    ``"off"`` sends ``thinking: disabled``, any other listed id ``thinking: enabled``.
    """

    thinking: Thinking | None = None
    replay_reasoning: bool | None = None


class DeepSeekConfig(OpenAIConfig, forbid_unknown_fields=True, kw_only=True):
    """Config of one ``deepseek`` plugin instance: every field of the openai plugin's
    :class:`~harness_llm_openai.plugin.OpenAIConfig` (``organization`` is not used by DeepSeek),
    with DeepSeek's defaults, plus:

    Fields:
        thinking: default thinking mode for every model (``None`` sends no ``thinking`` field:
            ``deepseek-reasoner`` thinks, ``deepseek-chat`` does not).
        replay_reasoning: default of the per-model ``replay_reasoning`` (``True``).
        models: :class:`DeepSeekModelConfig` by model id.
    """

    base_url: str = DEEPSEEK_BASE_URL
    api_key: Annotated[
        Secret | None, EnvFallback("DEEPSEEK_API_KEY", only_when={"base_url": DEEPSEEK_BASE_URL}, required=True)
    ] = None
    routes: list[str] = msgspec.field(default_factory=lambda: ["deepseek"])
    models: dict[str, DeepSeekModelConfig] = msgspec.field(default_factory=dict)  # type: ignore[assignment] # narrower per-model config
    thinking: Thinking | None = None
    replay_reasoning: bool = True


class DeepSeekPlugin:
    """The ``deepseek`` plugin: registers one :class:`~harness_llm_deepseek.adapter.DeepSeekAdapter`."""

    Config = DeepSeekConfig

    def __init__(self, config: DeepSeekConfig | None = None) -> None:
        self.config = config if config is not None else DeepSeekConfig()

    def make_adapter(self) -> DeepSeekAdapter:
        """Build the adapter (imports httpx)."""
        from harness_llm_deepseek.adapter import DeepSeekAdapter

        return DeepSeekAdapter(self.config)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register the adapter for the configured routes."""
        register(self.config.routes, self.make_adapter())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.config.base_url!r}, routes={self.config.routes!r})"
