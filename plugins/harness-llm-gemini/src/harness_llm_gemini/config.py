"""Configuration of the Gemini plugin (the ``gemini:`` entry of ``plugins.yaml``).

The shared HTTP fields (``base_url``, ``api_key``, ``routes``, ``headers``, ``timeout``,
``max_connections``, ``pool_timeout``) come from the adapter kit's
:class:`~harness_core.kit.HttpProviderConfig`. Unknown fields are rejected.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from harness_core import Secret
from harness_core.kit import HttpProviderConfig, vendor_api_key
from harness_llm_gemini.embed import DEFAULT_EMBEDDING_MODEL, MAX_EMBED_BATCH
from harness_llm_gemini.serialize import DEFAULT_MAX_INLINE_BYTES

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_THINKING_BUDGETS",
    "DEFAULT_THINKING_LEVELS",
    "GeminiConfig",
    "ModelConfig",
]

DEFAULT_BASE_URL: Final = "https://generativelanguage.googleapis.com/v1beta"
"""The Gemini API root; the adapter appends ``/models/{model}:streamGenerateContent?alt=sse``."""

DEFAULT_THINKING_BUDGETS: Final[dict[str, int]] = {"off": 0, "low": 1024, "medium": 8192, "high": 24576}
"""Effort id → ``thinkingConfig.thinkingBudget`` (tokens) for Gemini 2.x models
(https://ai.google.dev/gemini-api/docs/thinking#set-budget); ``0`` turns thinking off (not every
model allows that: the API then answers 400)."""

DEFAULT_THINKING_LEVELS: Final[dict[str, str]] = {"low": "low", "high": "high"}
"""Effort id → ``thinkingConfig.thinkingLevel`` for Gemini 3 models
(https://ai.google.dev/gemini-api/docs/thinking#thinking-levels); Flash models also take
``minimal`` and ``medium``."""

_FLASH_LEVELS: Final[dict[str, str]] = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}


class ModelConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Static facts about one model, reported by ``resolve_model`` (tokens).

    ``efforts`` replaces the family default (effort id → ``thinkingBudget`` tokens as an int, or
    ``thinkingLevel`` as a string; an empty mapping means the model has no thinking control).
    ``default_effort`` is used when a request names no ``reasoning_effort``.
    """

    context_window: int | None = None
    max_output_tokens: int | None = None
    efforts: dict[str, int | str] | None = None
    default_effort: str | None = None


class GeminiConfig(HttpProviderConfig, forbid_unknown_fields=True, kw_only=True):
    """Config of one Gemini plugin instance (the kit's HTTP fields, then Gemini's own).

    Fields:
        base_url: API root including the version (``https://generativelanguage.googleapis.com/v1beta``;
            a gateway speaking the same API otherwise).
        api_key: sent as the ``x-goog-api-key`` header. When omitted and ``base_url`` is
            Google's own, it is taken from ``GOOGLE_API_KEY``, else ``GEMINI_API_KEY`` (as
            Google's SDK does; never for another host) and required: without one the plugin
            fails naming both variables (``api_key: null`` sends none). Other hosts need none.
        routes: the routes this adapter serves (default ``[gemini]``).
        headers, timeout, max_connections, pool_timeout: as the kit defines them.
        thinking_budgets: effort id → ``thinkingBudget`` for Gemini 2.x models.
        thinking_levels: effort id → ``thinkingLevel`` for Gemini 3 Pro models (Flash models
            also get ``minimal`` and ``medium``).
        include_thoughts: ask for thought summaries when thinking is configured (they stream
            as reasoning blocks).
        default_effort: effort used when a request names none (``None``: no ``thinkingConfig``,
            the model's own default).
        models: optional static model facts by model id (see :class:`ModelConfig`).
        max_inline_bytes: the largest file sent inline (bytes; Gemini takes about 20 MB per
            request); a larger one raises ``UNSUPPORTED`` (upload it with the Files API and
            attach its URI).
        unsigned_call_signature: for Gemini 3 models, the signature put on a history turn whose
            function calls carry none (a conversation begun with another model or provider):
            Gemini 3 rejects such a turn with 400, and Google documents this placeholder to skip
            the check (https://ai.google.dev/gemini-api/docs/thought-signatures). ``null``: send
            the calls unsigned.
        embedding_model: the model of an embedding request that names none (default
            ``gemini-embedding-001``; ``batchEmbedContents``).
        embed_batch: most inputs per ``batchEmbedContents`` request (1…100, Gemini's limit);
            bigger requests are split and joined in order.
    """

    base_url: str = DEFAULT_BASE_URL
    api_key: Annotated[
        Secret | None,
        vendor_api_key("GEMINI_API_KEY", DEFAULT_BASE_URL),
        vendor_api_key("GOOGLE_API_KEY", DEFAULT_BASE_URL),
    ] = None
    routes: list[str] = msgspec.field(default_factory=lambda: ["gemini"])
    thinking_budgets: dict[str, int] = msgspec.field(default_factory=lambda: dict(DEFAULT_THINKING_BUDGETS))
    thinking_levels: dict[str, str] = msgspec.field(default_factory=lambda: dict(DEFAULT_THINKING_LEVELS))
    include_thoughts: bool = True
    default_effort: str | None = None
    models: dict[str, ModelConfig] = msgspec.field(default_factory=dict)
    max_inline_bytes: int = DEFAULT_MAX_INLINE_BYTES
    unsigned_call_signature: str | None = "skip_thought_signature_validator"
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    embed_batch: Annotated[int, msgspec.Meta(ge=1, le=MAX_EMBED_BATCH)] = MAX_EMBED_BATCH

    @staticmethod
    def is_gemini_3(model: str) -> bool:
        """Whether ``model`` (an id or ``models/<id>``) is of the Gemini 3 family."""
        return model.rsplit("/", 1)[-1].startswith("gemini-3")

    def efforts_for(self, model: str) -> dict[str, int | str]:
        """Effort id → thinking budget or level for ``model``: its own table, else by family
        (``gemini-3…``: levels, Flash with ``minimal``/``medium`` too; others: budgets)."""
        spec = self.models.get(model)
        if spec is not None and spec.efforts is not None:
            return dict(spec.efforts)
        if self.is_gemini_3(model):
            if "flash" in model and self.thinking_levels == DEFAULT_THINKING_LEVELS:
                return dict(_FLASH_LEVELS)
            return dict(self.thinking_levels)
        return dict(self.thinking_budgets)

    def default_effort_for(self, model: str) -> str | None:
        """The effort applied when a request for ``model`` names none."""
        spec = self.models.get(model)
        if spec is not None and spec.default_effort is not None:
            return spec.default_effort
        return self.default_effort
