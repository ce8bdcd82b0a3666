"""Plain records shared by the loader and the runtime: what was loaded, what failed, defaults."""

from __future__ import annotations

from typing import Literal

import msgspec

from harness_core.types import _deprecated_provider, _RouteKeyword

__all__ = ["REPORTED", "Defaults", "LoadedPlugin", "PluginFailure"]

REPORTED = "harness_reported"
"""Attribute set on a log record whose failure is also a :class:`PluginFailure` the caller shows
(the CLI drops such records unless ``-v`` asks for the traceback, so each failure is shown once)."""


class Defaults(msgspec.Struct, frozen=True, kw_only=True, metaclass=_RouteKeyword):
    """``defaults:`` of plugins.yaml: the route and model used when options leave them ``None``.

    ``route`` is a plugins.yaml entry; ``provider=`` / ``.provider`` are its deprecated old names
    (a ``DeprecationWarning`` naming ``route``), as on :class:`~harness_core.types.GenerateOptions`.
    """

    route: str | None = None
    model: str | None = None

    @property
    def provider(self) -> str | None:
        """Deprecated: the old name of :attr:`route`. Reading it warns (``DeprecationWarning``)."""
        return _deprecated_provider(self)


class LoadedPlugin(msgspec.Struct, frozen=True, kw_only=True):
    """A plugin instance built from plugins.yaml.

    ``key`` is the plugins.yaml key (``"openai:groq"``), ``name`` the entry-point name
    (``"openai"``), ``dist``/``version`` the distribution that provides it.
    """

    key: str
    name: str
    instance: object
    dist: str | None = None
    version: str | None = None


class PluginFailure(msgspec.Struct, frozen=True, kw_only=True):
    """A plugin that could not be imported, built or started.

    ``stage`` says where it failed; ``is_middleware`` decides the failure policy of docs/loader.md:
    true, the plugin fails closed (a middleware, a plugin that serves no adapter such as the
    gateway's entry, a plugin that cannot be imported) and every command that enforces policy
    stops (exit 2, :meth:`LoadedConfig.require_complete <harness_core.loader.LoadedConfig.require_complete>`);
    false, a failed adapter plugin only makes its routes unavailable (``NO_ADAPTER`` naming this
    failure). ``message`` never holds a secret.
    ``routes`` are the routes the plugin's config says it would serve, when known.
    """

    key: str
    name: str
    message: str
    stage: Literal["import", "config", "init", "register"]
    is_middleware: bool
    routes: list[str] | None = None
