"""Which route and model serve a request: the one owner of the default route, the default model
and the model aliases of plugins.yaml (docs/loader.md#defaults-and-aliases).

Every place that works a target out calls these: the runtime (:meth:`Harness.default_route
<harness_core.runtime.Harness.default_route>`, :meth:`~harness_core.runtime.Harness.apply_defaults`,
:meth:`~harness_core.runtime.Harness.default_embed_route`), the loader
(:meth:`LoadedConfig.resolve_alias <harness_core.loader.LoadedConfig.resolve_alias>`), the command
line (``run``, ``chat``, ``chain``, ``config check``, ``models``, the hints) and the gateway (its
aliases), so the CLI and the gateway follow the same rules.

A **route** is a plugins.yaml entry a request is sent to; ``None`` always means "the default
route".

A config that names a route (an ``aliases:`` target, a ``fallback`` target, a ``balance``
member) is checked against the routes served once the plugins have started: a plugin says which
routes its config names with an optional ``route_references()`` method returning
:class:`RouteReference` records (docs/hooks.md, "Optional plugin methods"); :func:`route_problems`
finds the ones no plugin serves and :func:`check_routes` (called by the start, ``async with
harness``) refuses a config naming a route that nothing serves, so a misspelt fallback target
stops ``harness config check``, ``run`` and ``serve`` instead of ending a request in
``NO_ADAPTER``. Which routes are served is the started harness's (:meth:`Harness.route_owner
<harness_core.runtime.Harness.route_owner>`): nothing here keeps a second list.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from harness_core.config import ConfigError, ConfigPath, ConfigProblem, format_path, line_for
from harness_core.plugininfo import Defaults, PluginFailure, adapter_failures, failed_owner
from harness_core.secret import MASK

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.loader import LoadedConfig
    from harness_core.registry import DuplicateRoute
    from harness_core.runtime import Harness

__all__ = [
    "RouteReference",
    "check_routes",
    "default_embed_route",
    "default_model",
    "default_route",
    "duplicate_route_places",
    "mistyped_route",
    "parse_model_id",
    "resolve_alias",
    "resolve_target",
    "route_problems",
    "route_suggestion",
    "unknown_route_message",
]


class RouteReference(NamedTuple):
    """A route a plugin's config names, as a plugin's optional ``route_references()`` method
    returns them (docs/hooks.md, "Optional plugin methods"): ``path`` is where inside the plugin's
    config (``("targets", "a", 0)``: the field and YAML line of the message come from it), ``route``
    the route named, ``what`` how the message calls the value (``"fallback target 'b/m'"``),
    ``value`` the config text the route was read from (``"b/m"``; ``""``: the route is the whole
    text). A route read from a value the harness masks (one from ``${{ env.X }}``) is shown as
    :data:`~harness_core.secret.MASK`: the masker hides the whole value, not the part of it a
    message would quote. Checked when the harness starts (:func:`check_routes`)."""

    path: ConfigPath
    route: str
    what: str
    value: str = ""


def unknown_route_message(
    what: str, route: str, served: Collection[str], failures: Iterable[PluginFailure] = (), *, shown: str | None = None
) -> str:
    """The message for ``what`` naming ``route`` (written as ``shown`` when given: a route read
    from a secret is shown masked), which no route in ``served`` is: when the
    adapter plugin owning ``route`` failed (among ``failures``; :func:`failed_owner`), that it
    failed and why; else that nothing serves it, the closest route (``did you mean``,
    :func:`difflib.get_close_matches` over ``served`` and the routes of failed adapter plugins),
    every served route, and the adapter plugins that failed without saying which routes they own
    (one of them may own it)."""
    owner = failed_owner(failures, route)
    name = repr(route) if shown is None else shown
    if owner is not None:
        return f"{what} names route {name}, whose plugin failed: {owner.message}"
    failed = adapter_failures(failures)
    claimed = [name for failure in failed for name in failure.routes or () if name not in served]
    hint = route_suggestion(route, [*served, *claimed])
    known = ", ".join(repr(name) for name in served) or "none"
    text = f"{what} names route {name}, which no plugin serves{hint}; routes: {known}"
    unclaimed = [failure for failure in failed if failure.routes is None]
    if unclaimed:
        text += "; adapter plugins that failed (one may own it): " + "; ".join(f.message for f in unclaimed)
    return text


def route_suggestion(route: str, routes: Iterable[str], *, model: str | None = None) -> str:
    """`` (did you mean 'mock'?)`` naming the route of ``routes`` closest to ``route`` (a typo:
    :func:`difflib.get_close_matches`, its default cutoff 0.6), written ``route/model`` with
    ``model`` (``'mock/echo'``: the gateway's model id); ``""`` when none is close or ``route`` is
    among ``routes``. The one "did you mean" of an unknown route: :func:`unknown_route_message`,
    the runtime's ``NO_ADAPTER`` (``harness run -r mokc``) and the gateway's unknown model."""
    names = list(routes)
    close = difflib.get_close_matches(route, names, n=1) if route not in names else []
    if not close:
        return ""
    return f" (did you mean {close[0]!r}?)" if model is None else f" (did you mean {f'{close[0]}/{model}'!r}?)"


def duplicate_route_places(config: LoadedConfig | None, error: DuplicateRoute) -> str:
    """Where ``config``'s plugins.yaml declares the route of ``error`` (a ``DUPLICATE_ROUTE`` of
    the start), for its message: ``" (declared again at plugins.yaml:4, plugin 'mock:two', field
    'routes[0]'; first at plugins.yaml:2, plugin 'mock')"``. A declaration is the item of the
    plugin's ``routes:`` list naming the route (its first, or for a route one plugin lists twice
    its last, with the first after ``first at``); a plugin whose file writes no ``routes:`` (its
    default routes) is located at its entry's line. ``""`` for a harness built without a config
    (``None``). Located as every config problem is (:attr:`ConfigProblem.place
    <harness_core.config.ConfigProblem.place>`)."""
    if config is None:
        return ""
    route = error.route
    if error.taken is None:  # one plugin lists it twice: its last mention is the second declaration
        again, first = _declaration(config, error.owner, route, -1), _declaration(config, error.owner, route, 0)
    else:
        again, first = _declaration(config, error.owner, route, 0), _declaration(config, error.taken, route, 0)
    return f" (declared again at {again}; first at {first})"


def _declaration(config: LoadedConfig, plugin: str, route: str, nth: int) -> str:
    """The place (:attr:`ConfigProblem.place <harness_core.config.ConfigProblem.place>`) where
    plugin ``plugin`` of ``config`` declares ``route``: the ``nth`` item of its ``routes:`` naming
    it (its validated routes, :attr:`PluginEntry.routes <harness_core.loader.PluginEntry.routes>`,
    masked when read from a secret), the field as far as the file writes it."""
    entry = next((entry for entry in config.entries if entry.key == plugin), None)
    routes = (entry.routes or []) if entry is not None else []
    shown = (route, config.redact(route))  # a route from a secret is masked among them
    indexes = [index for index, name in enumerate(routes) if name in shown]
    path: ConfigPath = ("routes", indexes[nth]) if indexes else ("routes",)
    lines = config.lines
    written = next((path[:end] for end in range(len(path), 0, -1) if ("plugins", plugin, *path[:end]) in lines), ())
    located = ConfigProblem(
        message="",
        plugin=plugin,
        field=format_path(written) or None,
        line=line_for(lines, ("plugins", plugin, *path)),
        source=config.source,
    )
    return located.place


def mistyped_route(
    aliases: Mapping[str, str], route: str | None, model: str | None, routes: Collection[str]
) -> str | None:
    """Why a request's model id looks like a ``route/model`` id with a typo in its route, for
    the command line's hint: ``"route 'mokc' is not served (did you mean 'mock/echo'?)"`` when
    no route is given (``route`` ``None``), ``model`` is no alias of ``aliases`` and reads as
    ``route/model`` (:func:`parse_model_id`) whose route is none of ``routes`` but close to one
    (:func:`route_suggestion`, the gateway's ``did you mean 'mock/echo'?``). :func:`resolve_target`
    sends such an id as it is to the default route (it may be a provider's own id: ``-m
    meta-llama/llama-3``), so this is said only when the request failed. ``None`` otherwise."""
    parsed = parse_model_id(model) if route is None and model is not None and model not in aliases else None
    if parsed is None or parsed[0] in routes:
        return None
    hint = route_suggestion(parsed[0], routes, model=parsed[1])
    return f"route {parsed[0]!r} is not served{hint}" if hint else None


def _named_routes(harness: Harness, config: LoadedConfig | None) -> list[tuple[str | None, ConfigPath, RouteReference]]:
    """``(plugin key or None, document path, reference)`` for every route the configuration
    names: each ``route/model`` target of plugins.yaml's ``aliases:`` (a plain model id names no
    route), then what each started plugin's ``route_references()`` returns (a plugin that failed
    is not checked: its failure is reported already)."""
    named: list[tuple[str | None, ConfigPath, RouteReference]] = []
    aliases = config.aliases if config is not None else {}
    for alias in aliases:
        route, _ = resolve_alias(aliases, None, alias)
        if route is not None:
            named.append((None, ("aliases", alias), RouteReference((), route, f"alias {alias!r}", aliases[alias])))
    failed = {failure.key for failure in harness.failures}
    for plugin in harness.plugins:
        references = getattr(plugin.instance, "route_references", None)
        if plugin.key not in failed and callable(references):
            named += [(plugin.key, ("plugins", plugin.key, *ref.path), ref) for ref in references()]
    return named


def _unserved(harness: Harness, config: LoadedConfig | None) -> list[tuple[RouteReference, ConfigProblem]]:
    """Each reference of :func:`_named_routes` whose route no started plugin serves (neither a
    stream adapter nor an embedder: :meth:`Harness.route_owner
    <harness_core.runtime.Harness.route_owner>`), with its located problem."""
    unserved: list[tuple[RouteReference, ConfigProblem]] = []
    served: list[str] | None = None
    lines = config.lines if config is not None else {}
    source = config.source if config is not None else None
    for key, path, reference in _named_routes(harness, config):
        if harness.route_owner(reference.route, embeddings=True) is not None:
            continue
        if served is None:  # the route table is built for the message only
            served = list(dict.fromkeys([*harness.routes(), *harness.embed_routes()]))
        secret = reference.value and harness.redact(reference.value) != reference.value
        shown = MASK if secret else None  # (the masker hides the whole value, not the route part of it)
        message = unknown_route_message(reference.what, reference.route, served, harness.failures, shown=shown)
        field = format_path(reference.path if key is not None else path)
        problem = ConfigProblem(
            message=harness.redact(message), plugin=key, field=field, line=line_for(lines, path), source=source
        )
        unserved.append((reference, problem))
    return unserved


def route_problems(harness: Harness, config: LoadedConfig | None = None) -> list[ConfigProblem]:
    """Every route the configuration names that no plugin of the started ``harness`` serves: the
    ``route/model`` targets of ``config``'s ``aliases:`` (the :class:`LoadedConfig
    <harness_core.loader.LoadedConfig>` the harness was built from, ``None`` for a harness built
    from plugin objects) and every :class:`RouteReference` a started plugin's
    ``route_references()`` returns. Each problem names the plugin (``None`` for ``aliases:``),
    the field, the file and YAML line (with ``config``), and says (:func:`unknown_route_message`)
    that the route's plugin failed and why when an adapter plugin claiming it failed (a missing
    ``${{ env.X }}``), else "did you mean" the closest route and every route served. Secrets are
    masked (:attr:`Harness.redact <harness_core.runtime.Harness.redact>`). ``harness config
    check`` lists them; :func:`check_routes` stops the start on them."""
    return [problem for _, problem in _unserved(harness, config)]


def check_routes(harness: Harness, config: LoadedConfig | None = None) -> None:
    """Refuse a configuration naming a route that nothing serves (called by the start: ``async
    with harness``, after every plugin registered; the requests themselves check nothing more).

    A route whose adapter plugin failed (its config claims the route: a missing key) does not stop
    the start: as everywhere else (docs/loader.md, "Failure policy") only its routes are
    unavailable, the rest works, and using it is ``CONFIG: route 'r' is unavailable: …``.

    Raises:
        ConfigError: when a route named (:func:`route_problems`) is served by no plugin and
            claimed by no failed one; it lists every problem of :func:`route_problems`, located.
    """
    unserved = _unserved(harness, config)
    if any(failed_owner(harness.failures, reference.route) is None for reference, _ in unserved):
        raise ConfigError([problem for _, problem in unserved])


def default_route(defaults: Defaults, routes: Collection[str]) -> str | None:
    """The route a request naming none goes to: ``defaults.route``; without it, the only route in
    ``routes`` (the served ones) when exactly one is (a config with one route needs no
    ``defaults:``); else ``None`` (such a request ends with ``NO_ADAPTER``)."""
    if defaults.route is not None:
        return defaults.route
    return next(iter(routes)) if len(routes) == 1 else None


def default_embed_route(defaults: Defaults, routes: Collection[str]) -> str | None:
    """The route an embedding request naming none goes to: ``defaults.route`` when it is among
    ``routes`` (the embedding routes), else the only one when exactly one is, else ``None``."""
    if defaults.route is not None and defaults.route in routes:
        return defaults.route
    return next(iter(routes)) if len(routes) == 1 else None


def default_model(defaults: Defaults, route: str | None) -> str | None:
    """``defaults.model`` when it applies to ``route``, else ``None``: it applies to the default
    route (``route`` ``None`` or ``defaults.route``) and to every route when no default route is
    configured; never to another route (a model id is one provider's, not another's). The
    adapter's own default model comes after this (:meth:`Harness.apply_defaults
    <harness_core.runtime.Harness.apply_defaults>`)."""
    if defaults.route is None or route is None or route == defaults.route:
        return defaults.model
    return None


def resolve_alias(aliases: Mapping[str, str], route: str | None, model: str | None) -> tuple[str | None, str | None]:
    """``(route, model)`` with a model alias of plugins.yaml's ``aliases:`` replaced: a
    ``"route/model"`` target sets both (a route given explicitly wins), a plain model id only the
    model (for whichever route serves: given, else the default). Anything else is returned
    unchanged."""
    target = aliases.get(model) if model is not None else None
    if target is None:
        return route, model
    aliased_route, slash, aliased = target.partition("/")
    if not slash:
        return route, target
    return (route if route is not None else aliased_route), aliased


def parse_model_id(text: str) -> tuple[str, str] | None:
    """``(route, model)`` of a ``route/model`` model id: the text before the first ``/`` and the
    rest (a model may itself hold ``/``: ``"or/meta-llama/llama-3"`` → ``("or",
    "meta-llama/llama-3")``); ``None`` when ``text`` has no ``/`` or either part is empty. The one
    reading of a model id that names its route: the gateway's ``model`` field (after its aliases)
    and the command line's ``-m`` (:func:`resolve_target`)."""
    route, slash, model = text.partition("/")
    return (route, model) if slash and route and model else None


def resolve_target(
    aliases: Mapping[str, str], route: str | None, model: str | None, routes: Collection[str]
) -> tuple[str | None, str | None]:
    """``(route, model)`` a request asks for, from a route (``None``: the default) and a model id:
    an alias of ``aliases:`` is replaced (:func:`resolve_alias`); else, when no route is given, a
    ``route/model`` id (:func:`parse_model_id`) whose route is one of ``routes`` (the routes the
    configuration names) sets the route and the model, as the gateway reads its ``model`` field.
    A route given explicitly (``-r``) takes the model id as it is: it is the provider's id, which
    may itself hold a slash (``-r openrouter -m openai/gpt-4o``, ``-m openrouter/auto``), even
    when its first part names another route. A model id whose first part names no route in
    ``routes`` stays the model id (``-m meta-llama/llama-3``, for the default route)."""
    if model is None or model in aliases:
        return resolve_alias(aliases, route, model)
    if route is not None:
        return route, model
    parsed = parse_model_id(model)
    if parsed is None or parsed[0] not in routes:
        return route, model
    return parsed
