"""The plugin loader: find ``plugins.yaml``, import the plugins it names, validate, build them.

``plugins.yaml`` (docs/loader.md)::

    plugins:
      trace: {path: traces.jsonl}            # entry-point name -> config (listed first = outermost)
      openai:groq:                           # "name:ident": a second instance of plugin "openai"
        api_key: ${{ env.GROQ_API_KEY }}     # env lookup only, never eval; secret from then on
      ~anthropic: {}                         # "~" disables it: never imported
    defaults: {route: mock, model: echo}

Steps, in order: parse (safe YAML, lines kept, explicit tags refused, alias expansion bounded;
``defaults:`` values get ``${{ env.NAME }}`` substitution too) → resolve every enabled name against the
entry-point group ``harness.plugins`` (importing only those) → validate every config
(``${{ env.NAME }}`` substitution, :class:`~harness_core.config.EnvFallback`, ``msgspec.convert``
with unknown fields rejected and YAML strings turned into :class:`~harness_core.Secret` for
``Secret`` fields) → when no problem was found anywhere, build the plugins (``Plugin(config)``).
Problems of every plugin are collected (every problem of each, field by field) and raised together as one
:class:`~harness_core.config.ConfigError`. A plugin that fails to import or to build is recorded
as a :class:`~harness_core.plugininfo.PluginFailure` instead (docs/loader.md failure policy); a plugin
that cannot even be imported counts as a middleware (fail closed). Every message produced here
is scrubbed of secrets (:meth:`LoadedConfig.redact`).
"""

from __future__ import annotations

import os
import re
import types
import typing
import warnings
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

import msgspec

from harness_core.config import (
    ConfigError,
    ConfigPath,
    ConfigProblem,
    EnvFallback,
    EnvProblem,
    format_path,
    line_for,
    parse_yaml,
    substitute_env,
)
from harness_core.entrypoints import EntryPoint, entry_points
from harness_core.plugininfo import Defaults, LoadedPlugin, PluginFailure
from harness_core.routing import resolve_alias
from harness_core.secret import MASK, ConnectionString, Redactor, Secret, connection_secrets, secret_problem, secrets_of

__all__ = [
    "BUILTIN_DEFAULT",
    "CONFIG_ENV",
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY_PLUGINS",
    "Configure",
    "LoadedConfig",
    "PluginEntry",
    "find_config",
    "inspect_config",
    "installed_plugins",
    "load_config",
    "unknown_plugin_message",
]

ENTRY_POINT_GROUP: Final = "harness.plugins"
"""The entry-point group plugins register in: ``mock = "harness_llm_mock:MockPlugin"``."""

CONFIG_ENV: Final = "HARNESS_CONFIG"
"""Environment variable naming the config file (after ``--config``)."""

BUILTIN_DEFAULT: Final = """\
plugins:
  mock: {}
defaults:
  route: mock
  model: echo
"""
"""The configuration used when no ``plugins.yaml`` is found: the mock provider."""

BUILTIN_SOURCE: Final = "<built-in default>"

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

