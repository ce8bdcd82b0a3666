"""The one owner of "every problem of a configuration": what ``harness config check`` lists and
what ``harness serve`` refuses an invalid file with (:func:`every_problem`), so the two list the
same set; ``harness plugins`` shows the problems of the start (:func:`start_problems`).

Beyond the loader's own problems (every plugin's config, field by field), the plugins whose config
is valid are started (they are built even though others are not: ``inspect_config(partial=True)``)
to find what only a start finds: a route the config names that nothing serves, a start failure
(``DUPLICATE_ROUTE``), a ``defaults:`` route or model nothing serves; then every plugin failure.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from harness_core.config import ConfigError, ConfigProblem
from harness_core.errors import LlmError
from harness_core.loader.build import Configure
from harness_core.loader.config import LoadedConfig, PluginEntry
from harness_core.loader.load import inspect_config
from harness_core.plugininfo import PluginFailure
from harness_core.routing import route_problems
from harness_core.secret import redacted_logging

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.runtime import Harness

__all__ = ["every_problem", "failure_line", "load_complete", "start_found", "start_problems"]


async def load_complete(
    path: str | os.PathLike[str] | None = None, *, configure: Configure | None = None
) -> LoadedConfig:
    """``path`` loaded completely (as :func:`~harness_core.loader.load_config`, ``configure``
    its), for a command that enforces policy (``harness serve``, ``harness keys``): every plugin
    valid, and every one that fails closed loaded (:meth:`LoadedConfig.require_complete`).

    Raises:
        ConfigError: when the file is invalid: every problem :func:`every_problem` finds, the
            list ``harness config check`` prints (a plugin failure, which names no line, is
            located at the file); log records of the start of the valid plugins are redacted.
            Else the problems of :meth:`LoadedConfig.require_complete`.
    """
    loaded = inspect_config(path, configure=configure, partial=True)
    if loaded.problems:
        with redacted_logging(loaded.redact):
            found = await every_problem(loaded)
        source = loaded.source
        raise ConfigError(p if isinstance(p, ConfigProblem) else ConfigProblem(message=p, source=source) for p in found)
    return loaded.require_complete()


def failure_line(failure: PluginFailure) -> str:
    """``plugin 'k' failed to start: <message> [adapter, stage register]`` (the loader's messages name
    the plugin already; the runtime's do not)."""
    kind = "middleware" if failure.is_middleware else "adapter"
    named = f"plugin {failure.key!r}"
    message = failure.message if failure.message.startswith(named) else f"{named} failed to start: {failure.message}"
    return f"{message} [{kind}, stage {failure.stage}]"


async def start_problems(loaded: LoadedConfig) -> list[str]:
    """The problems :func:`start_found` finds, as ``harness config check`` and ``harness plugins`` print them."""
    return [str(problem) for problem in await start_found(loaded)]


async def every_problem(loaded: LoadedConfig) -> list[ConfigProblem | str]:
    """Every problem of ``loaded`` (an :func:`~harness_core.loader.inspect_config` with
    ``partial``), in one list: the one owner of what ``harness config check`` lists and of what
    ``harness serve`` refuses an invalid file with, so both list the same set. The loader's
    problems (every plugin's config, field by field), then what the start of the plugins whose
    config is valid finds (:func:`start_found`), then every plugin failure (:func:`failure_line`;
    a string: it names the plugin, not a line). Start failures are added to ``loaded.failures``."""
    found: list[ConfigProblem | str] = list(loaded.problems)
    found += await start_found(loaded)
    found += [failure_line(failure) for failure in loaded.failures]
    return found


async def start_found(loaded: LoadedConfig) -> list[ConfigProblem | str]:
    """Start and stop the harness; the problems found on the way (a located one as a
    :class:`ConfigProblem`; the start's own error, when it repeats no failure, as its text).

    Start failures are added to ``loaded.failures`` (their messages redacted). A route the config
    names that nothing serves stops the start (:func:`~harness_core.routing.check_routes`: its
    problems are listed); one whose adapter plugin failed does not, and is listed too, located.
    """
    from harness_core.runtime import Harness

    failures = [*loaded.failures, *_invalid_failures(loaded)]
    known = len(failures)  # the harness starts with them: a failed route's plugin is named
    harness = Harness.from_loaded(loaded, failures=failures)
    problems: list[ConfigProblem | str] = []
    try:
        async with harness:
            problems += route_problems(harness, loaded)
            problems += _check_defaults(harness, loaded)
    except ConfigError as exc:  # routes the config names that nothing serves: one line each
        problems += exc.problems
    except LlmError as exc:
        if len(harness.failures) == known:  # otherwise the error only repeats the failures
            problems.append(str(exc))
    started = harness.failures[known:]
    loaded.failures += [msgspec.structs.replace(f, message=loaded.redact(f.message)) for f in started]
    return problems


def _invalid_adapters(loaded: LoadedConfig) -> list[PluginEntry]:
    """The entries whose config is invalid and that could serve a route: an adapter plugin (its
    :attr:`~harness_core.loader.PluginEntry.kind` has ``adapter``), or one of unknown kind (not
    imported); not a middleware, a tool source or a settings entry such as the gateway's."""
    return [
        entry
        for entry in loaded.entries
        if entry.state == "invalid" and (entry.kind is None or "adapter" in entry.kind.split("+"))
    ]


def _invalid_failures(loaded: LoadedConfig) -> list[PluginFailure]:
    """The adapter plugins whose config is invalid (reported already; :func:`_invalid_adapters`)
    as adapter plugin failures of unknown routes, for the start of this report only: what it then
    says of a route only such a plugin could serve names it (one of them may own it), and the
    start goes on without them (a real start never does: the load raises)."""
    return [
        PluginFailure(
            key=entry.key,
            name=entry.name,
            message=f"plugin {entry.key!r} is invalid (its problems are listed above)",
            stage="config",
            is_middleware=False,
        )
        for entry in _invalid_adapters(loaded)
    ]


def _check_defaults(harness: Harness, loaded: LoadedConfig) -> list[ConfigProblem]:
    """``defaults:`` against the started harness: the route must be served, the model known to it."""
    route, model = loaded.defaults.route, loaded.defaults.model
    if route is None:
        return []
    routes = harness.routes()
    if route not in routes:
        known = ", ".join(repr(name) for name in routes) or "none"
        message = f"no enabled plugin serves the default route {route!r} (routes: {known})"
        invalid = ", ".join(repr(entry.key) for entry in _invalid_adapters(loaded))
        if invalid:  # (config check starts the valid plugins only)
            message += f"; plugins that are invalid (one may serve it): {invalid}"
        return [_defaults_problem(loaded, "route", message)]
    if model is None:
        return []
    try:
        harness.resolve_model(route, model)
    except LlmError as exc:
        return [_defaults_problem(loaded, "model", f"the default model {model!r} of route {route!r}: {exc}")]
    return []


def _defaults_problem(loaded: LoadedConfig, key: str, message: str) -> ConfigProblem:
    if key == "route" and ("defaults", "route") not in loaded.lines and ("defaults", "provider") in loaded.lines:
        key = "provider"  # the file uses the deprecated old name: point at what it says
    return ConfigProblem(
        message=message, field=f"defaults.{key}", line=loaded.line("defaults", key), source=loaded.source
    )
