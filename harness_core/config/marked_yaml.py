"""``plugins.yaml`` read with PyYAML's safe loader, every value keeping its line:
:func:`parse_yaml` composes the node tree first and returns a map *path → line*, so every problem
names the file line it comes from. Explicit tags are refused and alias expansion is bounded
(:data:`MAX_ALIAS_NODES`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # pragma: no cover - typing only
    import yaml

from harness_core.config.problems import ConfigPath, ConfigProblem, format_path

__all__ = ["MAX_ALIAS_NODES", "parse_yaml"]

MAX_ALIAS_NODES: Final = 10_000
"""The most nodes YAML aliases may expand to in one document; more is refused (a "billion laughs"
document of 9 levels of 9 aliases would expand to 9**9 nodes)."""


def parse_yaml(text: str, *, source: str) -> tuple[Any, dict[ConfigPath, int], list[ConfigProblem]]:
    """Parse one YAML document safely, keeping the line of every value.

    Returns ``(data, lines, problems)``: plain Python data (dicts, lists, scalars), a map from
    each path to the 1-based line of its key (mapping entries) or node, and the problems found
    (syntax errors, duplicate keys with both lines, unhashable keys, recursive aliases, explicit
    tags, bad merge keys). When the document cannot be parsed — or its aliases would expand to
    more than :data:`MAX_ALIAS_NODES` nodes (a "billion laughs" document), or it nests too
    deeply — ``data`` is ``None`` and ``problems`` says why, naming the line.

    Uses ``yaml.SafeLoader`` only (https://pyyaml.org/wiki/PyYAMLDocumentation). Every explicit
    tag (``!x``, ``!!python/...``, even ``!!str``) is refused: a config has no use for them and
    they make a value mean something else than it reads. Merge keys (``<<: *base`` or
    ``<<: [*a, *b]``, https://yaml.org/type/merge.html) are supported: keys written in the mapping
    override merged ones; among several sources the first wins.
    """
    import yaml

    lines: dict[ConfigPath, int] = {}
    problems: list[ConfigProblem] = []
    loader = _loader_type()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, lines, problems
        data = _Builder(loader, source, lines, problems).build(node, ())
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
        message = f"invalid YAML: {exc.problem or exc}"
        opened = exc.context_mark.line + 1 if exc.context_mark is not None else None
        if exc.context and opened is not None and opened != line:  # the unclosed `[` / `{` is elsewhere
            message += f" ({exc.context} that starts at line {opened})"
        lines_near = text.splitlines()[max(0, (line or 1) - 2) : line or 1]
        if any("${{" in near for near in lines_near):
            message += (
                ". `${{ env.NAME }}` inside a flow mapping `{ … }` or list `[ … ]` must be quoted: "
                'key: "${{ env.NAME }}"'
            )
        return None, {}, [ConfigProblem(message=message, line=line, source=source)]
    except _TooManyNodes as exc:
        message = (
            f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes (at alias *{exc.alias.anchor}): "
            "refused, this looks like an alias bomb"
        )
        return None, {}, [ConfigProblem(message=message, line=exc.alias.line, source=source)]
    except RecursionError:  # the composer and the builder recurse once per nesting level
        return None, {}, [ConfigProblem(message="the YAML document nests too deeply", source=source)]
    finally:
        loader.dispose()
    first: dict[tuple[str, int | None], ConfigProblem] = {}
    for problem in problems:  # a problem inside an aliased subtree is found once per use: report it once
        first.setdefault((problem.message, problem.line), problem)
    return data, lines, list(first.values())


_MERGE_TAG: Final = "tag:yaml.org,2002:merge"
_STANDARD_TAG_PREFIX: Final = "tag:yaml.org,2002:"


class _Alias:
    """An alias (``*name``) as composed: the node it refers to, plus where the alias itself is."""

    __slots__ = ("anchor", "line", "target")

    def __init__(self, anchor: str, line: int, target: yaml.Node) -> None:
        self.anchor = anchor
        self.line = line
        self.target = target


class _TooManyNodes(Exception):
    """Aliases expanded past :data:`MAX_ALIAS_NODES`; ``alias`` is the outermost one being expanded."""

    def __init__(self, alias: _Alias) -> None:
        super().__init__(alias.anchor)
        self.alias = alias


@functools.cache
def _loader_type() -> type[yaml.SafeLoader]:
    """A ``SafeLoader`` whose composer keeps aliases visible and remembers explicit tags."""
    import yaml

    class Loader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.tagged: dict[int, tuple[str, int]] = {}
            """``id(node)`` → (tag as written, line) for every node with an explicit tag."""

        def compose_node(self, parent: yaml.Node | None, index: Any) -> Any:
            event: Any = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
            node: Any = super().compose_node(parent, index)  # the anchored node for an alias, never None
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent):
                return _Alias(str(event.anchor), line, node)
            tag = getattr(event, "tag", None)
            if tag is not None:
                shown = "!!" + tag.removeprefix(_STANDARD_TAG_PREFIX) if tag.startswith(_STANDARD_TAG_PREFIX) else tag
                self.tagged[id(node)] = (shown, line)
            return node

    return Loader


class _Builder:
    """Turns a composed YAML node tree into plain data, recording lines and problems."""

    def __init__(self, loader: Any, source: str, lines: dict[ConfigPath, int], problems: list[ConfigProblem]) -> None:
        self.loader = loader
        self.tagged: dict[int, tuple[str, int]] = loader.tagged
        self.source = source
        self.lines = lines
        self.problems = problems
        self.active: set[int] = set()
        self.aliases: list[_Alias] = []
        self.expanded = 0

    def problem(self, message: str, line: int, path: ConfigPath) -> None:
        self.problems.append(
            ConfigProblem(message=message, field=format_path(path) or None, line=line, source=self.source)
        )

    def build(self, node: yaml.Node | _Alias, path: ConfigPath) -> Any:
        import yaml

        if isinstance(node, _Alias):
            self.aliases.append(node)
            try:
                return self.build(node.target, path)
            finally:
                self.aliases.pop()
        if self.aliases:
            self.expanded += 1
            if self.expanded > MAX_ALIAS_NODES:
                raise _TooManyNodes(self.aliases[0])
        line = node.start_mark.line + 1
        self.lines.setdefault(path, line)
        tagged = self.tagged.get(id(node))
        if tagged is not None:
            self.problem(f"YAML tags are not allowed (found {tagged[0]!r}); write the plain value", tagged[1], path)
            return None
        if id(node) in self.active:
            self.problem("recursive YAML alias", line, path)
            return None
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _MERGE_TAG:
                self.problem("a merge key `<<` may only be a key of a mapping", line, path)
                return None
            try:
                return self.loader.construct_object(node, deep=True)
            except Exception as exc:  # ConstructorError for `a: =` (no constructor) …
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

        merge_values = [
            value for key, value in node.value if isinstance(_target(key), yaml.ScalarNode) and _is_merge(key, self)
        ]
        result = self.merged(merge_values, path)
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key_line = _line(key_node)
            if not isinstance(_target(key_node), yaml.ScalarNode):
                self.problem("a mapping key must be a plain value", key_line, path)
                continue
            if _is_merge(key_node, self):
                continue
            before = len(self.problems)
            key = self.build(key_node, (*path, "<key>"))
            del self.lines[(*path, "<key>")]
            if len(self.problems) > before:
                continue
            if key in seen:
                self.problem(f"duplicate key {key!r} (lines {seen[key]} and {key_line})", key_line, (*path, key))
                continue
            seen[key] = key_line
            self.lines[(*path, key)] = key_line
            result[key] = self.build(value_node, (*path, key))
        return result

    def merged(self, values: list[yaml.Node | _Alias], path: ConfigPath) -> dict[Any, Any]:
        """The entries merged in by ``<<`` keys (https://yaml.org/type/merge.html): first source wins."""
        import yaml

        sources: list[tuple[yaml.Node | _Alias, int]] = []  # (a mapping to merge, the line of its `<<` value)
        for value in values:
            target = _target(value)
            line = _line(value)
            sources.extend(
                (item, line) for item in (target.value if isinstance(target, yaml.SequenceNode) else [value])
            )
        result: dict[Any, Any] = {}
        key_lines: dict[Any, int] = {}
        for source, line in sources:
            if not isinstance(_target(source), yaml.MappingNode):
                self.problem("a merge key `<<` takes a mapping or a list of mappings", line, path)
                continue
            built = self.build(source, path)
            for key, value in (built or {}).items():  # None when the source is recursive or tagged
                if key not in result:
                    result[key] = value
                    key_lines[key] = self.lines[(*path, key)]
        for key, line in key_lines.items():
            self.lines[(*path, key)] = line
        return result


def _target(node: yaml.Node | _Alias) -> yaml.Node:
    return node.target if isinstance(node, _Alias) else node


def _line(node: yaml.Node | _Alias) -> int:
    """The 1-based line where ``node`` is written (for an alias: the alias, not its anchor)."""
    return node.line if isinstance(node, _Alias) else node.start_mark.line + 1


def _is_merge(key: yaml.Node | _Alias, builder: _Builder) -> bool:
    target = _target(key)
    return target.tag == _MERGE_TAG and id(target) not in builder.tagged
