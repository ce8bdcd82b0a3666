"""One run of the loader over one document: the :class:`Session` every step records on, and the
:class:`Candidate` (a plugins.yaml entry on its way to being built).

A step (:mod:`~harness_core.loader.defaults`, :mod:`~harness_core.loader.entries`,
:mod:`~harness_core.loader.discover`, :mod:`~harness_core.loader.validate`,
:mod:`~harness_core.loader.build`) reads the document, fills the
:class:`~harness_core.loader.config.LoadedConfig` and records what is wrong through the session:
a :meth:`Session.problem` (located at its YAML line; the document is invalid, nothing is built)
or a :meth:`Session.fail` (one plugin failed; the policy of docs/loader.md decides what stops).
Every message is redacted when recorded and again at the end (:meth:`Session.redact_everything`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from harness_core.config import ConfigPath, ConfigProblem, EnvProblem, format_path, line_for, substitute_env
from harness_core.loader.config import LoadedConfig, PluginEntry
from harness_core.plugininfo import PluginFailure

__all__ = ["Candidate", "Session"]


class Candidate:
    """A plugins.yaml entry on its way to being built: ``key`` (``"openai:groq"``), ``name`` (the
    entry-point name), ``raw`` (its config mapping as written), ``line`` (its YAML line) and the
    ``entry`` shown by ``harness plugins``; the steps fill ``target`` (the imported plugin),
    ``config_type`` (its ``Config``, ``None`` when it takes none), ``fails_closed`` and ``config``."""

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

    @property
    def enabled(self) -> bool:
        """Whether no step has failed or refused it yet (its entry's state is ``enabled``)."""
        return self.entry.state == "enabled"


class Session:
    """One run of the loader over one document: ``loaded`` (what is being filled), ``environ``
    (for ``${{ env.NAME }}`` and env fallbacks), ``lines`` (the YAML line of every document path,
    set once the document is parsed)."""

    def __init__(self, loaded: LoadedConfig, environ: Mapping[str, str]) -> None:
        self.loaded = loaded
        self.environ = environ
        self.lines: dict[ConfigPath, int] = {}

    def problem(self, message: str, path: ConfigPath, *, plugin: str | None = None, field: str | None = None) -> None:
        """Record a problem of the document at ``path`` (located at its line or its closest
        parent's), ``message`` redacted."""
        self.loaded.problems.append(
            ConfigProblem(
                message=self.loaded.redact(message),
                plugin=plugin,
                field=field,
                line=line_for(self.lines, path),
                source=self.loaded.source,
            )
        )

    def substitute(self, raw: dict[Any, Any], path: ConfigPath) -> tuple[dict[Any, Any], list[EnvProblem]]:
        """``raw`` (the mapping at ``path``, outside plugin configs) with ``${{ env.NAME }}``
        substituted; each problem is recorded, located, and returned."""
        substituted, env_problems = substitute_env(raw, self.environ, self.loaded.redactor, path)
        for env_problem in env_problems:
            self.problem(env_problem.message, env_problem.path, field=format_path(env_problem.path))
        return substituted, env_problems

    def config_problem(self, candidate: Candidate, message: str, where: ConfigPath) -> None:
        """Record a problem of ``candidate``'s config at ``where`` (a path inside it): the
        candidate is ``invalid`` and its entry says why."""
        self.problem(
            message, ("plugins", candidate.key, *where), plugin=candidate.key, field=format_path(where) or None
        )
        candidate.entry.state = "invalid"
        candidate.entry.message = self.loaded.redact(message)

    def fail(
        self,
        candidate: Candidate,
        stage: Literal["import", "config", "init"],
        message: str,
        *,
        is_middleware: bool | None = None,
        routes: list[str] | None = None,
    ) -> None:
        """Record that ``candidate`` failed at ``stage`` (a :class:`PluginFailure`, ``message``
        prefixed with the plugin and redacted); ``is_middleware`` overrides
        :attr:`Candidate.fails_closed` (and the entry's kind) when given; ``routes`` are the
        routes it would have served, when known."""
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
