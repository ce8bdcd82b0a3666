"""One plugin's config checked: ``${{ env.NAME }}`` substituted, :class:`~harness_core.config.EnvFallback`
variables applied, converted (:mod:`~harness_core.loader.convert`), every problem reported.

Mistakes in the file (a malformed ``${{ … }}``, a wrong type, an unknown field) make the config
invalid; a missing or unusable secret alone makes a provider plugin fail (its routes say why)
and the config of a plugin that fails closed invalid (:func:`secret_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from harness_core.config import ConfigPath, EnvFallback, format_path, line_for, substitute_env
from harness_core.loader.convert import Converter, env_text_values, holds_secret
from harness_core.loader.session import Candidate, Session
from harness_core.secret import MASK

__all__ = ["apply_env_fallbacks", "secret_fields", "secret_problem", "validate"]


def validate(session: Session, candidate: Candidate) -> None:
    """Validate one plugin's config, reporting every problem in it (not only msgspec's first);
    on success ``candidate.config`` is set (and its entry's routes, when the config has some).

    Mistakes in the file (a malformed ``${{ … }}``, a wrong type, an unknown field) make the
    config invalid; a missing or unusable secret only (:func:`secret_problem`) makes a
    provider fail alone. When both kinds are found, all are reported as config problems."""
    if candidate.config_type is None:
        if candidate.raw:
            first = next(iter(candidate.raw))
            session.config_problem(candidate, f"plugin {candidate.name!r} takes no configuration", (first,))
        return
    config_type = candidate.config_type
    expanded: dict[ConfigPath, tuple[str, ...]] = {}
    raw, env_problems = substitute_env(
        candidate.raw,
        session.environ,
        session.loaded.redactor,
        secret_fields=secret_fields(config_type),
        expanded=expanded,
    )
    wrong = {p.path for p in env_problems}  # text with a problem of its own is reported once
    expanded = {path: names for path, names in expanded.items() if path not in wrong}
    raw, typed = env_text_values(config_type, raw, expanded)  # `port: ${{ env.PORT }}` is a number
    mistakes: list[tuple[str, ConfigPath]] = [(p.message, p.path) for p in env_problems if not p.unset]
    mistakes += [(message, where) for message, where, _ in typed]
    secrets: list[tuple[str, ConfigPath]] = [(p.message, p.path) for p in env_problems if p.unset]
    skipped = {p.path[0] for p in env_problems if p.path} | {where[0] for _, where, _ in typed}
    missing = apply_env_fallbacks(session, config_type, raw)
    converter = Converter(session.loaded.redactor)
    config = None
    if not env_problems and not typed:
        config, found = converter.convert(config_type, raw)
    else:  # fields with an environment problem are checked no further (their value is unknown)
        found = converter.convert_fields(config_type, raw, skipped)
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
        for message, where in sorted([*mistakes, *secrets], key=lambda item: _position(session, candidate, item[1])):
            session.config_problem(candidate, message, where)
        return
    if secrets:
        secret_problem(session, candidate, secrets, raw)
        return
    assert config is not None  # no problem: the whole config converted
    candidate.config = config
    routes = getattr(config, "routes", None)
    if isinstance(routes, list) and all(isinstance(r, str) for r in routes):
        candidate.entry.routes = [MASK if r in session.loaded.redactor else r for r in routes]


def _position(session: Session, candidate: Candidate, where: ConfigPath) -> int:
    """Sort key of a problem: its YAML line (problems of one plugin are reported in file order)."""
    return line_for(session.lines, ("plugins", candidate.key, *where)) or 0


def secret_problem(
    session: Session, candidate: Candidate, problems: list[tuple[str, ConfigPath]], raw: dict[str, Any]
) -> None:
    """Missing or unusable secrets (``(message, field path)`` each): the config of a plugin that
    fails closed (a middleware, the gateway's entry: see :attr:`Candidate.fails_closed`) is
    invalid (everything stops: ``harness serve`` never starts without its ``master_key``); a
    provider plugin only fails, so its routes say why when used and the rest works."""
    if candidate.fails_closed:
        for message, where in problems:
            session.config_problem(candidate, message, where)
        return
    reasons = []
    for message, where in problems:
        line = line_for(session.lines, ("plugins", candidate.key, *where))
        place = f"{session.loaded.source}:{line}" if line is not None else session.loaded.source
        reasons.append(f"{message} ({place}, field {format_path(where)!r})")  # a secret is a field
    assert candidate.config_type is not None  # only configs have secrets
    fields = {f.name: f for f in msgspec.structs.fields(candidate.config_type)}
    routes = _effective(fields.get("routes"), raw)
    known = [r for r in routes if isinstance(r, str)] if isinstance(routes, list) else None
    candidate.entry.routes = known
    session.fail(candidate, "config", f"cannot be used: {'; '.join(reasons)}", routes=known)


def apply_env_fallbacks(
    session: Session, config_type: type[msgspec.Struct], raw: dict[str, Any]
) -> list[tuple[str, list[str]]]:
    """Fill absent fields of ``raw`` from their :class:`EnvFallback` variables (each value a secret
    from then on); return the ``(field, variables)`` pairs of required fields that no variable filled.

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
                value = session.environ.get(marker.var)
                if value:
                    session.loaded.redactor.add(value)
                    raw[field.encode_name] = value
                elif marker.required:
                    wanted.append(marker.var)
        if wanted and field.encode_name not in raw:
            missing.append((field.encode_name, wanted))
    return missing


def _effective(field: msgspec.structs.FieldInfo | None, raw: Mapping[str, Any]) -> Any:
    """The value a Config field will have: from YAML, else its default (``NODEFAULT`` if neither)."""
    if field is None:
        return msgspec.NODEFAULT
    if field.encode_name in raw:
        return raw[field.encode_name]
    if field.default_factory is not msgspec.NODEFAULT:
        return field.default_factory()
    return field.default


def secret_fields(config_type: type[msgspec.Struct]) -> set[str]:
    """The (encoded) names of the fields of ``config_type`` whose type holds :class:`~harness_core.secret.Secret`."""
    return {f.encode_name for f in msgspec.structs.fields(config_type) if holds_secret(f.type)}
