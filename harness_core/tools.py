"""Python callables as tools: JSON-schema parameters from type hints, safe execution.

A :class:`Tool` wraps a sync or async function. Its JSON Schema comes from the function's type
hints (every parameter, with defaults and ``Annotated[..., msgspec.Meta(description=...)]``), or
from a msgspec Struct when the function takes exactly one Struct parameter; the schema is made by
:func:`msgspec.json.schema_components` (JSON Schema 2020-12). Arguments stay raw JSON text until
:meth:`Tool.run` parses them (docs/vocabulary.md): invalid JSON, arguments that do not match the schema, and
exceptions raised by the tool all become a :class:`~harness_core.types.ToolResultBlock` with
``is_error=True`` that is sent back to the model, never an exception in the caller.

Plugins offer tools through the ``register_tools(register)`` hook, and tools discovered at run
time (an MCP server's, ``harness-mcp``) through ``register_tool_source(register)``: a
:class:`ToolSource` is listed only when tools are asked for (:meth:`ToolRegistry.load`), so a
server starts only for a run that offers tools. Applications pass :func:`tool`-decorated
functions to a :class:`~harness_core.conversation.Conversation`. Names given to
:meth:`ToolRegistry.match` are exact names or shell-style globs (``time_*``, :mod:`fnmatch`,
case-sensitive): no tool runs unless the caller named it (docs/hooks.md#register_toolsregister).
"""

from __future__ import annotations

import fnmatch
import functools
import inspect
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, get_type_hints

import anyio
import msgspec

from harness_core.errors import LlmError
from harness_core.types import FileBlock, ToolCallBlock, ToolResultBlock, ToolSpec

__all__ = ["RegisterTool", "RegisterToolSource", "Tool", "ToolError", "ToolRegistry", "ToolSource", "tool"]

logger = logging.getLogger("harness.tools")


_GLOB = re.compile(r"[*?[]")


