"""The plugin class of an HTTP provider, written once: :class:`HttpProviderPlugin`.

A provider package subclasses it with two class attributes::

    class OpenAIPlugin(HttpProviderPlugin[OpenAIConfig]):
        Config = OpenAIConfig
        adapter = "harness_llm_openai.adapter:OpenAIAdapter"

The adapter module is imported only when the plugin registers its adapter, so loading the
plugin (``harness plugins``, config checks) never imports httpx.

A plugin whose adapter also embeds sets ``embeds = True``: the same adapter object is then
registered for the same routes through ``register_embedder`` (docs/embeddings.md), and closed
once by the runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, cast

from harness_core.embedding import EmbeddingAdapter
from harness_core.hookspecs import RegisterAdapter, RegisterEmbedder, hookimpl
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
        embeds: whether the adapter is also an
            :class:`~harness_core.embedding.EmbeddingAdapter` to register for the same routes
            (default ``False``: the routes stream only, and an embedding request for them is
            ``UNSUPPORTED`` naming the route).

    Both hooks register one adapter object, built on first use; the runtime closes it (and its
    HTTP client) when it closes.
    """

    Config: ClassVar[type[HttpProviderConfig]]
    adapter: ClassVar[str]
    embeds: ClassVar[bool] = False

    def __init__(self, config: ConfigT | None = None) -> None:
        self.config: ConfigT = config if config is not None else cast("ConfigT", self.Config())
        self._built: LlmAdapter | None = None

    def _shared_adapter(self) -> LlmAdapter:
        """The adapter both hooks register (built by :meth:`make_adapter` once)."""
        if self._built is None:
            self._built = self.make_adapter()
        return self._built

    def make_adapter(self) -> LlmAdapter:
        """Import the adapter module and build the adapter from :attr:`config`."""
        module, _, name = self.adapter.partition(":")
        adapter_type = getattr(importlib.import_module(module), name)
        return cast("LlmAdapter", adapter_type(self.config))

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register the adapter for the configured routes."""
        register(self.config.routes, self._shared_adapter())

    @hookimpl
    def register_embedder(self, register: RegisterEmbedder) -> None:
        """With :attr:`embeds`, register the same adapter object as the routes' embedder.

        Raises:
            TypeError: :attr:`embeds` is set but the adapter is not an ``EmbeddingAdapter``
                (the runtime reports the plugin as failed, naming this).
        """
        if not self.embeds:
            return
        adapter = self._shared_adapter()
        if not isinstance(adapter, EmbeddingAdapter):
            raise TypeError(
                f"{type(self).__name__}.embeds is set but {type(adapter).__name__} is not an EmbeddingAdapter"
            )
        register(self.config.routes, adapter)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.config.base_url!r}, routes={self.config.routes!r})"
