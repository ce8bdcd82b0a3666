"""The loader's entry points, :func:`load_config` and :func:`inspect_config`, and the order of its
steps over one document (:func:`load_document`)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any

from harness_core.config import ConfigError, ConfigProblem, parse_yaml
from harness_core.entrypoints import EntryPoint
from harness_core.loader.build import Configure, build, reconfigure
from harness_core.loader.config import LoadedConfig
from harness_core.loader.defaults import read_aliases, read_defaults
from harness_core.loader.discover import installed_plugins, list_installed, resolve
from harness_core.loader.entries import check_single_instances, read_entries
from harness_core.loader.find import builtin_document, find_config, read_document
from harness_core.loader.session import Session
from harness_core.loader.validate import validate

__all__ = ["TOP_LEVEL_KEYS", "check_top_level_keys", "inspect_config", "load_config", "load_document"]

TOP_LEVEL_KEYS = ("plugins", "defaults", "aliases")
"""The sections a document may have."""


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    configure: Configure | None = None,
) -> LoadedConfig:
    """Load, validate and build the plugins of ``path``.

    ``path`` ``None`` searches with :func:`find_config`; when nothing is found the built-in
    default (:data:`~harness_core.loader.find.BUILTIN_DEFAULT`, the mock provider) is used.
    ``environ`` replaces ``os.environ`` for the search, ``${{ env.NAME }}`` and env fallbacks.
    ``configure`` (:data:`Configure`) sets this load's own defaults before the plugins are built
    (the gateway's connection pools): the instances of every other load are untouched.

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
    partial: bool = False,
) -> LoadedConfig:
    """Like :func:`load_config` but never raises: problems are in :attr:`LoadedConfig.problems`.

    With ``instantiate=False`` plugins are imported and validated but not built (what
    ``harness plugins`` shows). Used by ``harness plugins`` and ``harness config check``.
    ``configure``: as for :func:`load_config` (applied only when the document has no problem).
    ``partial``: build the plugins whose config is valid even when the document has problems
    (``harness config check`` starts them to report their route problems in the same run); the
    result is a report's, never one to serve or run with: a command that enforces policy loads
    with :func:`load_config`, which raises on any problem.

    Raises:
        TypeError: as for :func:`load_config` (``configure``).
    """
    env = os.environ if environ is None else environ
    found = find_config(path, environ=env)
    loaded = LoadedConfig(path=found)
    text = read_document(found, loaded.source)
    if not isinstance(text, str):
        loaded.problems.append(text)
        return loaded
    session = Session(loaded, env)
    installed = installed_plugins()
    load_document(session, text, installed, instantiate=instantiate, configure=configure, partial=partial)
    session.redact_everything()
    list_installed(session, installed)
    return loaded


def check_top_level_keys(session: Session, data: dict[Any, Any]) -> bool:
    """Record a problem per unknown top-level key of ``data``, naming the closest known one when
    one is close (``plugin`` → did you mean `plugins`?); or, when no key of ``data`` is a known
    one nor close to one (``-c /etc/passwd``), one problem saying the file is not a plugins.yaml,
    quoting none of its keys (the file may hold anything). Returns whether the document is worth
    reading further (``False`` only in that last case)."""
    unknown = [key for key in data if key not in TOP_LEVEL_KEYS]
    close = {key: difflib.get_close_matches(str(key), TOP_LEVEL_KEYS, n=1) for key in unknown}
    if unknown and len(unknown) == len(data) and not any(close.values()):
        count = f"{len(unknown)} unknown key{'s' if len(unknown) != 1 else ''}"
        message = (
            f"{session.loaded.source} is not a harness plugins.yaml: none of its top-level keys is "
            f"`plugins`, `defaults` or `aliases` ({count})"
        )
        session.loaded.problems.append(ConfigProblem(message=message, source=session.loaded.source))
        return False
    for key in unknown:
        hint = f" (did you mean `{close[key][0]}`?)" if close[key] else ""
        session.problem(f"unknown top-level key {key!r}; expected `plugins`, `defaults` or `aliases`{hint}", (key,))
    return True


def load_document(
    session: Session,
    text: str,
    installed: Mapping[str, EntryPoint],
    *,
    instantiate: bool,
    configure: Configure | None,
    partial: bool,
) -> None:
    """The loader's steps over the document ``text``, in order, each recording on ``session``:
    parse (the built-in default is data already: no YAML parser is imported for it) → top-level
    keys (:func:`check_top_level_keys`; a file with none known is read no further) →
    ``defaults:`` and ``aliases:`` → the ``plugins:`` entries → resolve each against
    ``installed`` (importing it) → single instances → validate every enabled config → when no
    problem was found, ``configure`` → when no problem was found (or ``partial``: every valid
    config, whatever else is wrong) and ``instantiate``, build.

    Raises:
        TypeError: ``configure`` returned a config that is not one of its plugins' (:func:`reconfigure`).
    """
    loaded = session.loaded
    if loaded.path is None:
        data, session.lines, problems = builtin_document()
    else:
        data, session.lines, problems = parse_yaml(text, source=loaded.source)
    loaded.lines = session.lines
    loaded.problems.extend(problems)
    if problems:
        return
    if not isinstance(data, dict):
        session.problem("the document must be a mapping with `plugins:` (and optionally `defaults:`)", ())
        return
    if not check_top_level_keys(session, data):
        return
    read_defaults(session, data.get("defaults"))
    read_aliases(session, data.get("aliases"))
    candidates = read_entries(session, data.get("plugins"))
    for candidate in candidates:
        resolve(session, candidate, installed)
    check_single_instances(session, candidates)
    for candidate in candidates:
        if candidate.enabled:
            validate(session, candidate)
    if configure is not None and not loaded.problems:
        reconfigure(session, configure, candidates)
    if instantiate and (partial or not loaded.problems):
        for candidate in candidates:
            if candidate.enabled:
                build(session, candidate)