_KEY = re.compile(r"(?P<disabled>~)?(?P<name>[A-Za-z0-9_.-]+)(?::(?P<ident>[A-Za-z0-9_.-]+))?")
_MSGSPEC_PATH = re.compile(r"^(?P<message>.*?)(?: - at `\$(?P<path>.*)`)?$", re.DOTALL)
_PATH_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]|(\[\.\.\.\])")  # msgspec hides mapping keys as [...]
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]*)`")
_NAMED_FIELD = re.compile(r"^field '([A-Za-z_][\w-]*)': ")  # a __post_init__ check naming its field

State = Literal["enabled", "disabled", "failed", "invalid", "installed"]


class PluginEntry(msgspec.Struct, kw_only=True):
    """One line of ``harness plugins``: a plugins.yaml entry or an installed, unlisted plugin.

    ``state``: ``enabled`` (imported, config valid, built when instantiation was asked for),
    ``disabled`` (``~key``; never imported), ``failed`` (see ``message``), ``invalid`` (unknown
    name or config problem), ``installed`` (has an entry point, not in plugins.yaml).
    ``routes`` come from the validated config's ``routes`` field when it has one: adapters are
    not started to list them. ``is_middleware`` is ``None`` when unknown (never imported).
    """

    key: str
    name: str
    state: State
    dist: str | None = None
    version: str | None = None
    is_middleware: bool | None = None
    routes: list[str] | None = None
    message: str | None = None
    line: int | None = None


class LoadedConfig(msgspec.Struct, kw_only=True):
    """What :func:`load_config` built.

    ``plugins`` are the built instances in plugins.yaml order (first = outermost middleware),
    ``failures`` the plugins that could not be imported or built, ``defaults`` the ``defaults:``
    section, ``path`` the file read (``None`` for the built-in default). ``entries`` describe
    every plugin for ``harness plugins``; ``problems`` is empty unless produced by
    :func:`inspect_config`; ``lines`` maps a document path (``("defaults", "provider")``) to its
    1-based YAML line (see :meth:`line`). :meth:`redact` scrubs every secret from text: values
    substituted from the environment (in plugin configs and ``defaults:``), env fallbacks, and
    every value of a ``Secret``-typed config field, literal ones included. Every message the
    loader produces (problems, entry messages, failures) and every entry's routes are redacted.
    ``aliases`` holds the ``aliases:`` section: a name usable as a model, standing for
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

    def redact(self, text: str) -> str:
        """``text`` with every secret of this configuration replaced by :data:`~harness_core.config.MASK`."""
        return self.redactor(text)

    def line(self, *path: str | int) -> int | None:
        """The YAML line of ``path`` (or of its longest prefix that has one); ``None`` when unknown."""
        return line_for(self.lines, path)

    def require_complete(self) -> LoadedConfig:
        """``self`` when every plugin that enforces policy loaded; else raise :class:`ConfigError`.

        The one owner of docs/loader.md's failure policy for the commands that serve, generate or
        read and change state (``harness run``, ``chat``, ``models``, ``chain``, ``serve``, ``keys``,
        ``usage``, ``logs``, ``cache``, ``console``, :meth:`Harness.from_config
        <harness_core.runtime.Harness.from_config>`): a failure that fails closed
        (:attr:`PluginFailure.is_middleware <harness_core.plugininfo.PluginFailure.is_middleware>`:
        a middleware, the gateway's entry, a plugin that could not be imported) stops them, since
        running without it would drop a policy (a redaction layer, the keys of ``harness serve``)
        or use the wrong store. An adapter plugin's failure is not a problem here: only its routes
        fail, naming why. ``harness plugins`` and ``harness config check`` do not call it: they show
        every failure.

        Raises:
            ConfigError: one located problem per such failure (file, the plugin's YAML line, the
                plugin; the message is redacted, as every failure message is).
        """
        problems = []
        for failure in self.failures:
            if not failure.is_middleware:
                continue
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


def find_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Path | None:
    """Locate ``plugins.yaml``; ``None`` means "use :data:`BUILTIN_DEFAULT`".

    Order: ``explicit`` (``--config``), ``$HARNESS_CONFIG``, ``./plugins.yaml``,
    ``./config/plugins.yaml``, ``platformdirs.user_config_dir("harness")/plugins.yaml``. An
    explicit or environment path is returned even when missing (:func:`load_config` reports
    it); the other candidates only when they exist — a directory of that name counts (and
    :func:`load_config` reports it) rather than being skipped silently.
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        return Path(explicit)
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV])
    base = Path.cwd() if cwd is None else Path(cwd)
    import platformdirs

    for candidate in (
        base / "plugins.yaml",
        base / "config" / "plugins.yaml",
        Path(platformdirs.user_config_dir("harness")) / "plugins.yaml",
    ):
        if candidate.exists():
            return candidate
    return None


def installed_plugins() -> dict[str, EntryPoint]:
    """Entry points of the group ``harness.plugins`` by name (first on ``sys.path`` wins).

    Reads distribution metadata only (:mod:`harness_core.entrypoints`); nothing is imported.
    """
    return entry_points(ENTRY_POINT_GROUP)


Configure = Callable[[Mapping[str, msgspec.Struct], Mapping[ConfigPath, int]], Mapping[str, msgspec.Struct]]
"""A caller's per-load config defaults (:func:`load_config` ``configure``): given every enabled
plugin's validated config (by plugins.yaml key) and the document's YAML lines (``("plugins", key,
field)`` present = the file sets that field), the configs to build with instead, by key (keys left
out keep their own). Called once per load, after validation, before any plugin is built."""


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    configure: Configure | None = None,
) -> LoadedConfig:
    """Load, validate and build the plugins of ``path``.

    ``path`` ``None`` searches with :func:`find_config`; when nothing is found the built-in
    default (:data:`BUILTIN_DEFAULT`, the mock provider) is used. ``environ`` replaces
    ``os.environ`` for the search, ``${{ env.NAME }}`` and env fallbacks. ``configure``
    (:data:`Configure`) sets this load's own defaults before the plugins are built (the
    gateway's connection pools): the instances of every other load are untouched.

    Raises:
        ConfigError: every problem found (unreadable file, YAML syntax, duplicate keys, unknown
            top-level key, unknown plugin, invalid config …), every one of each plugin, each with
            plugin, field path and YAML line. Nothing is built when it is raised.
        TypeError: ``configure`` returned a key that is no enabled plugin with a config, or a
            config of another type than the plugin's.

    Import and build failures do not raise: they are in :attr:`LoadedConfig.failures`.
    """
    loaded = inspect_config(path, environ=environ, configure=configure)
    if loaded.problems:
        raise ConfigError(loaded.problems)
    return loaded


def inspect_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    instantiate: bool = True,
    configure: Configure | None = None,
) -> LoadedConfig:
    """Like :func:`load_config` but never raises: problems are in :attr:`LoadedConfig.problems`.

    With ``instantiate=False`` plugins are imported and validated but not built (what
    ``harness plugins`` shows). Used by ``harness plugins`` and ``harness config check``.
    ``configure``: as for :func:`load_config` (applied only when the document has no problem).
    """
    env = os.environ if environ is None else environ
    path = find_config(path, environ=env)
    loaded = LoadedConfig(path=path)
    if path is None:
        text = BUILTIN_DEFAULT
    elif path.is_dir():
        loaded.problems.append(
            ConfigProblem(message="the config path is a directory; expected a YAML file", source=loaded.source)
        )
        return loaded
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            loaded.problems.append(
                ConfigProblem(message=f"cannot read the config file: {type(exc).__name__}: {exc}", source=loaded.source)
            )
            return loaded
    loading = _Loading(loaded, text, env, instantiate)
    loading.configure = configure
    loading.run()
    return loaded


class _Candidate:
    """A plugins.yaml entry on its way to being built."""

    def __init__(self, key: str, name: str, raw: Any, line: int | None) -> None:
        self.key = key
        self.name = name
        self.raw = raw
        self.line = line
        self.entry = PluginEntry(key=key, name=name, state="enabled", line=line)
        self.target: Any = None
        self.config_type: type[msgspec.Struct] | None = None
        self.fails_closed = True
        """Whether a failure of this plugin stops every command that enforces policy
        (:meth:`LoadedConfig.require_complete`): false only for a plain adapter plugin."""
        self.config: msgspec.Struct | None = None


class _Loading:
    """One run of the loader over one document."""

    def __init__(self, loaded: LoadedConfig, text: str, environ: Mapping[str, str], instantiate: bool) -> None:
        self.loaded = loaded
        self.text = text
        self.environ = environ
        self.instantiate = instantiate
        self.lines: dict[ConfigPath, int] = {}
        self.refused_secret = False
        self.configure: Configure | None = None

    def problem(self, message: str, path: ConfigPath, *, plugin: str | None = None, field: str | None = None) -> None:
        self.loaded.problems.append(
            ConfigProblem(
                message=self.loaded.redact(message),
                plugin=plugin,
                field=field,
                line=line_for(self.lines, path),
                source=self.loaded.source,
            )
        )

    def run(self) -> None:
        installed = installed_plugins()
        self.document(installed)
        self.redact_everything()
        for entry in self.loaded.entries:
            if entry.state == "disabled" and entry.name in installed:
                entry.dist, entry.version = _dist_of(installed[entry.name])
        listed = {entry.name for entry in self.loaded.entries}
        for name, ep in sorted(installed.items()):
            if name not in listed:
                dist, version = _dist_of(ep)
                self.loaded.entries.append(
                    PluginEntry(key=name, name=name, state="installed", dist=dist, version=version)
                )

    def redact_everything(self) -> None:
        """Scrub every message again: a secret found late (another plugin's) may be in an earlier one."""
        loaded = self.loaded
        redact = loaded.redact
        loaded.problems = [msgspec.structs.replace(p, message=redact(p.message)) for p in loaded.problems]
        loaded.failures = [msgspec.structs.replace(f, message=redact(f.message)) for f in loaded.failures]
        for entry in loaded.entries:
            if entry.message is not None:
                entry.message = redact(entry.message)
            if entry.routes is not None:
                entry.routes = [redact(route) for route in entry.routes]

    def document(self, installed: dict[str, EntryPoint]) -> None:
        if self.loaded.path is None:  # the built-in default is data already: no YAML parser to import
            data, self.lines, problems = _builtin_document()
        else:
            data, self.lines, problems = parse_yaml(self.text, source=self.loaded.source)
        self.loaded.lines = self.lines
        self.loaded.problems.extend(problems)
        if problems:
            return
        if not isinstance(data, dict):
            self.problem("the document must be a mapping with `plugins:` (and optionally `defaults:`)", ())
            return
        for key in data:
            if key not in ("plugins", "defaults", "aliases"):
                self.problem(f"unknown top-level key {key!r}; expected `plugins`, `defaults` or `aliases`", (key,))
        self.defaults(data.get("defaults"))
        self.aliases(data.get("aliases"))
        candidates = self.entries(data.get("plugins"))
        for candidate in candidates:
            self.resolve(candidate, installed)
        self.check_single_instances(candidates)
        for candidate in candidates:
            if candidate.entry.state == "enabled":
                self.validate(candidate)
        if self.configure is not None and not self.loaded.problems:
            self.reconfigure(self.configure, candidates)
        if self.instantiate and not self.loaded.problems:
            for candidate in candidates:
                if candidate.entry.state == "enabled":
                    self.build(candidate)

    def reconfigure(self, configure: Configure, candidates: list[_Candidate]) -> None:
        """Replace the validated configs with what ``configure`` returns for them (before any build).

        Raises:
            TypeError: a returned key is no enabled plugin with a config, or a returned config is
                not of that plugin's config type.
        """
        configured: dict[str, _Candidate] = {}
        configs: dict[str, msgspec.Struct] = {}
        for candidate in candidates:
            if candidate.entry.state == "enabled" and candidate.config is not None:
                configured[candidate.key], configs[candidate.key] = candidate, candidate.config
        for key, config in configure(MappingProxyType(configs), MappingProxyType(self.lines)).items():
            target = configured.get(key)
            if target is None or type(config) is not target.config_type:
                raise TypeError(f"configure returned {type(config).__name__} for {key!r}: not that plugin's config")
            target.config = config

    def aliases(self, raw: Any) -> None:
        """``aliases: {fast: groq/llama-3.1-8b-instant, smart: gpt-4o}``: name -> ``route/model``
        or a model id of the default route (see :meth:`LoadedConfig.resolve_alias`). Targets are
        sent, so they take ``${{ env.NAME }}`` as plugin fields do (the value becomes a secret);
        names are only looked up, never expanded: an expression in a name is refused."""
        if raw is None:
            return
        if not isinstance(raw, dict):
            self.problem("`aliases` must be a mapping of name: route/model", ("aliases",))
            return
        raw, env_problems = self.substitute(raw, ("aliases",))
        for name, target in raw.items():
            if any(env_problem.path == ("aliases", name) for env_problem in env_problems):
                continue
            if isinstance(name, str) and "${" in name:
                self.problem(
                    f"alias name {name!r} holds `${{`: names are not expanded (only targets take ${{{{ env.NAME }}}})",
                    ("aliases", name),
                    field=format_path(("aliases", name)),
                )
            elif not isinstance(name, str) or not isinstance(target, str) or not target.strip("/"):
                field = format_path(("aliases", name))
                self.problem(
                    f"alias {name!r} must name a 'route/model' or a model id, got {target!r}",
                    ("aliases", name),
                    field=field,
                )
            else:
                self.loaded.aliases[name] = target

    def substitute(self, raw: dict[Any, Any], path: ConfigPath) -> tuple[dict[Any, Any], list[EnvProblem]]:
        """``raw`` (the mapping at ``path``, outside plugin configs) with ``${{ env.NAME }}``
        substituted; each problem is recorded, located, and returned."""
        substituted, env_problems = substitute_env(raw, self.environ, self.loaded.redactor, path)
        for env_problem in env_problems:
            self.problem(env_problem.message, env_problem.path, field=format_path(env_problem.path))
        return substituted, env_problems

    def defaults(self, raw: Any) -> None:
        if raw is None:
            return
        if not isinstance(raw, dict):
            self.problem("`defaults` must be a mapping with `route` and/or `model`", ("defaults",))
            return
        raw, env_problems = self.substitute(raw, ("defaults",))
        values: dict[str, str | None] = {}
        for key, value in raw.items():
            field = format_path(("defaults", key))
            if key not in ("route", "provider", "model"):
                self.problem(f"unknown key {key!r}; expected `route` or `model`", ("defaults", key), field=field)
            elif value is not None and not isinstance(value, str):
                self.problem(f"expected a string, got {type(value).__name__}", ("defaults", key), field=field)
            elif not any(env_problem.path == ("defaults", key) for env_problem in env_problems):
                values[key] = value
        if "provider" in raw:  # the old name of `route`
            where = f"{self.loaded.source}, line {line_for(self.lines, ('defaults', 'provider'))}"
            if "route" in raw:
                message = "give `route` only (`provider` is its deprecated old name)"
                self.problem(message, ("defaults", "provider"), field="defaults.provider")
            else:
                warnings.warn(f"{where}: `defaults.provider` is deprecated: write `defaults.route`", FutureWarning, 2)
                values["route"] = values.get("provider")
            values.pop("provider", None)
        self.loaded.defaults = Defaults(**values)

    def entries(self, raw: Any) -> list[_Candidate]:
        if raw is None:
            return []
        if not isinstance(raw, dict):
            self.problem("`plugins` must be a mapping of plugin name to config", ("plugins",))
            return []
        candidates: list[_Candidate] = []
        seen: dict[str, str] = {}
        for key, value in raw.items():
            path: ConfigPath = ("plugins", key)
            match = _KEY.fullmatch(key) if isinstance(key, str) else None
            if match is None:
                expected = "expected `name`, `name:ident` or `~name`"
                if key is None:
                    message = f"a plugin key is empty or a bare `~` (YAML null); {expected} (`~name` disables a plugin)"
                else:
                    message = f"invalid plugin key {key!r}; {expected}"
                self.problem(message, path)
                continue
            key_str: str = key
            instance = key_str.removeprefix("~")
            name = match.group("name")
            if instance in seen:
                self.problem(f"plugin {instance!r} is listed twice (as {seen[instance]!r} and {key_str!r})", path)
                continue
            seen[instance] = key_str
            line = line_for(self.lines, path)
            if match.group("disabled"):
                self.loaded.entries.append(PluginEntry(key=instance, name=name, state="disabled", line=line))
                continue
            if value is not None and not isinstance(value, dict):
                self.problem(
                    f"the config of a plugin must be a mapping, got {type(value).__name__}", path, plugin=key_str
                )
                continue
            candidate = _Candidate(key_str, name, value or {}, line)
            self.loaded.entries.append(candidate.entry)
            candidates.append(candidate)
        return candidates

    def resolve(self, candidate: _Candidate, installed: dict[str, EntryPoint]) -> None:
        entry = candidate.entry
        ep = installed.get(candidate.name)
        if ep is None:
            self.problem(
                unknown_plugin_message(candidate.name, installed), ("plugins", candidate.key), plugin=candidate.key
            )
            entry.state = "invalid"
            return
        entry.dist, entry.version = _dist_of(ep)
        try:
            target = ep.load()
        except Exception as exc:
            # its config is never validated, but the error may quote a value it names (a library
            # reading the variable): every ${{ env.X }} of the entry is secret all the same
            substitute_env(candidate.raw, self.environ, self.loaded.redactor)
            self.fail(
                candidate,
                "import",
                f"cannot be imported ({ep.value}): {type(exc).__name__}: {exc}; "
                "treated as a middleware (fail closed) because its kind is unknown",
                is_middleware=True,
            )
            return
        candidate.target = target
        entry.is_middleware = callable(getattr(target, "llm_stream", None))
        # only a plugin that serves adapters and no middleware may fail alone: the gateway's entry
        # (no hooks: it configures `harness serve`) or a plugin of unknown kind fails closed
        candidate.fails_closed = entry.is_middleware or not callable(getattr(target, "register_adapter", None))
        config_type = getattr(target, "Config", None) if isinstance(target, type) else None
        if config_type is not None and not (isinstance(config_type, type) and issubclass(config_type, msgspec.Struct)):
            self.fail(candidate, "config", "its `Config` is not a msgspec.Struct (a bug in the plugin)")
            return
        candidate.config_type = config_type

    def check_single_instances(self, candidates: list[_Candidate]) -> None:
        counts: dict[str, int] = {}
        for candidate in candidates:
            if candidate.entry.state == "enabled" and candidate.config_type is None:
                counts[candidate.name] = counts.get(candidate.name, 0) + 1
                if counts[candidate.name] == 2:
                    self.problem(
                        f"plugin {candidate.name!r} has no Config: it runs as a single instance only",
                        ("plugins", candidate.key),
                        plugin=candidate.key,
                    )
                    candidate.entry.state = "invalid"

    def validate(self, candidate: _Candidate) -> None:
        """Validate one plugin's config, reporting every problem in it (not only msgspec's first).

        Mistakes in the file (a malformed ``${{ … }}``, a wrong type, an unknown field) make the
        config invalid; a missing or unusable secret only (:meth:`secret_problem`) makes a
        provider fail alone. When both kinds are found, all are reported as config problems."""
        if candidate.config_type is None:
            if candidate.raw:
                first = next(iter(candidate.raw))
                self.config_problem(candidate, f"plugin {candidate.name!r} takes no configuration", (first,))
            return
        config_type = candidate.config_type
        raw, env_problems = substitute_env(
            candidate.raw, self.environ, self.loaded.redactor, secret_fields=_secret_fields(config_type)
        )
        mistakes: list[tuple[str, ConfigPath]] = [(p.message, p.path) for p in env_problems if not p.unset]
        secrets: list[tuple[str, ConfigPath]] = [(p.message, p.path) for p in env_problems if p.unset]
        skipped = {p.path[0] for p in env_problems if p.path}
        missing = self.apply_env_fallbacks(config_type, raw)
        config = None
        if not env_problems:
            config, found = self.convert(config_type, raw)
        else:  # fields with an environment problem are checked no further (their value is unknown)
            found = self.convert_fields(config_type, raw, skipped)
        for message, where, refused in found:
            (secrets if refused else mistakes).append((message, where))
        for field, variables in missing:
            which = f"variable {variables[0]}" if len(variables) == 1 else "variables " + " or ".join(variables)
            message = (
                f"no API key: set the environment {which} or `{field}:` in the config of plugin "
                f"{candidate.key!r} (or write `{field}: null` to send none)"
            )
            secrets.append((message, (field,)))
        if mistakes:
            for message, where in sorted([*mistakes, *secrets], key=lambda item: self.position(candidate, item[1])):
                self.config_problem(candidate, message, where)
            return
        if secrets:
            self.secret_problem(candidate, secrets, raw)
            return
        assert config is not None  # no problem: the whole config converted
        candidate.config = config
        routes = getattr(config, "routes", None)
        if isinstance(routes, list) and all(isinstance(r, str) for r in routes):
            candidate.entry.routes = [MASK if r in self.loaded.redactor else r for r in routes]

    def position(self, candidate: _Candidate, where: ConfigPath) -> int:
        """Sort key of a problem: its YAML line (problems of one plugin are reported in file order)."""
        return line_for(self.lines, ("plugins", candidate.key, *where)) or 0

    def convert(
        self, config_type: type[msgspec.Struct], raw: dict[str, Any]
    ) -> tuple[msgspec.Struct | None, list[tuple[str, ConfigPath, bool]]]:
        """The config built from ``raw``, or ``None`` and every problem (see :meth:`convert_fields`)."""
        self.refused_secret = False
        try:
            config = msgspec.convert(raw, config_type, dec_hook=self.dec_hook)
        except msgspec.ValidationError as exc:
            first = (*_split_msgspec_error(str(exc)), self.refused_secret)
        else:
            secrets_of(config, self.loaded.redactor)  # a secret inside a plain field (base_url's password)
            return config, []
        # msgspec stops at the first error: look at every field on its own to report them all
        return None, self.convert_fields(config_type, raw, set()) or [first]  # else a cross-field check

    def convert_fields(
        self, config_type: type[msgspec.Struct], raw: dict[str, Any], skipped: set[str | int]
    ) -> list[tuple[str, ConfigPath, bool]]:
        """Every problem of ``raw`` field by field, in the order of ``raw``'s keys (the file's):
        ``(message, path, refused)``,
        ``refused`` for a secret that cannot be sent. Fields in ``skipped`` are not looked at."""
        fields = msgspec.structs.fields(config_type)
        known = {f.encode_name for f in fields}
        found: list[tuple[str, ConfigPath, bool]] = []
        if config_type.__struct_config__.forbid_unknown_fields:
            names = ", ".join(f.encode_name for f in fields) or "none"
            for key in raw:
                if key not in known:
                    found.append((f"Object contains unknown field `{key}` (known fields: {names})", (key,), False))
        for field in fields:
            if field.encode_name in skipped:
                continue
            if field.encode_name not in raw:
                if field.required:
                    found.append((f"Object missing required field `{field.encode_name}`", (), False))
                continue
            found += self.convert_value(field.type, raw[field.encode_name], (field.encode_name,))
        order: dict[str | int, int] = {key: index for index, key in enumerate(raw)}
        return sorted(found, key=lambda problem: order.get(problem[1][0], len(order)) if problem[1] else -1)

    def convert_value(self, type_: Any, value: Any, path: ConfigPath) -> list[tuple[str, ConfigPath, bool]]:
        """Every problem of ``value`` (at ``path``) as a ``type_``: a nested struct given as a
        mapping, and each value of a ``dict[str, Struct]``, is looked at field by field (msgspec
        stops at the first error), so every problem is reported at its own key's line."""
        nested = _struct_of(type_)
        if nested is not None and isinstance(value, dict):
            found = [(m, (*path, *where), r) for m, where, r in self.convert_fields(nested, value, set())]
            if found:
                return found
        items = _struct_values_of(type_)
        if items is not None and isinstance(value, dict):
            found = [
                problem for key, item in value.items() for problem in self.convert_value(items, item, (*path, key))
            ]
            if found:
                return found
        self.refused_secret = False
        try:
            msgspec.convert(value, type_, dec_hook=self.dec_hook)
        except msgspec.ValidationError as exc:
            message, where = _split_msgspec_error(str(exc))
            return [(message, (*path, *where), self.refused_secret)]
        return []

    def dec_hook(self, type_: type, obj: Any) -> Any:
        """``msgspec.convert`` hook: YAML strings become :class:`Secret` for ``Secret`` fields, and
        every such value (literal, from the environment or an env fallback) is secret from then on.
        A value that cannot be sent in a header (:func:`~harness_core.secret.secret_problem`) is
        refused with the reason (never the value)."""
        if type_ is ConnectionString and isinstance(obj, str):  # only a URL's password is secret
            for part in connection_secrets(obj):
                self.loaded.redactor.add(part)
            return ConnectionString(obj)
        if type_ is Secret and isinstance(obj, str):
            self.loaded.redactor.add(obj)
            problem = secret_problem(obj)
            if problem is not None:
                self.refused_secret = True
                raise ValueError(problem)
            return Secret(obj)
        raise TypeError(f"Expected `{getattr(type_, '__name__', type_)}`, got `{type(obj).__name__}`")

    def config_problem(self, candidate: _Candidate, message: str, where: ConfigPath) -> None:
        self.problem(
            message, ("plugins", candidate.key, *where), plugin=candidate.key, field=format_path(where) or None
        )
        candidate.entry.state = "invalid"
        candidate.entry.message = self.loaded.redact(message)

    def secret_problem(
        self, candidate: _Candidate, problems: list[tuple[str, ConfigPath]], raw: dict[str, Any]
    ) -> None:
        """Missing or unusable secrets (``(message, field path)`` each): the config of a plugin that
        fails closed (a middleware, the gateway's entry: see :attr:`_Candidate.fails_closed`) is
        invalid (everything stops: ``harness serve`` never starts without its ``master_key``); a
        provider plugin only fails, so its routes say why when used and the rest works."""
        if candidate.fails_closed:
            for message, where in problems:
                self.config_problem(candidate, message, where)
            return
        reasons = []
        for message, where in problems:
            line = line_for(self.lines, ("plugins", candidate.key, *where))
            place = f"{self.loaded.source}:{line}" if line is not None else self.loaded.source
            reasons.append(f"{message} ({place}, field {format_path(where)!r})")  # a secret is a field
        assert candidate.config_type is not None  # only configs have secrets
        fields = {f.name: f for f in msgspec.structs.fields(candidate.config_type)}
        routes = _effective(fields.get("routes"), raw)
        known = [r for r in routes if isinstance(r, str)] if isinstance(routes, list) else None
        candidate.entry.routes = known
        self.fail(candidate, "config", f"cannot be used: {'; '.join(reasons)}", routes=known)

    def apply_env_fallbacks(
        self, config_type: type[msgspec.Struct], raw: dict[str, Any]
    ) -> list[tuple[str, list[str]]]:
        """Fill absent fields from their :class:`EnvFallback` variables; return the ``(field,
        variables)`` pairs of required fields that no variable filled.

        A field may carry several fallbacks: each one that applies and finds its variable
        set fills it, so the last such one wins (Google's SDK prefers ``GOOGLE_API_KEY`` to
        ``GEMINI_API_KEY``: list it last)."""
        missing: list[tuple[str, list[str]]] = []
        fields = {f.name: f for f in msgspec.structs.fields(config_type)}
        for field in fields.values():
            if field.encode_name in raw:
                continue
            wanted: list[str] = []
            for marker in getattr(field.type, "__metadata__", ()):
                if not isinstance(marker, EnvFallback):
                    continue
                if all(_effective(fields.get(name), raw) == expected for name, expected in marker.only_when.items()):
                    value = self.environ.get(marker.var)
                    if value:
                        self.loaded.redactor.add(value)
                        raw[field.encode_name] = value
                    elif marker.required:
                        wanted.append(marker.var)
            if wanted and field.encode_name not in raw:
                missing.append((field.encode_name, wanted))
        return missing

    def build(self, candidate: _Candidate) -> None:
        target = candidate.target
        try:
            if candidate.config is not None:
                instance = target(candidate.config)
            elif isinstance(target, type):
                instance = target()
            else:
                instance = target
        except Exception as exc:
            self.fail(candidate, "init", f"failed to start: {type(exc).__name__}: {exc}")
            return
        entry = candidate.entry
        self.loaded.plugins.append(
            LoadedPlugin(
                key=candidate.key, name=candidate.name, instance=instance, dist=entry.dist, version=entry.version
            )
        )

    def fail(
        self,
        candidate: _Candidate,
        stage: Literal["import", "config", "init"],
        message: str,
        *,
        is_middleware: bool | None = None,
        routes: list[str] | None = None,
    ) -> None:
        entry = candidate.entry
        middleware = candidate.fails_closed if is_middleware is None else is_middleware
        text = self.loaded.redact(f"plugin {candidate.key!r} {message}")
        if is_middleware is not None:
            entry.is_middleware = is_middleware
        entry.state = "failed"
        entry.message = text
        self.loaded.failures.append(
            PluginFailure(
                key=candidate.key,
                name=candidate.name,
                message=text,
                stage=stage,
                is_middleware=middleware,
                routes=routes,
            )
        )


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


def _builtin_document() -> tuple[dict[str, Any], dict[ConfigPath, int], list[ConfigProblem]]:
    """:data:`BUILTIN_DEFAULT` as :func:`~harness_core.config.parse_yaml` reads it (data, line of
    every path, no problem), built fresh for every call (the loader may change it)."""
    data = {"plugins": {"mock": {}}, "defaults": {"route": "mock", "model": "echo"}}
    lines: dict[ConfigPath, int] = {(): 1, ("plugins",): 1, ("plugins", "mock"): 2, ("defaults",): 3}
    lines.update({("defaults", "route"): 4, ("defaults", "model"): 5})
    return data, lines, []


def _dist_of(ep: EntryPoint) -> tuple[str | None, str | None]:
    return ep.dist.name, ep.dist.version


def _effective(field: msgspec.structs.FieldInfo | None, raw: Mapping[str, Any]) -> Any:
    """The value a Config field will have: from YAML, else its default (``NODEFAULT`` if neither)."""
    if field is None:
        return msgspec.NODEFAULT
    if field.encode_name in raw:
        return raw[field.encode_name]
    if field.default_factory is not msgspec.NODEFAULT:
        return field.default_factory()
    return field.default


def _secret_fields(config_type: type[msgspec.Struct]) -> set[str]:
    """The (encoded) names of the fields of ``config_type`` whose type holds :class:`Secret`."""
    return {f.encode_name for f in msgspec.structs.fields(config_type) if _holds_secret(f.type)}


def _unwrapped(annotation: Any) -> Any:
    """``annotation`` without ``Annotated[…]`` and an optional ``| None``; ``None`` for another union."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return _unwrapped(members[0]) if len(members) == 1 else None
    return annotation


def _struct_of(annotation: Any) -> type[msgspec.Struct] | None:
    """The msgspec Struct a field holds (``Struct``, ``Struct | None``, annotated), else ``None``."""
    inner = _unwrapped(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, msgspec.Struct) else None


def _struct_values_of(annotation: Any) -> Any:
    """The value type of a ``dict[str, Struct]`` field (the Struct), else ``None``."""
    inner = _unwrapped(annotation)
    if typing.get_origin(inner) is dict:
        value_type = typing.get_args(inner)[1]
        return value_type if _struct_of(value_type) is not None else None
    return None


def _holds_secret(annotation: Any) -> bool:
    return annotation in (Secret, ConnectionString) or any(_holds_secret(arg) for arg in typing.get_args(annotation))


def _split_msgspec_error(text: str) -> tuple[str, ConfigPath]:
    """``"Expected `int`, got `str` - at `$.a[0]`"`` → ``("Expected `int`, got `str`", ("a", 0))``; a
    message starting ``field 'name': `` (a config's ``__post_init__`` check) is located at that field."""
    match = _MSGSPEC_PATH.match(text)
    assert match is not None  # the pattern matches any text
    path: list[str | int] = []
    for name, index, hidden_key in _PATH_PART.findall(match.group("path") or ""):
        path.append(int(index) if index else "<key>" if hidden_key else name)
    message = match.group("message")
    unknown = _UNKNOWN_FIELD.search(message)
    named = _NAMED_FIELD.match(message)
    if unknown is not None:
        path.append(unknown.group(1))
    elif named is not None:  # "field 'base_url': …" raised by a config's __post_init__: that field's line
        path.append(named.group(1))
        message = message[named.end() :]
    return message, tuple(path)
