"""Configuration of the Anthropic plugin (the ``anthropic:`` entry of ``plugins.yaml``).

The shared HTTP fields (``base_url``, ``api_key``, ``routes``, ``headers``, ``timeout``,
``max_connections``, ``pool_timeout``) come from :class:`harness_core.kit.HttpProviderConfig`.
Unknown fields are rejected.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from harness_core import Secret
from harness_core.kit import HttpProviderConfig, HttpTimeouts, vendor_api_key

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_THINKING_BUDGETS", "AnthropicConfig", "ModelConfig", "Timeout"]

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
"""Anthropic's API host; the adapter appends ``/v1/messages`` and ``/v1/models``."""

DEFAULT_THINKING_BUDGETS: Final[dict[str, int]] = {"low": 1024, "medium": 4096, "high": 16384}
"""Extended-thinking budgets (``budget_tokens``) per effort id; 1024 is the API's minimum."""


Timeout = HttpTimeouts
"""Alias: the ``timeout`` field's type (connect / read / write seconds; Anthropic sends ``ping``
events, so a long silence is a fault)."""


class ModelConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Static facts about one model, reported by ``resolve_model`` (tokens).

    ``thinking_budgets`` replaces the plugin-wide budgets for this model (effort id → budget
    tokens; an empty mapping means the model has no extended thinking). ``default_effort`` is
    used when a request names no ``reasoning_effort``. ``structured_outputs: false`` marks a
    model without native structured outputs (before Claude 4.5): a JSON schema then raises
    ``UNSUPPORTED`` instead of reaching the API.
    """

    context_window: int | None = None
    max_output_tokens: int | None = None
    thinking_budgets: dict[str, int] | None = None
    default_effort: str | None = None
    structured_outputs: bool = True


class AnthropicConfig(HttpProviderConfig, forbid_unknown_fields=True, kw_only=True):
    """Config of one Anthropic plugin instance: the shared HTTP fields plus:

    Fields:
        base_url: API root without ``/v1`` (``https://api.anthropic.com``; a proxy or gateway
            speaking the Messages API otherwise).
        api_key: sent as ``x-api-key``. When omitted and ``base_url`` is Anthropic's own, it is
            taken from the ``ANTHROPIC_API_KEY`` environment variable (never for another host) and
            required: without one the plugin fails naming the variable. Other hosts need none.
        headers: extra HTTP headers sent with every request (e.g. ``anthropic-beta``).
        anthropic_version: the ``anthropic-version`` header.
        max_tokens_default: ``max_tokens`` when a request names none (the API requires it).
        thinking_budgets: effort id → ``thinking.budget_tokens``; ``off`` disables thinking.
        default_effort: effort used when a request names none (``None``: the API default, no
            thinking).
        models: optional static model facts by model id (see :class:`ModelConfig`).
    """

    base_url: str = DEFAULT_BASE_URL
    api_key: Annotated[Secret | None, vendor_api_key("ANTHROPIC_API_KEY", DEFAULT_BASE_URL)] = None
    routes: list[str] = msgspec.field(default_factory=lambda: ["anthropic"])
    anthropic_version: str = "2023-06-01"
    max_tokens_default: int = 4096
    thinking_budgets: dict[str, int] = msgspec.field(default_factory=lambda: dict(DEFAULT_THINKING_BUDGETS))
    default_effort: str | None = None
    models: dict[str, ModelConfig] = msgspec.field(default_factory=dict)

    def model_spec(self, model: str) -> ModelConfig | None:
        """The static :class:`ModelConfig` configured for ``model``, if any."""
        return self.models.get(model)

    def budgets_for(self, model: str) -> dict[str, int]:
        """Effort id → thinking budget for ``model`` (its own table, else the plugin-wide one)."""
        spec = self.models.get(model)
        if spec is not None and spec.thinking_budgets is not None:
            return spec.thinking_budgets
        return self.thinking_budgets

    def structured_outputs_for(self, model: str) -> bool:
        """Whether ``model`` has native structured outputs (true unless configured otherwise)."""
        spec = self.models.get(model)
        return spec is None or spec.structured_outputs

    def default_effort_for(self, model: str) -> str | None:
        """The effort applied when a request for ``model`` names none."""
        spec = self.models.get(model)
        if spec is not None and spec.default_effort is not None:
            return spec.default_effort
        return self.default_effort
