"""Configuration building blocks: :class:`EnvFallback`, marked YAML, env substitution, :class:`ConfigError`.

``plugins.yaml`` is read with PyYAML's safe loader only. The node tree is composed first so every
value keeps its YAML line (:func:`parse_yaml` returns a map *path → line*), which lets every
problem name the file line it comes from. Values may reference the environment with
``${{ env.NAME }}`` — a lookup, never an evaluation (:func:`substitute_env`); every value taken
from the environment is treated as a secret and scrubbed from messages (:class:`Redactor`).

The loader (:mod:`harness_core.loader`) puts these pieces together.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import msgspec

from harness_core.errors import LlmError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import yaml

__all__ = [
    "MASK",
    "ConfigError",
    "ConfigPath",
    "ConfigProblem",
    "EnvFallback",
    "Redactor",
    "format_path",
    "line_for",
    "parse_yaml",
    "substitute_env",
]

MASK: Final = "**********"
"""What a secret value is replaced with in messages (the same mask :class:`~harness_core.Secret` shows)."""

ConfigPath: TypeAlias = tuple[str | int, ...]
"""A location in the YAML document: mapping keys and sequence indices from the root."""


class EnvFallback:
    """Config-field marker: fill the field from an environment variable when YAML omits it.

    Used as ``Annotated`` metadata on a plugin ``Config`` field::

        api_key: Annotated[Secret | None, EnvFallback("OPENAI_API_KEY",
                                                      only_when={"base_url": "https://api.openai.com/v1"})] = None

    Args:
        var: the environment variable name.
        only_when: field name → value; the fallback applies only when every listed field has
            exactly that value (the YAML value when given, else the field's default). A name
            that is not a field of the Config never matches. Use it so a vendor's key is never
            sent to another host (SPEC §3.10).

    The loader applies it only when the field is absent from the YAML mapping and the variable
    is set and non-empty; the value is then treated as a secret.
    """

    __slots__ = ("only_when", "var")

    def __init__(self, var: str, only_when: Mapping[str, object] | None = None) -> None:
        self.var = var
        self.only_when: dict[str, object] = dict(only_when or {})

    def __repr__(self) -> str:
        return f"EnvFallback({self.var!r}, only_when={self.only_when!r})"


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


class Redactor:
    """Scrubs secret values (everything substituted from the environment) out of text.

    Values shorter than 3 characters are not scrubbed (they would mangle every message and
    cannot be secrets worth the name).
    """

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: set[str] = set()

    def add(self, value: str) -> None:
        """Treat ``value`` as a secret from now on."""
        if len(value) >= 3:
            self._values.add(value)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def __call__(self, text: str) -> str:
        """``text`` with every known secret replaced by :data:`MASK` (longest first)."""
        for value in sorted(self._values, key=len, reverse=True):
            text = text.replace(value, MASK)
        return text

    def __repr__(self) -> str:
        return f"Redactor({len(self._values)} secrets)"


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


def parse_yaml(text: str, *, source: str) -> tuple[Any, dict[ConfigPath, int], list[ConfigProblem]]:
    """Parse one YAML document safely, keeping the line of every value.

    Returns ``(data, lines, problems)``: plain Python data (dicts, lists, scalars), a map from
    each path to the 1-based line of its key (mapping entries) or node, and the problems found
    (syntax errors, duplicate keys with both lines, unhashable keys, recursive aliases). When
    the document cannot be parsed, ``data`` is ``None`` and ``problems`` says why.
    Uses ``yaml.SafeLoader`` only (https://pyyaml.org/wiki/PyYAMLDocumentation): no Python tags.
    """
    import yaml

    lines: dict[ConfigPath, int] = {}
    problems: list[ConfigProblem] = []
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
            problems.append(ConfigProblem(message=f"invalid YAML: {exc.problem or exc}", line=line, source=source))
            return None, lines, problems
        if node is None:
            return None, lines, problems
        builder = _Builder(loader, source, lines, problems)
        return builder.build(node, ()), lines, problems
    finally:
        loader.dispose()


class _Builder:
    """Turns a composed YAML node tree into plain data, recording lines and problems."""

    def __init__(
        self, loader: yaml.SafeLoader, source: str, lines: dict[ConfigPath, int], problems: list[ConfigProblem]
    ) -> None:
        self.loader = loader
        self.source = source
        self.lines = lines
        self.problems = problems
        self.active: set[int] = set()

    def problem(self, message: str, line: int, path: ConfigPath) -> None:
        self.problems.append(
            ConfigProblem(message=message, field=format_path(path) or None, line=line, source=self.source)
        )

    def build(self, node: yaml.Node, path: ConfigPath) -> Any:
        import yaml

        line = node.start_mark.line + 1
        self.lines.setdefault(path, line)
        if id(node) in self.active:
            self.problem("recursive YAML alias", line, path)
            return None
        if isinstance(node, yaml.ScalarNode):
            try:
                return self.loader.construct_object(node, deep=True)
            except Exception as exc:  # ConstructorError for unsafe tags, ValueError for `!!int abc` …
                self.problem(f"invalid YAML value: {getattr(exc, 'problem', None) or exc}", line, path)
                return None
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.build(item, (*path, index)) for index, item in enumerate(node.value)]
            assert isinstance(node, yaml.MappingNode)
            return self.build_mapping(node, path)
        finally:
            self.active.discard(id(node))

    def build_mapping(self, node: yaml.MappingNode, path: ConfigPath) -> dict[Any, Any]:
        import yaml

        result: dict[Any, Any] = {}
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                self.problem("a mapping key must be a plain value", key_line, path)
                continue
            key = self.build(key_node, (*path, "<key>"))
            del self.lines[(*path, "<key>")]
            if key in seen:
                self.problem(f"duplicate key {key!r} (lines {seen[key]} and {key_line})", key_line, (*path, key))
                continue
            seen[key] = key_line
            self.lines[(*path, key)] = key_line
            result[key] = self.build(value_node, (*path, key))
        return result


_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_ENV_REFERENCE = re.compile(r"\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*")


def substitute_env(
    data: Any, environ: Mapping[str, str], redactor: Redactor, path: ConfigPath = ()
) -> tuple[Any, list[tuple[ConfigPath, str]]]:
    """Replace every ``${{ env.NAME }}`` in the strings of ``data`` by the variable's value.

    Only that one form is understood (a lookup, never an evaluation). Returns the new data and a
    list of ``(path, message)`` problems: a missing variable (named), or any other ``${{ … }}``
    expression. Every substituted value is added to ``redactor``: it is secret from then on.
    Keys are not substituted.
    """
    problems: list[tuple[ConfigPath, str]] = []

    def walk(value: Any, here: ConfigPath) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, (*here, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, (*here, i)) for i, v in enumerate(value)]
        if not isinstance(value, str) or "${{" not in value:
            return value

        def replace(match: re.Match[str]) -> str:
            reference = _ENV_REFERENCE.fullmatch(match.group(1))
            if reference is None:
                problems.append(
                    (here, f"unsupported expression {match.group(0)!r}: only ${{{{ env.NAME }}}} is allowed")
                )
                return ""
            name = reference.group(1)
            found = environ.get(name)
            if found is None:
                problems.append((here, f"environment variable {name} is not set"))
                return ""
            redactor.add(found)
            return found

        return _EXPRESSION.sub(replace, value)

    return walk(data, path), problems
