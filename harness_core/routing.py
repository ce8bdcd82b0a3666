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
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from harness_core.plugininfo import Defaults

__all__ = ["default_embed_route", "default_model", "default_route", "resolve_alias"]


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
