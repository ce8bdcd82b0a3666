"""Configuration of the ``openai`` plugin (the ``openai:`` entries of ``plugins.yaml``).

The shared HTTP fields (``base_url``, ``api_key``, ``routes``, ``headers``, ``timeout``,
``max_connections``, ``pool_timeout``) come from :class:`harness_core.kit.HttpProviderConfig`.
Cheap to import (no httpx).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from harness_core import Secret
from harness_core.kit import DEFAULT_MAX_BATCH, HttpProviderConfig, HttpTimeouts, vendor_api_key

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "DEFAULT_EMBED_BATCH",
    "OPENAI_BASE_URL",
    "Config",
    "ModelConfig",
    "OpenAIConfig",
    "Timeout",
]

OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
"""OpenAI's own endpoint; the only base URL ``OPENAI_API_KEY`` is sent to by default."""

DEFAULT_EMBEDDING_MODEL: Final = "text-embedding-3-small"
"""The ``embedding_model`` default (https://platform.openai.com/docs/guides/embeddings)."""

DEFAULT_EMBED_BATCH: Final = DEFAULT_MAX_BATCH
"""The ``embed_batch`` default: OpenAI's most inputs per request, 2,048
(https://platform.openai.com/docs/api-reference/embeddings/create#embeddings-create-input)."""

Timeout = HttpTimeouts
"""Alias: the ``timeout`` field's type (connect / read / write seconds)."""


class ModelConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What the config says about one model (returned by ``resolve_model``).

    ``reasoning_efforts`` are the effort ids the model accepts (sent as ``reasoning_effort``;
    ``"off"`` is sent as ``"none"``); token counts are tokens.
    """

    context_window: int | None = None
    max_output_tokens: int | None = None
    reasoning_efforts: list[str] | None = None
    default_effort: str | None = None


class OpenAIConfig(HttpProviderConfig, forbid_unknown_fields=True, kw_only=True):
    """Config of one ``openai`` plugin instance: the shared HTTP fields plus:

    Fields:
        base_url: the API root including its version path, as the openai SDK takes it
            (``https://api.openai.com/v1``, ``http://localhost:11434/v1``); requests go to
            ``{base_url}/chat/completions`` (or ``/responses``), ``{base_url}/embeddings`` and
            ``{base_url}/models``.
        api_key: sent as ``Authorization: Bearer …``; filled from ``OPENAI_API_KEY`` only while
            ``base_url`` is OpenAI's (docs/loader.md), where a key is required (without one the
            plugin fails naming ``OPENAI_API_KEY``). Another ``base_url`` needs none: ``None``
            sends no Authorization header (local servers); ``api_key: null`` opts out on OpenAI's
            too.
        models: static model facts by model id (context window, max output, reasoning efforts).
        organization: sent as ``OpenAI-Organization``.
        include_usage: send ``stream_options.include_usage`` (turn off for servers rejecting it).
        max_tokens_field: wire name of ``max_tokens``; ``None`` picks ``max_completion_tokens``
            for OpenAI's own endpoint (its reasoning models require it) and ``max_tokens``
            elsewhere.
        api: ``"chat"`` (Chat Completions, ``{base_url}/chat/completions``) or ``"responses"``
            (the Responses API, ``{base_url}/responses``: reasoning summaries and encrypted
            reasoning replay). One instance speaks one API; give a second instance its own
            ``routes`` to serve both.
        store: Responses only: send ``store: true`` (OpenAI keeps the response). Default
            ``false``, the only mode that keeps no data at OpenAI; reasoning is then replayed
            from its encrypted content.
        reasoning_summary: Responses only: ``reasoning.summary`` sent to reasoning models
            (``auto``, ``concise``, ``detailed``; ``None`` asks for none).
        encrypted_reasoning: Responses only: with ``store: false``, ask reasoning models for
            ``reasoning.encrypted_content`` so the next turn can replay their reasoning.
        reasoning_models: Responses only: model id prefixes treated as reasoning models when
            ``models`` does not describe the id (they get ``reasoning`` and ``include``, and
            accept the efforts ``low``, ``medium``, ``high``).
        embedding_model: the model of an embedding request that names none
            (``POST {base_url}/embeddings``, either ``api``); default ``text-embedding-3-small``.
        embed_batch: most inputs per ``/embeddings`` request (OpenAI takes up to 2,048); bigger
            requests are split and joined in order.
    """

    base_url: str = OPENAI_BASE_URL
    api_key: Annotated[Secret | None, vendor_api_key("OPENAI_API_KEY", OPENAI_BASE_URL)] = None
    routes: list[str] = msgspec.field(default_factory=lambda: ["openai"])
    models: dict[str, ModelConfig] = msgspec.field(default_factory=dict)
    organization: str | None = None
    include_usage: bool = True
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    api: Literal["chat", "responses"] = "chat"
    store: bool = False
    reasoning_summary: Literal["auto", "concise", "detailed"] | None = "auto"
    encrypted_reasoning: bool = True
    reasoning_models: list[str] = msgspec.field(default_factory=lambda: ["o1", "o3", "o4", "gpt-5", "codex-"])
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    embed_batch: Annotated[int, msgspec.Meta(ge=1)] = DEFAULT_EMBED_BATCH


Config = OpenAIConfig
"""Alias: the plugin's config type (``OpenAIPlugin.Config``)."""
