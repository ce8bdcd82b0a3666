"""Python callables as tools: JSON-schema parameters from type hints, safe execution.

A :class:`Tool` wraps a sync or async function. Its JSON Schema comes from the function's type
hints (every parameter, with defaults and ``Annotated[..., msgspec.Meta(description=...)]``), or
from a msgspec Struct when the function takes exactly one Struct parameter; the schema is made by
:func:`msgspec.json.schema_components` (JSON Schema 2020-12). Arguments stay raw JSON text until
:meth:`Tool.run` parses them (docs/vocabulary.md): invalid JSON, arguments that do not match the schema, and
exceptions raised by the tool all become a :class:`~harness_core.types.ToolResultBlock` with
``is_error=True`` that is sent back to the model, never an exception in the caller.

Plugins offer tools through the ``register_tools(register)`` hook; applications pass
:func:`tool`-decorated functions to a :class:`~harness_core.conversation.Conversation`.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, get_type_hints

import anyio
import msgspec

from harness_core.errors import LlmError
from harness_core.hookspecs import RegisterTool
from harness_core.types import ToolCallBlock, ToolResultBlock, ToolSpec

__all__ = ["Tool", "ToolRegistry", "tool"]

logger = logging.getLogger("harness.tools")


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ").strip()


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

    Raises:
        TypeError: a parameter lacks a type hint, or is ``*args``/``**kwargs``.

    The function's return value becomes the result text: a ``str`` as is, anything else as
    JSON (msgspec). Sync functions run in a worker thread so they never block the event loop;
    when the run is cancelled (an abort), an async tool is cancelled and a sync one is abandoned
    (its thread runs to completion in the background, its result discarded). A ``Tool`` stays
    callable: ``tool_instance(*args, **kwargs)`` calls the function directly.
    """

    def __init__(self, func: Callable[..., Any], *, name: str | None = None, description: str | None = None) -> None:
        self.func = func
        self.name = name or func.__name__
        self.description = description if description is not None else _first_paragraph(func.__doc__)
        self._is_async = inspect.iscoroutinefunction(func)
        self._struct_param: str | None = None
        hints = get_type_hints(func, include_extras=True)
        parameters = list(inspect.signature(func).parameters.values())
        for parameter in parameters:
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise TypeError(f"tool {self.name!r}: *args/**kwargs cannot be described to a model")
            if parameter.name not in hints:
                raise TypeError(f"tool {self.name!r}: parameter {parameter.name!r} needs a type hint")
        only = parameters[0] if len(parameters) == 1 else None
        if only is not None and isinstance(hints[only.name], type) and issubclass(hints[only.name], msgspec.Struct):
            self._struct_param = only.name
            self._args_type: type[msgspec.Struct] = hints[only.name]
        else:
            fields = [
                (p.name, hints[p.name]) if p.default is inspect.Parameter.empty else (p.name, hints[p.name], p.default)
                for p in parameters
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
        if self._struct_param is not None:
            kwargs = {self._struct_param: arguments}
        else:
            kwargs = msgspec.structs.asdict(arguments)
        try:
            if self._is_async:
                result = await self.func(**kwargs)
            else:
                call_sync = functools.partial(self.func, **kwargs)
                result = await anyio.to_thread.run_sync(call_sync, abandon_on_cancel=True)
            text = result if isinstance(result, str) else msgspec.json.encode(result).decode()
        except Exception as exc:  # a failing tool (or an unencodable result) is reported to the model, and logged
            logger.warning("tool %r raised", self.name, exc_info=True)
            return ToolResultBlock(call.id, f"tool {self.name!r} failed: {type(exc).__name__}: {exc}", is_error=True)
        return ToolResultBlock(call.id, text)

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
    """

    def __init__(self) -> None:
        self._tools: dict[str, tuple[Tool, str]] = {}

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

    def remove_owner(self, owner: str) -> None:
        """Forget every tool ``owner`` registered (rolls back a plugin whose hook failed)."""
        for tool_name in [n for n, (_, o) in self._tools.items() if o == owner]:
            del self._tools[tool_name]

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
