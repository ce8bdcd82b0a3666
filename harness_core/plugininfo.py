"""Plain records shared by the loader and the runtime: what was loaded, what failed, defaults; and
the start policy (docs/loader.md): which failures stop a start (:func:`stopping_failures`) and
which only make their routes unavailable (:func:`adapter_failures`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec

from harness_core.types import _deprecated_provider, _RouteKeyword

__all__ = [
    "MIDDLEWARE_HOOKS",
    "REPORTED",
    "Defaults",
    "LoadedPlugin",
    "PluginFailure",
    "adapter_failures",
    "failed_owner",
    "plugin_kind",
    "plugin_name",
    "stopping_failures",
]

REPORTED = "harness_reported"
"""Attribute set on a log record whose failure is also a :class:`PluginFailure` the caller shows
(the CLI drops such records unless ``-v`` asks for the traceback, so each failure is shown once)."""


MIDDLEWARE_HOOKS = ("llm_stream", "llm_tool_call", "llm_embed", "llm_count_tokens")
"""The hooks that make a plugin a middleware: it wraps streams, tool calls, embeddings or counts."""

_KINDS = (
    ("middleware", MIDDLEWARE_HOOKS),
    ("adapter", ("register_adapter", "register_embedder")),
    ("tools", ("register_tools", "register_tool_source")),
)


def plugin_kind(target: object) -> str:
    """What the plugin ``target`` (its entry point's class or object) is, for ``harness plugins``:
    the kinds of the hooks it implements, joined by ``+`` in this order: ``middleware`` (a hook
    of :data:`MIDDLEWARE_HOOKS`), ``adapter`` (``register_adapter`` / ``register_embedder``),
    ``tools`` (``register_tools`` / ``register_tool_source``), e.g. ``middleware+adapter`` for a
    pool that also serves routes; ``settings`` for a plugin with none of them, whose config a
    command reads (the gateway's entry: ``harness serve``)."""
    kinds = [kind for kind, hooks in _KINDS if any(callable(getattr(target, hook, None)) for hook in hooks)]
    return "+".join(kinds) or "settings"


def plugin_name(key: str) -> str:
    """The entry-point name of the plugins.yaml key ``key``: the part before ``:``
    (``"openai:groq"`` → ``"openai"``, ``"mock"`` → ``"mock"``)."""
    return key.partition(":")[0]


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

    def unavailable_note(self) -> str:
        """One line (no ``warning:`` prefix) saying that this adapter plugin's routes are
        unavailable and why, e.g. ``plugin 'openai' cannot be used: no API key: … (plugins.yaml:3,
        field 'api_key'); its routes ('openai') are unavailable``: the loader's located message
        (it names the plugin), or for a failure at start (stage ``register``) ``plugin 'KEY' failed
        to start: MESSAGE``. The routes are named when known. What ``harness run`` and
        ``harness serve`` warn at start."""
        text = f"plugin {self.key!r} failed to start: {self.message}" if self.stage == "register" else self.message
        routes = f" ({', '.join(repr(r) for r in self.routes)})" if self.routes else ""
        return f"{text}; its routes{routes} are unavailable"


def stopping_failures(failures: Iterable[PluginFailure]) -> list[PluginFailure]:
    """The failures in ``failures`` (in order) that stop a start: the one owner of "a failed
    middleware stops the start" (docs/loader.md failure policy).

    A failure stops when its plugin fails closed (:attr:`PluginFailure.is_middleware`: a
    middleware, a plugin that serves no adapter such as the gateway's entry, a plugin that could
    not be imported or implements an unknown hook): running without it would drop a policy. Applied
    to a load by :meth:`LoadedConfig.require_complete <harness_core.loader.LoadedConfig.require_complete>`
    (raises :class:`~harness_core.config.ConfigError`) and to a start by the runtime (``async with
    Harness``: raises :class:`~harness_core.errors.LlmError` ``CONFIG``)."""
    return [failure for failure in failures if failure.is_middleware]


def adapter_failures(failures: Iterable[PluginFailure]) -> list[PluginFailure]:
    """The failures in ``failures`` (in order) that do not stop a start (the complement of
    :func:`stopping_failures`): adapter plugins, whose routes are unavailable (``NO_ADAPTER``
    naming the failure) while the other routes work."""
    return [failure for failure in failures if not failure.is_middleware]


def failed_owner(failures: Iterable[PluginFailure], route: str | None) -> PluginFailure | None:
    """The first adapter plugin in ``failures`` whose config says it would serve ``route`` (its
    :attr:`PluginFailure.routes`), ``None`` when none does: the one owner of "this route is
    unavailable because its plugin failed" (the runtime's ``NO_ADAPTER`` errors, the start's
    check of the routes a config names)."""
    if route is None:
        return None
    return next((f for f in adapter_failures(failures) if f.routes is not None and route in f.routes), None)
