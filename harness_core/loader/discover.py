"""Entry points: which plugins are installed (group ``harness.plugins``), importing the one an entry
names and telling its kind, and what to say about a name that is no installed plugin."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Final

import msgspec

from harness_core.config import substitute_env
from harness_core.entrypoints import EntryPoint, entry_points
from harness_core.loader.config import PluginEntry
from harness_core.loader.session import Candidate, Session
from harness_core.plugininfo import plugin_kind

__all__ = [
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY_PLUGINS",
    "dist_of",
    "installed_plugins",
    "list_installed",
    "resolve",
    "unknown_plugin_message",
]

ENTRY_POINT_GROUP: Final = "harness.plugins"
"""The entry-point group plugins register in: ``mock = "harness_llm_mock:MockPlugin"``."""

FIRST_PARTY_PLUGINS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "anthropic": "harness-llm-anthropic",
        "anyllm": "harness-llm-anyllm",
        "balance": "harness-middleware",
        "cache": "harness-middleware",
        "deepseek": "harness-llm-deepseek",
        "fallback": "harness-middleware",
        "gateway": "harness-gateway",
        "gemini": "harness-llm-gemini",
        "mcp": "harness-mcp",
        "mock": "harness-llm-mock",
        "openai": "harness-llm-openai",
        "otel": "harness-middleware",
        "prompt-log": "harness-middleware",
        "redact": "harness-middleware",
        "retry": "harness-middleware",
        "timeout": "harness-middleware",
        "trace": "harness-trace",
        "usage": "harness-middleware",
    }
)
"""Plugin name -> the distribution of this project that provides it: an unknown plugin name
that is exactly one of these is answered with ``pip install <distribution>``."""


def installed_plugins() -> dict[str, EntryPoint]:
    """Entry points of the group ``harness.plugins`` by name (first on ``sys.path`` wins).

    Reads distribution metadata only (:mod:`harness_core.entrypoints`); nothing is imported.
    """
    return entry_points(ENTRY_POINT_GROUP)


def dist_of(ep: EntryPoint) -> tuple[str | None, str | None]:
    """``(name, version)`` of the distribution that provides ``ep``."""
    return ep.dist.name, ep.dist.version


def resolve(session: Session, candidate: Candidate, installed: Mapping[str, EntryPoint]) -> None:
    """Import the plugin ``candidate`` names and tell its kind (middleware or adapter, whether it
    fails closed, its ``Config``).

    An unknown name is a problem (:func:`unknown_plugin_message`; ``invalid``). A plugin that
    cannot be imported fails at ``import`` as a middleware (fail closed: its kind is unknown); one
    whose ``Config`` is not a :class:`msgspec.Struct` fails at ``config``."""
    entry = candidate.entry
    ep = installed.get(candidate.name)
    if ep is None:
        session.problem(
            unknown_plugin_message(candidate.name, installed), ("plugins", candidate.key), plugin=candidate.key
        )
        entry.state = "invalid"
        return
    entry.dist, entry.version = dist_of(ep)
    try:
        target = ep.load()
    except Exception as exc:
        # its config is never validated, but the error may quote a value it names (a library
        # reading the variable): every ${{ env.X }} of the entry is secret all the same
        substitute_env(candidate.raw, session.environ, session.loaded.redactor)
        session.fail(
            candidate,
            "import",
            f"cannot be imported ({ep.value}): {type(exc).__name__}: {exc}; "
            "treated as a middleware (fail closed) because its kind is unknown",
            is_middleware=True,
        )
        return
    candidate.target = target
    entry.kind = plugin_kind(target)
    # a middleware by any hook of MIDDLEWARE_HOOKS, as the runtime counts it (one owner: plugin_kind)
    entry.is_middleware = "middleware" in entry.kind.split("+")
    # only a plugin that serves adapters and no middleware may fail alone: the gateway's entry
    # (no hooks: it configures `harness serve`) or a plugin of unknown kind fails closed
    candidate.fails_closed = entry.is_middleware or not callable(getattr(target, "register_adapter", None))
    config_type = getattr(target, "Config", None) if isinstance(target, type) else None
    if config_type is not None and not (isinstance(config_type, type) and issubclass(config_type, msgspec.Struct)):
        session.fail(candidate, "config", "its `Config` is not a msgspec.Struct (a bug in the plugin)")
        return
    candidate.config_type = config_type


def list_installed(session: Session, installed: Mapping[str, EntryPoint]) -> None:
    """Complete ``session.loaded.entries`` for ``harness plugins``: the distribution of every
    disabled entry that is installed, and one ``installed`` entry per installed plugin the
    document does not list (by name)."""
    entries = session.loaded.entries
    for entry in entries:
        if entry.state == "disabled" and entry.name in installed:
            entry.dist, entry.version = dist_of(installed[entry.name])
    listed = {entry.name for entry in entries}
    for name, ep in sorted(installed.items()):
        if name not in listed:
            dist, version = dist_of(ep)
            entries.append(PluginEntry(key=name, name=name, state="installed", dist=dist, version=version))


def unknown_plugin_message(name: str, installed: Collection[str]) -> str:
    """Why ``name`` names no plugin, and what to do: the closest installed names first
    (:func:`difflib.get_close_matches`); ``pip install`` only for a name that is exactly one of
    :data:`FIRST_PARTY_PLUGINS` (never a guessed distribution name: that would invite installing
    a typosquat); otherwise how to list the installed plugins."""
    import difflib  # only on this error path: kept off the start-up of every command

    lower = name.lower()
    close = [lower] if lower != name and lower in installed else []
    close += [match for match in difflib.get_close_matches(name, sorted(installed), n=3) if match not in close]
    names = ", ".join(sorted(installed)) or "none"
    message = f"unknown plugin {name!r}: no installed plugin is named {name!r} (installed: {names})."
    case = " (plugin names are case-sensitive)" if lower != name else ""
    if close:
        message += f" Did you mean {' or '.join(repr(match) for match in close)}?{case}"
    first_party = FIRST_PARTY_PLUGINS.get(name) or FIRST_PARTY_PLUGINS.get(lower)
    if first_party is not None and lower not in installed:
        message += f" {lower!r} is a plugin of the distribution {first_party}: pip install {first_party}{case}"
    elif not close:
        message += " `harness plugins` lists the installed plugins and their names."
    return message
