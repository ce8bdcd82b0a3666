"""The document's ``plugins:`` section: its keys (``name``, ``name:ident``, ``~name``) become
:class:`~harness_core.loader.session.Candidate` records, in file order (first = outermost)."""

from __future__ import annotations

import re
from typing import Any

from harness_core.config import ConfigPath, line_for
from harness_core.loader.config import PluginEntry
from harness_core.loader.session import Candidate, Session

__all__ = ["check_single_instances", "read_entries"]

_KEY = re.compile(r"(?P<disabled>~)?(?P<name>[A-Za-z0-9_.-]+)(?::(?P<ident>[A-Za-z0-9_.-]+))?")


def read_entries(session: Session, raw: Any) -> list[Candidate]:
    """The enabled entries of the ``plugins:`` section ``raw`` (``None``: absent), each also in
    ``session.loaded.entries``; a disabled one (``~name``) is listed as ``disabled`` only (never
    imported). A malformed key, an instance listed twice and a config that is not a mapping are
    problems (that entry is skipped)."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        session.problem("`plugins` must be a mapping of plugin name to config", ("plugins",))
        return []
    candidates: list[Candidate] = []
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
            session.problem(message, path)
            continue
        key_str: str = key
        instance = key_str.removeprefix("~")
        name = match.group("name")
        if instance in seen:
            session.problem(f"plugin {instance!r} is listed twice (as {seen[instance]!r} and {key_str!r})", path)
            continue
        seen[instance] = key_str
        line = line_for(session.lines, path)
        if match.group("disabled"):
            session.loaded.entries.append(PluginEntry(key=instance, name=name, state="disabled", line=line))
            continue
        if value is not None and not isinstance(value, dict):
            session.problem(
                f"the config of a plugin must be a mapping, got {type(value).__name__}", path, plugin=key_str
            )
            continue
        candidate = Candidate(key_str, name, value or {}, line)
        session.loaded.entries.append(candidate.entry)
        candidates.append(candidate)
    return candidates


def check_single_instances(session: Session, candidates: list[Candidate]) -> None:
    """A plugin without a ``Config`` runs as one instance: its second enabled entry is a problem
    (and ``invalid``)."""
    counts: dict[str, int] = {}
    for candidate in candidates:
        if candidate.enabled and candidate.config_type is None:
            counts[candidate.name] = counts.get(candidate.name, 0) + 1
            if counts[candidate.name] == 2:
                session.problem(
                    f"plugin {candidate.name!r} has no Config: it runs as a single instance only",
                    ("plugins", candidate.key),
                    plugin=candidate.key,
                )
                candidate.entry.state = "invalid"
