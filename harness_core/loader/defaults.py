"""The document's ``defaults:`` and ``aliases:`` sections: reading them, and resolving an alias.

``defaults: {route: mock, model: echo}`` (:func:`read_defaults`) gives the route and model used
when options leave them ``None``; ``aliases: {fast: groq/llama-3.1-8b-instant}``
(:func:`read_aliases`) names usable as a model (:func:`harness_core.routing.resolve_alias`). Both sections take
``${{ env.NAME }}`` in their values (the value becomes a secret). Every problem is recorded on
the :class:`~harness_core.loader.session.Session`, located at its key's YAML line.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from harness_core.config import format_path, line_for
from harness_core.plugininfo import Defaults

if TYPE_CHECKING:
    from harness_core.loader.session import Session

__all__ = ["read_aliases", "read_defaults"]


def read_defaults(session: Session, raw: Any) -> None:
    """Set ``session.loaded.defaults`` from the ``defaults:`` section ``raw`` (``None``: absent).

    Keys other than ``route`` and ``model``, values that are not strings (``null`` is kept as
    ``None``) and values whose ``${{ env.NAME }}`` cannot be substituted are problems; the other
    keys are kept. ``provider``, the deprecated old name of ``route``, is read with a
    ``FutureWarning`` naming its YAML line; both given is a problem at the ``provider`` line."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        session.problem("`defaults` must be a mapping with `route` and/or `model`", ("defaults",))
        return
    raw, env_problems = session.substitute(raw, ("defaults",))
    values: dict[str, str | None] = {}
    for key, value in raw.items():
        field = format_path(("defaults", key))
        if key not in ("route", "provider", "model"):
            session.problem(f"unknown key {key!r}; expected `route` or `model`", ("defaults", key), field=field)
        elif value is not None and not isinstance(value, str):
            session.problem(f"expected a string, got {type(value).__name__}", ("defaults", key), field=field)
        elif not any(env_problem.path == ("defaults", key) for env_problem in env_problems):
            values[key] = value
    if "provider" in raw:  # the old name of `route`
        where = f"{session.loaded.source}, line {line_for(session.lines, ('defaults', 'provider'))}"
        if "route" in raw:
            message = "give `route` only (`provider` is its deprecated old name)"
            session.problem(message, ("defaults", "provider"), field="defaults.provider")
        else:
            warnings.warn(f"{where}: `defaults.provider` is deprecated: write `defaults.route`", FutureWarning, 2)
            values["route"] = values.get("provider")
        values.pop("provider", None)
    session.loaded.defaults = Defaults(**values)


def read_aliases(session: Session, raw: Any) -> None:
    """Fill ``session.loaded.aliases`` from the ``aliases:`` section ``raw`` (``None``: absent).

    ``aliases: {fast: groq/llama-3.1-8b-instant, smart: gpt-4o}``: name -> ``route/model`` or a
    model id of the default route (see :func:`harness_core.routing.resolve_alias`). Targets are sent, so they take
    ``${{ env.NAME }}`` as plugin fields do (the value becomes a secret); names are only looked
    up, never expanded: an expression in a name is refused. A name or target that is not a
    string, or a target that is empty or only slashes, or whose route or model is empty (``/m``,
    ``r/``: a request would name route ``''``), is a problem."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        session.problem("`aliases` must be a mapping of name: route/model", ("aliases",))
        return
    raw, env_problems = session.substitute(raw, ("aliases",))
    for name, target in raw.items():
        if any(env_problem.path == ("aliases", name) for env_problem in env_problems):
            continue
        if isinstance(name, str) and "${" in name:
            session.problem(
                f"alias name {name!r} holds `${{`: names are not expanded (only targets take ${{{{ env.NAME }}}})",
                ("aliases", name),
                field=format_path(("aliases", name)),
            )
        elif not isinstance(name, str) or not isinstance(target, str) or not target.strip("/"):
            field = format_path(("aliases", name))
            session.problem(
                f"alias {name!r} must name a 'route/model' or a model id, got {target!r}",
                ("aliases", name),
                field=field,
            )
        elif target.startswith("/") or target.partition("/")[1:] == ("/", ""):  # route '' ("/m"), model '' ("r/")
            empty = "route" if target.startswith("/") else "model"
            session.problem(
                f"alias {name!r}: the {empty} of {target!r} is empty (write 'route/model', or a model id alone)",
                ("aliases", name),
                field=format_path(("aliases", name)),
            )
        else:
            session.loaded.aliases[name] = target
