"""Config problems and where they are: :data:`ConfigPath`, :class:`ConfigProblem`,
:class:`ConfigError`, :func:`format_path`, :func:`line_for`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TypeAlias

import msgspec

from harness_core.errors import LlmError

if TYPE_CHECKING:  # pragma: no cover - typing only
    pass


__all__ = ["ConfigError", "ConfigPath", "ConfigProblem", "format_path", "line_for"]

ConfigPath: TypeAlias = tuple[str | int, ...]
"""A location in the YAML document: mapping keys and sequence indices from the root."""


class ConfigProblem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One problem found in a configuration.

    ``plugin`` is the plugins.yaml key (``"openai:groq"``) when the problem belongs to a plugin,
    ``field`` the field path inside its config (``"routes[0]"``) or inside the document for
    top-level problems, ``line`` the 1-based YAML line, ``source`` the file (or
    ``<built-in default>``). ``message`` never holds a secret.
    """

    message: str
    plugin: str | None = None
    field: str | None = None
    line: int | None = None
    source: str | None = None

    def __str__(self) -> str:
        where = f"{self.source or '<config>'}:{self.line}" if self.line is not None else self.source or "<config>"
        parts = [where]
        if self.plugin is not None:
            parts.append(f"plugin {self.plugin!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        return ", ".join(parts) + f": {self.message}"


class ConfigError(LlmError):
    """An invalid configuration: an :class:`LlmError` with code ``CONFIG`` listing every problem.

    ``problems`` holds the :class:`ConfigProblem` records (at least one); the message lists them
    one per line, each naming the plugin, field path and YAML line.
    """

    def __init__(self, problems: Iterable[ConfigProblem]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        header = f"invalid configuration ({count} problem{'s' if count != 1 else ''}):"
        super().__init__("CONFIG", "\n".join([header, *(f"  - {p}" for p in self.problems)]))


def format_path(path: ConfigPath) -> str:
    """``("routes", 0, "name")`` → ``"routes[0].name"``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def line_for(lines: Mapping[ConfigPath, int], path: ConfigPath) -> int | None:
    """The YAML line of ``path``, or of its longest prefix that has one (``None`` if none does)."""
    for end in range(len(path), -1, -1):
        line = lines.get(path[:end])
        if line is not None:
            return line
    return None
