"""What a load produced: :class:`LoadedConfig` (built plugins, failures, defaults, aliases, lines,
the redactor) and :class:`PluginEntry` (one line of ``harness plugins``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

from harness_core.config import ConfigError, ConfigPath, ConfigProblem, line_for
from harness_core.loader.find import BUILTIN_SOURCE
from harness_core.plugininfo import Defaults, LoadedPlugin, PluginFailure, stopping_failures
from harness_core.routing import mistyped_route, resolve_alias, resolve_target
from harness_core.secret import Redactor

__all__ = ["LoadedConfig", "PluginEntry", "State"]

State = Literal["enabled", "disabled", "failed", "invalid", "installed"]
"""The state of a :class:`PluginEntry`."""


class PluginEntry(msgspec.Struct, kw_only=True):
    """One line of ``harness plugins``: a plugins.yaml entry or an installed, unlisted plugin.

    ``state``: ``enabled`` (imported, config valid, built when instantiation was asked for),
    ``disabled`` (``~key``; never imported), ``failed`` (see ``message``), ``invalid`` (unknown
    name or config problem), ``installed`` (has an entry point, not in plugins.yaml).
    ``routes`` come from the validated config's ``routes`` field when it has one: adapters are
    not started to list them. ``is_middleware`` is ``None`` when unknown (never imported).
    ``kind`` is what its hooks make it (:func:`~harness_core.plugininfo.plugin_kind`:
    ``adapter``, ``middleware``, ``tools``, ``settings`` or a ``+`` of several), ``None`` when
    unknown.
    """

    key: str
    name: str
    state: State
    dist: str | None = None
    version: str | None = None
    is_middleware: bool | None = None
    kind: str | None = None
    routes: list[str] | None = None
    message: str | None = None
    line: int | None = None


class LoadedConfig(msgspec.Struct, kw_only=True):
    """What :func:`~harness_core.loader.load_config` built.

    ``plugins`` are the built instances in plugins.yaml order (first = outermost middleware),
    ``failures`` the plugins that could not be imported or built, ``defaults`` the ``defaults:``
    section, ``path`` the file read (``None`` for the built-in default). ``entries`` describe
    every plugin for ``harness plugins``; ``problems`` is empty unless produced by
    :func:`~harness_core.loader.inspect_config`; ``lines`` maps a document path (``("defaults",
    "route")``) to its 1-based YAML line (see :meth:`line`). :meth:`redact` scrubs every secret
    from text: values substituted from the environment (in plugin configs and ``defaults:``), env
    fallbacks, and every value of a ``Secret``-typed config field, literal ones included. Every
    message the loader produces (problems, entry messages, failures) and every entry's routes are
    redacted. ``aliases`` holds the ``aliases:`` section: a name usable as a model, standing for
    ``route/model`` or a model id (:meth:`resolve_alias`).
    """

    path: Path | None
    plugins: list[LoadedPlugin] = msgspec.field(default_factory=list)
    failures: list[PluginFailure] = msgspec.field(default_factory=list)
    defaults: Defaults = msgspec.field(default_factory=Defaults)
    entries: list[PluginEntry] = msgspec.field(default_factory=list)
    problems: list[ConfigProblem] = msgspec.field(default_factory=list)
    redactor: Redactor = msgspec.field(default_factory=Redactor)
    lines: dict[ConfigPath, int] = msgspec.field(default_factory=dict)
    aliases: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def source(self) -> str:
        """The file name for messages (``<built-in default>`` when no file was found)."""
        return str(self.path) if self.path is not None else BUILTIN_SOURCE

    def resolve_alias(self, route: str | None, model: str | None) -> tuple[str | None, str | None]:
        """``(route, model)`` with a model alias of ``aliases:`` replaced
        (:func:`harness_core.routing.resolve_alias`): ``"route/model"`` sets both (a route given
        explicitly wins), a plain model id only the model. Anything else is returned unchanged."""
        return resolve_alias(self.aliases, route, model)

    def resolve_target(self, route: str | None, model: str | None) -> tuple[str | None, str | None]:
        """``(route, model)`` the command line's ``-r``/``-m`` ask for
        (:func:`harness_core.routing.resolve_target`): an alias replaced; else, without ``-r``, a
        ``route/model`` id whose route an entry of this file names (an enabled plugin's, or a
        failed one's: using it then says why it failed) sets both, as the gateway reads its
        ``model`` field; with ``-r`` the model id is sent as it is."""
        return resolve_target(self.aliases, route, model, self._named_routes())

    def mistyped_route(self, route: str | None, model: str | None) -> str | None:
        """Why ``-m model`` (no ``-r``: ``route`` ``None``) looks like a ``route/model`` id whose
        route is a typo of one this file names, e.g. ``"route 'mokc' is not served (did you mean
        'mock/echo'?)"`` (:func:`harness_core.routing.mistyped_route`, over the routes
        :meth:`resolve_target` reads); ``None`` otherwise. The command line says it after a
        failed request (the id went to the default route as it is)."""
        return mistyped_route(self.aliases, route, model, self._named_routes())

    def _named_routes(self) -> list[str]:
        """The routes an entry names: an enabled plugin's, or a failed one's (using it then says why)."""
        return [name for entry in self.entries if entry.state in ("enabled", "failed") for name in entry.routes or ()]

    def redact(self, text: str) -> str:
        """``text`` with every secret of this configuration replaced by :data:`~harness_core.config.MASK`."""
        return self.redactor(text)

    def line(self, *path: str | int) -> int | None:
        """The YAML line of ``path`` (or of its longest prefix that has one); ``None`` when unknown."""
        return line_for(self.lines, path)

    def require_complete(self) -> LoadedConfig:
        """``self`` when every plugin that enforces policy loaded; else raise :class:`ConfigError`.

        Where docs/loader.md's failure policy (whose one owner is
        :func:`~harness_core.plugininfo.stopping_failures`) is applied to a load, for the commands
        that serve, generate or read and change state (``harness run``, ``chat``, ``models``,
        ``chain``, ``serve``, ``keys``, ``usage``, ``logs``, ``cache``, ``console``,
        :meth:`Harness.from_config <harness_core.runtime.Harness.from_config>`): a failure that
        fails closed (:attr:`PluginFailure.is_middleware
        <harness_core.plugininfo.PluginFailure.is_middleware>`: a middleware, the gateway's entry,
        a plugin that could not be imported) stops them, since running without it would drop a
        policy (a redaction layer, the keys of ``harness serve``) or use the wrong store. An
        adapter plugin's failure is not a problem here: only its routes fail, naming why.
        ``harness plugins`` and ``harness config check`` do not call it: they show every failure.

        Raises:
            ConfigError: one located problem per such failure (file, the plugin's YAML line, the
                plugin; the message is redacted, as every failure message is).
        """
        problems = []
        for failure in stopping_failures(self.failures):
            named, text = f"plugin {failure.key!r}", failure.message
            if not text.startswith(named):  # the runtime's messages do not name the plugin
                text = f"{named} failed at {failure.stage}: {text}"
            problems.append(
                ConfigProblem(
                    message=f"{text} (fail closed: a middleware or policy plugin that failed stops this command)",
                    line=self.lines.get(("plugins", failure.key)),  # none for a plugin the file does not list
                    source=self.source,
                )
            )
        if problems:
            raise ConfigError(problems)
        return self
