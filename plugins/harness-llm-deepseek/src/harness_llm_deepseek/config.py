"""Configuration of the ``deepseek`` plugin (the ``deepseek:`` entries of ``plugins.yaml``).

Every field of the openai plugin's config, with DeepSeek's defaults and thinking policy. Cheap
to import (no httpx).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from harness_core import Secret
from harness_core.kit import vendor_api_key
from harness_llm_openai.config import DEFAULT_EMBED_BATCH, DEFAULT_EMBEDDING_MODEL, ModelConfig, OpenAIConfig

__all__ = ["DEEPSEEK_BASE_URL", "DeepSeekConfig", "DeepSeekModelConfig", "Thinking"]

DEEPSEEK_BASE_URL: Final = "https://api.deepseek.com"
"""DeepSeek's endpoint; the only base URL ``DEEPSEEK_API_KEY`` is sent to by default."""

Thinking = Literal["on", "off"]
"""Thinking mode: sent as ``"thinking": {"type": "enabled" | "disabled"}``."""


class DeepSeekModelConfig(ModelConfig, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Per-model facts and policy (adds to :class:`~harness_llm_openai.config.ModelConfig`).

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
    :class:`~harness_llm_openai.config.OpenAIConfig` (``organization`` is not used by DeepSeek),
    with DeepSeek's defaults, except the embedding fields (DeepSeek has no embeddings endpoint:
    ``embedding_model`` / ``embed_batch`` are refused, and an embedding request for a deepseek
    route is ``UNSUPPORTED`` naming it), plus:

    Fields:
        thinking: default thinking mode for every model (``None`` sends no ``thinking`` field:
            ``deepseek-reasoner`` thinks, ``deepseek-chat`` does not).
        replay_reasoning: default of the per-model ``replay_reasoning`` (``True``).
        models: :class:`DeepSeekModelConfig` by model id.
    """

    base_url: str = DEEPSEEK_BASE_URL
    api_key: Annotated[Secret | None, vendor_api_key("DEEPSEEK_API_KEY", DEEPSEEK_BASE_URL)] = None
    routes: list[str] = msgspec.field(default_factory=lambda: ["deepseek"])
    models: dict[str, DeepSeekModelConfig] = msgspec.field(default_factory=dict)  # type: ignore[assignment] # narrower per-model config
    thinking: Thinking | None = None
    replay_reasoning: bool = True

    def __post_init__(self) -> None:
        """The base checks, then refuse the embedding fields by name.

        Raises:
            ValueError: ``field 'embedding_model': …`` / ``field 'embed_batch': …`` when set
                (DeepSeek serves no embeddings), and the base class's errors.
        """
        super().__post_init__()
        for name, value, default in (
            ("embedding_model", self.embedding_model, DEFAULT_EMBEDDING_MODEL),
            ("embed_batch", self.embed_batch, DEFAULT_EMBED_BATCH),
        ):
            if value != default:
                raise ValueError(f"field {name!r}: DeepSeek has no embeddings endpoint; remove it")
