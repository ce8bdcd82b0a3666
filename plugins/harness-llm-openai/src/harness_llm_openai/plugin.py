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

from typing import TYPE_CHECKING, Annotated, Final, Literal

import msgspec

from harness_core.config import EnvFallback
from harness_core.hookspecs import RegisterAdapter, hookimpl
from harness_core.secret import Secret

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_llm_openai.adapter import OpenAIAdapter

__all__ = ["OPENAI_BASE_URL", "Config", "ModelConfig", "OpenAIConfig", "OpenAIPlugin", "Timeout"]

OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
"""OpenAI's own endpoint; the only base URL ``OPENAI_API_KEY`` is sent to by default."""


class Timeout(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """HTTP timeouts in seconds: ``connect`` (TCP + TLS), ``read`` (longest silence between two
    reads of the stream; ``None`` waits forever: reasoning models may think for minutes)."""

    connect: float = 10.0
    read: float | None = 600.0


class ModelConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What the config says about one model (returned by ``resolve_model``).

    ``reasoning_efforts`` are the effort ids the model accepts (sent as ``reasoning_effort``;
    ``"off"`` is sent as ``"none"``); token counts are tokens.
    """

    context_window: int | None = None
    max_output_tokens: int | None = None
    reasoning_efforts: list[str] | None = None
    default_effort: str | None = None


class OpenAIConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Config of one ``openai`` plugin instance.

    Fields:
        base_url: the API root including its version path, as the openai SDK takes it
            (``https://api.openai.com/v1``, ``http://localhost:11434/v1``); requests go to
            ``{base_url}/chat/completions`` and ``{base_url}/models``.
        api_key: sent as ``Authorization: Bearer …``; filled from ``OPENAI_API_KEY`` only while
            ``base_url`` is OpenAI's (SPEC §3.10), where a key is required (without one the plugin
            fails naming ``OPENAI_API_KEY``). Another ``base_url`` needs none: ``None`` sends no
            Authorization header (local servers); ``api_key: null`` opts out on OpenAI's too.
        routes: the routes this instance serves.
        models: static model facts by model id (context window, max output, reasoning efforts).
        headers: extra request headers (e.g. ``OpenAI-Project``).
        timeout: connect/read timeouts in seconds.
        max_connections: connection pool size; pool_timeout: seconds to wait for a free one.
        organization: sent as ``OpenAI-Organization``.
        include_usage: send ``stream_options.include_usage`` (turn off for servers rejecting it).
        max_tokens_field: wire name of ``max_tokens``; ``None`` picks ``max_completion_tokens``
            for OpenAI's own endpoint (its reasoning models require it) and ``max_tokens``
            elsewhere.
    """

    base_url: str = OPENAI_BASE_URL
    api_key: Annotated[
        Secret | None, EnvFallback("OPENAI_API_KEY", only_when={"base_url": OPENAI_BASE_URL}, required=True)
    ] = None
    routes: list[str] = msgspec.field(default_factory=lambda: ["openai"])
    models: dict[str, ModelConfig] = msgspec.field(default_factory=dict)
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    timeout: Timeout = msgspec.field(default_factory=Timeout)
    max_connections: int = 20
    pool_timeout: float = 30.0
    organization: str | None = None
    include_usage: bool = True
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None


Config = OpenAIConfig
"""Alias: the plugin's config type (``OpenAIPlugin.Config``)."""


class OpenAIPlugin:
    """The ``openai`` plugin: registers one :class:`~harness_llm_openai.adapter.OpenAIAdapter`
    for ``config.routes``. The runtime closes the adapter (and its HTTP client) on exit."""

    Config = OpenAIConfig

    def __init__(self, config: OpenAIConfig | None = None) -> None:
        self.config = config if config is not None else OpenAIConfig()

    def make_adapter(self) -> OpenAIAdapter:
        """Build the adapter (imports httpx)."""
        from harness_llm_openai.adapter import OpenAIAdapter

        return OpenAIAdapter(self.config)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register the adapter for the configured routes."""
        register(self.config.routes, self.make_adapter())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.config.base_url!r}, routes={self.config.routes!r})"