class RegisterTool(Protocol):
    """``register(func, *, name=None, description=None)``, bound to the calling plugin."""

    def __call__(
        self, func: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> None: ...


class RegisterToolSource(Protocol):
    """``register(source)``, bound by the runtime to the calling plugin (its plugins.yaml key)."""

    def __call__(self, source: ToolSource) -> None: ...


class ToolError(Exception):
    """Raised by a tool to answer the model with exactly ``message`` as an ``is_error`` result
    (no ``tool 'x' failed:`` prefix, no traceback logged): a failure the tool expected, such as
    an MCP server's ``isError`` result."""


class ToolSource(Protocol):
    """Tools found at run time (``register_tool_source``): an MCP server's, listed on demand.

    ``owner`` is the plugins.yaml key of the plugin that registered the source (``mcp:time``).
    :meth:`tool_prefix` is what every name the source lists starts with (``None``: unknown), so
    a caller naming other tools never starts it; :meth:`list_tools` lists (starting what it
    needs) and raises ``LlmError`` naming the plugin when it cannot.
    """

    def tool_prefix(self, owner: str) -> str | None: ...

    async def list_tools(self, owner: str) -> Sequence[Tool]: ...


def _could_match(pattern: str, prefix: str | None) -> bool:
    """Whether a name starting with ``prefix`` can match ``pattern`` (an exact name or a glob):
    the pattern's literal head and the prefix agree (conservative: ``True`` when unsure)."""
    if prefix is None:
        return True
    glob = _GLOB.search(pattern)
    if glob is None:
        return pattern.startswith(prefix)
    head = pattern[: glob.start()]
    return head.startswith(prefix) or prefix.startswith(head)


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ").strip()


def _result_of(value: Any) -> tuple[str, tuple[FileBlock, ...]]:
    """The text and files of a tool function's return value (see :class:`Tool`).

    Raises:
        TypeError: a list holding files also holds something that is not a ``str``.
        msgspec.EncodeError: a value that cannot be encoded as JSON.
    """
    if isinstance(value, FileBlock):
        return "", (value,)
    if isinstance(value, list) and any(isinstance(item, FileBlock) for item in value):
        texts = [item for item in value if not isinstance(item, FileBlock)]
        if not all(isinstance(item, str) for item in texts):
            raise TypeError("a result holding files may hold only str and FileBlock items")
        return "\n\n".join(texts), tuple(item for item in value if isinstance(item, FileBlock))
    return (value if isinstance(value, str) else msgspec.json.encode(value).decode()), ()


def _schema_for(struct_type: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema object of ``struct_type``, with nested definitions under ``$defs``."""
    (_root,), components = msgspec.json.schema_components([struct_type], ref_template="#/$defs/{name}")
    schema = dict(components.pop(struct_type.__name__))
    schema.pop("title", None)
    if components:
        schema["$defs"] = components
    return schema


class Tool:
    """A callable the model may call, with its :class:`~harness_core.types.ToolSpec`.

    Args:
        func: a sync or async function. Either every parameter is type-annotated (they become
            the schema's properties; parameters with defaults are optional), or it takes exactly
            one msgspec Struct parameter, whose fields are the schema.
        name: the tool name shown to the model (default: the function's ``__name__``).
        description: the description shown to the model (default: the first paragraph of the
            function's docstring).
        parameters: a JSON Schema object given as is (a tool described elsewhere: an MCP
            server's ``inputSchema``). The function then takes one argument, the decoded JSON
            object (a ``dict``); checking it against the schema is the function's job.

    Raises:
        TypeError: a parameter lacks a type hint, or is ``*args``/``**kwargs`` (without
            ``parameters``).

    The function's return value becomes the result text: a ``str`` as is, anything else as
    JSON (msgspec); a :class:`~harness_core.types.FileBlock`, or a list of ``str`` and
    ``FileBlock`` items holding at least one file, becomes a result with ``files`` (the texts
    joined by blank lines); raising :class:`ToolError` answers with its message as an error. Sync
    functions run in a worker thread so they never block the event loop;
    when the run is cancelled (an abort), an async tool is cancelled and a sync one is abandoned
    (its thread runs to completion in the background, its result discarded). A ``Tool`` stays
    callable: ``tool_instance(*args, **kwargs)`` calls the function directly.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> None:
        self.func = func
        self.name = name or func.__name__
        self.description = description if description is not None else _first_paragraph(func.__doc__)
        self._is_async = inspect.iscoroutinefunction(func)
        self._struct_param: str | None = None
        self._raw = parameters is not None
        if parameters is not None:
            self.parameters: dict[str, Any] = parameters
            self._decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(dict[str, Any])
            return
        hints = get_type_hints(func, include_extras=True)
        signature = list(inspect.signature(func).parameters.values())
        for parameter in signature:
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise TypeError(f"tool {self.name!r}: *args/**kwargs cannot be described to a model")
            if parameter.name not in hints:
                raise TypeError(f"tool {self.name!r}: parameter {parameter.name!r} needs a type hint")
        only = signature[0] if len(signature) == 1 else None
        if only is not None and isinstance(hints[only.name], type) and issubclass(hints[only.name], msgspec.Struct):
            self._struct_param = only.name
            self._args_type: type[msgspec.Struct] = hints[only.name]
        else:
            fields = [
                (p.name, hints[p.name]) if p.default is inspect.Parameter.empty else (p.name, hints[p.name], p.default)
                for p in signature
            ]
            self._args_type = msgspec.defstruct(
                f"{self.name}_arguments", fields, kw_only=True, forbid_unknown_fields=True
            )
        self.parameters = _schema_for(self._args_type)
        self._decoder = msgspec.json.Decoder(self._args_type)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly (no parsing, no error capture)."""
        return self.func(*args, **kwargs)

    @property
    def spec(self) -> ToolSpec:
        """The :class:`~harness_core.types.ToolSpec` offered to the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    async def run(self, call: ToolCallBlock) -> ToolResultBlock:
        """Execute ``call`` and return its result block (``is_error=True`` on any failure).

        The arguments are parsed here, and only here. Cancellation propagates (a sync tool's
        worker thread is abandoned, see the class docstring).
        """
        try:
            arguments = self._decoder.decode(call.arguments)
        except msgspec.ValidationError as exc:
            return ToolResultBlock(call.id, f"invalid arguments for tool {self.name!r}: {exc}", is_error=True)
        except msgspec.DecodeError as exc:
            return ToolResultBlock(call.id, f"arguments of tool {self.name!r} are not valid JSON: {exc}", is_error=True)
        if self._raw:
            call_sync = functools.partial(self.func, arguments)
        elif self._struct_param is not None:
            call_sync = functools.partial(self.func, **{self._struct_param: arguments})
        else:
            call_sync = functools.partial(self.func, **msgspec.structs.asdict(arguments))
        try:
            if self._is_async:
                result = await call_sync()
            else:
                result = await anyio.to_thread.run_sync(call_sync, abandon_on_cancel=True)
            text, files = _result_of(result)
        except ToolError as exc:  # an expected failure, answered as the tool worded it
            return ToolResultBlock(call.id, str(exc), is_error=True)
        except Exception as exc:  # a failing tool (or an unencodable result) is reported to the model, and logged
            logger.warning("tool %r raised", self.name, exc_info=True)
            return ToolResultBlock(call.id, f"tool {self.name!r} failed: {type(exc).__name__}: {exc}", is_error=True)
        return ToolResultBlock(call.id, text, files=files)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def tool(func: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None) -> Any:
    """Decorator turning a function into a :class:`Tool` (``@tool`` or ``@tool(name=...)``)."""
    if func is None:
        return functools.partial(Tool, name=name, description=description)
    return Tool(func, name=name, description=description)


class ToolRegistry:
    """Tools by name, each remembering the plugin that registered it (``harness.tools``).

    ``register(func_or_tool, *, owner, name=None, description=None)`` raises
    ``LlmError("CONFIG")`` when the name is already taken by another tool, naming both owners;
    registering the same function under the same name and description again (e.g. by a second
    instance of one plugin, ``mock`` and ``mock:fast``) is accepted and keeps the first owner. The runtime hands
    each plugin's ``register_tools`` hook a ``register`` bound to its plugins.yaml key
    (:meth:`bind`) and rolls a failing plugin's tools back (:meth:`remove_owner`).

    :class:`ToolSource` s (:meth:`bind_source`) are listed by :meth:`load`, once each, when tools
    are asked for; their tools then join the others (same duplicate rule).
    """

    def __init__(self) -> None:
        self._tools: dict[str, tuple[Tool, str]] = {}
        self._sources: dict[str, ToolSource] = {}
        self._loaded: set[str] = set()
        self._source_failures: dict[str, LlmError] = {}

    def register(
        self,
        func: Callable[..., Any] | Tool,
        *,
        owner: str,
        name: str | None = None,
        description: str | None = None,
    ) -> Tool:
        """Add a tool; returns the :class:`Tool`."""
        item = func if isinstance(func, Tool) else Tool(func, name=name, description=description)
        taken = self._tools.get(item.name)
        if taken is not None:
            if taken[0].func is item.func and taken[0].spec == item.spec:
                return taken[0]  # the same tool again (a second instance of one plugin): nothing to do
            raise LlmError("CONFIG", f"tool {item.name!r} is registered by {taken[1]!r} and again by {owner!r}")
        self._tools[item.name] = (item, owner)
        return item

    def bind(self, owner: str) -> RegisterTool:
        """The ``register(func, *, name=None, description=None)`` handed to plugin ``owner``'s
        ``register_tools`` hook. Raises like :meth:`register` (and ``TypeError`` for a function
        that cannot be described, see :class:`Tool`)."""

        def register(func: Callable[..., Any], *, name: str | None = None, description: str | None = None) -> None:
            self.register(func, owner=owner, name=name, description=description)

        return register

    def bind_source(self, owner: str) -> Callable[[ToolSource], None]:
        """The ``register(source)`` handed to plugin ``owner``'s ``register_tool_source`` hook
        (one source per plugin instance; a second replaces the first)."""

        def register(source: ToolSource) -> None:
            self._sources[owner] = source

        return register

    def remove_owner(self, owner: str) -> None:
        """Forget every tool and the source ``owner`` registered (rolls back a plugin whose hook failed)."""
        for tool_name in [n for n, (_, o) in self._tools.items() if o == owner]:
            del self._tools[tool_name]
        self._sources.pop(owner, None)

    @property
    def sources(self) -> dict[str, ToolSource]:
        """The registered tool sources by owner (plugins.yaml key), listed or not."""
        return dict(self._sources)

    @property
    def source_failures(self) -> dict[str, LlmError]:
        """The sources whose listing failed (by owner), with the error (kept: never retried)."""
        return dict(self._source_failures)

    async def load(self, patterns: Iterable[str] | None = None) -> dict[str, LlmError]:
        """List the sources not listed yet, concurrently, and register their tools.

        With ``patterns`` (exact names or globs) only sources whose :meth:`ToolSource.tool_prefix`
        some pattern could match are listed (the others are not started); ``None`` lists all.
        A source that raises (or registers a name taken by another owner) is recorded, not
        raised: returns the failures so far, by owner (:attr:`source_failures`). Raises only on
        cancellation.
        """
        wanted = None if patterns is None else list(patterns)
        pending = [
            (owner, source)
            for owner, source in self._sources.items()
            if owner not in self._loaded
            and (wanted is None or any(_could_match(p, source.tool_prefix(owner)) for p in wanted))
        ]

        async def list_one(owner: str, source: ToolSource) -> None:
            try:
                listed = list(await source.list_tools(owner))
                for item in listed:
                    taken = self._tools.get(item.name)
                    if taken is not None and taken[1] != owner:
                        raise LlmError(
                            "CONFIG", f"tool {item.name!r} is registered by {taken[1]!r} and again by {owner!r}"
                        )
            except Exception as exc:  # recorded and reported to whoever asks for these tools
                error = (
                    exc
                    if isinstance(exc, LlmError)
                    else LlmError("CONFIG", f"plugin {owner!r} could not list its tools: {type(exc).__name__}: {exc}")
                )
                logger.debug("tool source %r failed: %s", owner, error)  # reported by load()'s caller
                self._source_failures[owner] = error
                return
            for item in listed:
                self._tools[item.name] = (item, owner)

        async with anyio.create_task_group() as group:
            for owner, source in pending:
                self._loaded.add(owner)
                group.start_soon(list_one, owner, source)
        return dict(self._source_failures)

    def match(self, patterns: Iterable[str]) -> list[Tool]:
        """The tools ``patterns`` name, in pattern order (a glob's matches in registration order),
        each once. A pattern that matches nothing raises ``LlmError("CONFIG")`` listing the
        known tools, or the error of a failed source that could have offered it."""
        selected: dict[str, Tool] = {}
        for pattern in patterns:
            if _GLOB.search(pattern):
                found = [t for n, (t, _) in self._tools.items() if fnmatch.fnmatchcase(n, pattern)]
            else:
                exact = self.get(pattern)
                found = [exact] if exact is not None else []
            if not found:
                for owner, error in self._source_failures.items():
                    if _could_match(pattern, self._sources[owner].tool_prefix(owner)):
                        raise error
                known = ", ".join(sorted(self._tools)) or "none"
                what = "no tool matches" if _GLOB.search(pattern) else "unknown tool"
                raise LlmError("CONFIG", f"{what} {pattern!r}; registered tools: {known}")
            for item in found:
                selected.setdefault(item.name, item)
        return list(selected.values())

    def names(self) -> list[str]:
        """The registered tool names, in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        entry = self._tools.get(name)
        return entry[0] if entry else None

    def owner(self, name: str) -> str | None:
        """The plugins.yaml key of the plugin that registered ``name``, or ``None``."""
        entry = self._tools.get(name)
        return entry[1] if entry else None

    def select(self, names: Iterable[str]) -> list[Tool]:
        """The tools called ``names``, in that order. Raises ``LlmError("CONFIG")`` for an unknown
        name, listing the known ones."""
        selected = []
        for tool_name in names:
            found = self.get(tool_name)
            if found is None:
                known = ", ".join(sorted(self._tools)) or "none"
                raise LlmError("CONFIG", f"unknown tool {tool_name!r}; registered tools: {known}")
            selected.append(found)
        return selected

    def __iter__(self) -> Iterator[Tool]:
        return (entry[0] for entry in self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
