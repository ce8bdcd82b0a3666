"""Config problems and where they are: :data:`ConfigPath`, :class:`ConfigProblem`,
:class:`ConfigError`, :func:`format_path`, :func:`line_for`, and the ``field '…': `` convention of
a config's own checks (:func:`field_message`, read back by :func:`named_field`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TypeAlias

import msgspec

from harness_core.errors import LlmError

if TYPE_CHECKING:  # pragma: no cover - typing only
    pass


__all__ = ["ConfigError", "ConfigPath", "ConfigProblem", "field_message", "format_path", "line_for", "named_field"]

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

    @property
    def place(self) -> str:
        """Where the problem is, as its message is prefixed with: ``plugins.yaml:4, plugin
        'mock:two', field 'routes[0]'`` (the parts known)."""
        where = f"{self.source or '<config>'}:{self.line}" if self.line is not None else self.source or "<config>"
        parts = [where]
        if self.plugin is not None:
            parts.append(f"plugin {self.plugin!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        return ", ".join(parts)

    def __str__(self) -> str:
        return f"{self.place}: {self.message}"


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


_PLAIN_KEY = re.compile(r"[^.\[\]'\"]+")
_NAMED_FIELD = re.compile(r"^field '(?P<path>[A-Za-z_][\w-]*(?:\.[^.\[\]'\"]+|\[\d+\]|\[\"(?:[^\"\\]|\\.)*\"\])*)': ")
_NAMED_PART = re.compile(r"\.([^.\[\]'\"]+)|\[(\d+)\]|\[(\"(?:[^\"\\]|\\.)*\")\]")


def field_message(path: ConfigPath, reason: str) -> str:
    """The message of a config's own check (a ``__post_init__`` raising ``ValueError``) about the
    value at ``path`` inside that config: ``field_message(("aliases", "slow"), "expected …")`` is
    ``"field 'aliases.slow': expected …"``, ``("targets", "mock", 1)`` is ``targets.mock[1]``.

    The loader reports such a message at that value's own YAML line, naming the field path
    (:func:`named_field`; inside a nested struct the path is relative to that struct). A key
    that is not a plain name (holding ``.``, ``[``, ``]`` or a quote: ``gpt-4.1``) is written
    ``["gpt-4.1"]`` (a JSON string) so it is read back exactly.

    Raises:
        ValueError: ``path`` does not start with a field name (a string of letters, digits,
            ``_`` and ``-``, not starting with a digit or ``-``).
    """
    if not path or not isinstance(path[0], str) or re.fullmatch(r"[A-Za-z_][\w-]*", path[0]) is None:
        raise ValueError(f"field_message: the path must start with a field name, got {path!r}")
    out = path[0]
    for part in path[1:]:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return f"field '{out}': {reason}"


def named_field(message: str) -> tuple[ConfigPath, str] | None:
    """``(path, reason)`` of a message written by :func:`field_message` (``"field 'a.b[1]': why"``
    → ``(("a", "b", 1), "why")``), ``None`` for any other message."""
    match = _NAMED_FIELD.match(message)
    if match is None:
        return None
    written = match.group("path")
    first = re.match(r"[A-Za-z_][\w-]*", written)
    assert first is not None  # the pattern starts with a field name
    path: list[str | int] = [first.group(0)]
    for name, index, quoted in _NAMED_PART.findall(written[first.end() :]):
        path.append(name if name else int(index) if index else json.loads(quoted))
    return tuple(path), message[match.end() :]
