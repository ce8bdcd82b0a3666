"""The last steps: a caller's per-load config defaults (:data:`Configure`, :func:`reconfigure`),
then building every plugin (:func:`build`: ``Plugin(config)``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import msgspec

from harness_core.config import ConfigPath
from harness_core.loader.session import Candidate, Session
from harness_core.plugininfo import LoadedPlugin

__all__ = ["Configure", "build", "reconfigure"]

Configure = Callable[[Mapping[str, msgspec.Struct], Mapping[ConfigPath, int]], Mapping[str, msgspec.Struct]]
"""A caller's per-load config defaults (:func:`load_config` ``configure``): given every enabled
plugin's validated config (by plugins.yaml key) and the document's YAML lines (``("plugins", key,
field)`` present = the file sets that field), the configs to build with instead, by key (keys left
out keep their own). Called once per load, after validation, before any plugin is built."""


def reconfigure(session: Session, configure: Configure, candidates: list[Candidate]) -> None:
    """Replace the validated configs with what ``configure`` returns for them (before any build).

    Raises:
        TypeError: a returned key is no enabled plugin with a config, or a returned config is
            not of that plugin's config type.
    """
    configured: dict[str, Candidate] = {}
    configs: dict[str, msgspec.Struct] = {}
    for candidate in candidates:
        if candidate.enabled and candidate.config is not None:
            configured[candidate.key], configs[candidate.key] = candidate, candidate.config
    for key, config in configure(MappingProxyType(configs), MappingProxyType(session.lines)).items():
        target = configured.get(key)
        if target is None or type(config) is not target.config_type:
            raise TypeError(f"configure returned {type(config).__name__} for {key!r}: not that plugin's config")
        target.config = config


def build(session: Session, candidate: Candidate) -> None:
    """Build one plugin: ``Plugin(config)``, ``Plugin()`` for a class without ``Config``, else the
    entry point's object itself; appended to ``session.loaded.plugins``. An exception raised
    while building is recorded as a failure at ``init`` (the plugin's kind decides what stops)."""
    target = candidate.target
    try:
        if candidate.config is not None:
            instance = target(candidate.config)
        elif isinstance(target, type):
            instance = target()
        else:
            instance = target
    except Exception as exc:
        session.fail(candidate, "init", f"failed to start: {type(exc).__name__}: {exc}")
        return
    entry = candidate.entry
    session.loaded.plugins.append(
        LoadedPlugin(key=candidate.key, name=candidate.name, instance=instance, dist=entry.dist, version=entry.version)
    )
