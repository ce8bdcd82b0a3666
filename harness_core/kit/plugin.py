"""The plugin class of an HTTP provider, written once: :class:`HttpProviderPlugin`.

A provider package subclasses it with two class attributes::

    class OpenAIPlugin(HttpProviderPlugin[OpenAIConfig]):
        Config = OpenAIConfig
        adapter = "harness_llm_openai.adapter:OpenAIAdapter"

The adapter module is imported only when the plugin registers its adapter, so loading the
plugin (``harness plugins``, config checks) never imports httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, cast

from harness_core.hookspecs import RegisterAdapter, hookimpl
from harness_core.kit.config import HttpProviderConfig

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.adapter import LlmAdapter

__all__ = ["HttpProviderPlugin"]

ConfigT = TypeVar("ConfigT", bound=HttpProviderConfig)


class HttpProviderPlugin(Generic[ConfigT]):
    """Registers one adapter, built from the validated config, for ``config.routes``.

    Class attributes (set by the subclass):
        Config: the config struct type the loader validates the ``plugins.yaml`` entry against.
        adapter: ``"module:Class"`` of the adapter; the class is called as ``Class(config)``.

    The runtime closes the adapter (and its HTTP client) when it closes.
    """

    Config: ClassVar[type[HttpProviderConfig]]
    adapter: ClassVar[str]

    def __init__(self, config: ConfigT | None = None) -> None:
        self.config: ConfigT = config if config is not None else cast("ConfigT", self.Config())

    def make_adapter(self) -> LlmAdapter:
        """Import the adapter module and build the adapter from :attr:`config`."""
        module, _, name = self.adapter.partition(":")
        adapter_type = getattr(importlib.import_module(module), name)
        return cast("LlmAdapter", adapter_type(self.config))

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register the adapter for the configured routes."""
        register(self.config.routes, self.make_adapter())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.config.base_url!r}, routes={self.config.routes!r})"
