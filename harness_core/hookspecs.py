"""The hook specifications of harness (pluggy project name ``harness``).

Plugins implement these with :data:`hookimpl`::

    from harness_core import hookimpl

    class MyPlugin:
        @hookimpl
        def register_adapter(self, register):
            register(["myroute"], MyAdapter())

        @hookimpl(tryfirst=True)          # tryfirst = outermost tier, trylast = innermost
        async def llm_stream(self, options, call_next):
            async for chunk in call_next(options):
                yield chunk

See docs/hooks.md for the rules a middleware keeps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import pluggy

from harness_core.tools import RegisterTool, RegisterToolSource

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.adapter import LlmAdapter
    from harness_core.embedding import EmbedCallNext, EmbeddingAdapter, Embeddings, EmbedOptions
    from harness_core.tools import Tool
    from harness_core.types import GenerateOptions, StreamChunk, ToolCallBlock, ToolResultBlock

__all__ = [
    "PROJECT_NAME",
    "CallNext",
    "CountCallNext",
    "HarnessSpec",
    "ProviderLookup",
    "RegisterAdapter",
    "RegisterEmbedder",
    "RegisterTool",
    "RegisterToolSource",
    "ToolCallNext",
    "hookimpl",
    "hookspec",
]

PROJECT_NAME = "harness"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
"""Marker for harness hook specifications (internal)."""
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marker plugins use to implement harness hooks (``@hookimpl``, ``@hookimpl(tryfirst=True)``)."""

CallNext = Callable[["GenerateOptions"], AsyncIterator["StreamChunk"]]
"""The rest of the chain below a middleware: call it with options, iterate the chunks."""

CountCallNext = Callable[["GenerateOptions"], Awaitable[int]]
"""The rest of the counting chain below an ``llm_count_tokens`` impl: ``await call_next(options)``
gives the input tokens (at the end of the chain, the route's :meth:`LlmAdapter.count_tokens`)."""

ToolCallNext = Callable[["ToolCallBlock"], Awaitable["ToolResultBlock"]]
"""The rest of the tool-call chain below an ``llm_tool_call`` impl: await it with the call, get
the result (at the end of the chain, :meth:`harness_core.tools.Tool.run`)."""


class RegisterAdapter(Protocol):
    """``register(routes, adapter) -> unregister``, bound by the runtime to the calling plugin."""

    def __call__(self, routes: Sequence[str], adapter: LlmAdapter) -> Callable[[], None]: ...


class ProviderLookup(Protocol):
    """``provider_of(route, *, embeddings=False) -> str | None``: the GenAI provider serving
    ``route`` (``gen_ai.provider.name``: ``openai``, ``anthropic`` …), as
    :meth:`Harness.route_provider <harness_core.runtime.Harness.route_provider>` resolves it;
    ``None`` for a route nobody serves or one whose adapter calls no provider itself (a
    ``balance`` pool). Handed to middleware by the ``use_route_providers`` hook."""

    def __call__(self, route: str, *, embeddings: bool = False) -> str | None: ...


class RegisterEmbedder(Protocol):
    """``register(routes, adapter) -> unregister`` for an
    :class:`~harness_core.embedding.EmbeddingAdapter`, bound by the runtime to the calling plugin."""

    def __call__(self, routes: Sequence[str], adapter: EmbeddingAdapter) -> Callable[[], None]: ...


class HarnessSpec:
    """The hooks a harness plugin may implement."""

    @hookspec
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register this plugin's adapters: call ``register(routes, adapter)`` once per adapter.

        A route taken by another plugin raises ``LlmError("DUPLICATE_ROUTE")`` naming both
        owners; a multi-route registration is all-or-nothing. Called once per plugin instance,
        each with its own ``register``, so one failing plugin does not stop the others.
        """

    @hookspec
    def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Middleware: an async generator wrapping every stream (the "waterfall").

        It may pass changed options to ``call_next``, call it zero times (cache hit), once, or
        again before it has yielded anything (retry), and transform, drop or add chunks, as
        long as what it yields keeps docs/stream-obligations.md. Order: ``tryfirst`` impls are outermost,
        ``trylast`` innermost; within a tier the plugin listed first in plugins.yaml is
        outermost. ``wrapper``/``hookwrapper`` impls are rejected.
        """
        raise NotImplementedError  # pragma: no cover - a spec has no body

    @hookspec
    async def llm_tool_call(self, call: ToolCallBlock, tool: Tool, call_next: ToolCallNext) -> ToolResultBlock:
        """Middleware around every tool execution of the tool loop (``Conversation``): a coroutine
        function that awaits ``call_next(call)`` (zero times, once, or more) and returns a
        :class:`~harness_core.types.ToolResultBlock` for ``call.id``. ``tool`` is the
        :class:`~harness_core.tools.Tool` about to run (name, description, ``spec``). Ordered as
        ``llm_stream`` (``tryfirst`` outermost; then plugins.yaml order); ``wrapper``/``hookwrapper``
        impls and plain ``def`` impls are rejected at start. An exception it raises ends the send
        (the history is rolled back). Only calls that run are seen: an unknown tool, a call the
        ``approve`` callback refused and a call over ``max_steps`` are answered without it.
        """
        raise NotImplementedError  # pragma: no cover - a spec has no body

    @hookspec
    def register_embedder(self, register: RegisterEmbedder) -> None:
        """Register this plugin's embedding adapters: ``register(routes, adapter)`` once per adapter
        (docs/embeddings.md). A route may be served by a stream adapter and an embedder (often the
        same object); the rules of ``register_adapter`` apply (``DUPLICATE_ROUTE`` among embedders)."""

    @hookspec
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """Embedding middleware: a coroutine wrapping every embedding call (the second waterfall).

        It may pass changed options to ``call_next``, await it zero times (cache hit), once or
        again (retry), and return a changed result. Ordered as ``llm_stream``; wrappers and
        non-``async def`` impls are rejected (``CONFIG``). See docs/embeddings.md.
        """
        raise NotImplementedError  # pragma: no cover - a spec has no body

    @hookspec
    async def llm_count_tokens(self, options: GenerateOptions, call_next: CountCallNext) -> int:
        """Counting middleware: a coroutine wrapping every :meth:`Harness.count_tokens` call, so a
        counted request is the one the stream would send (``redact`` masks its text, ``balance``
        and ``fallback`` pick the member or target). It may pass changed options to
        ``call_next``, await it zero times, once or again (another target), and return the count
        (input tokens). A middleware that changes nothing the provider sees implements no such
        impl: counting passes it by. Ordered as ``llm_stream``; wrappers and non-``async def``
        impls are rejected (``CONFIG``). Nothing is generated or billed (docs/hooks.md).
        """
        raise NotImplementedError  # pragma: no cover - a spec has no body

    @hookspec
    def register_tools(self, register: RegisterTool) -> None:
        """Offer Python callables as tools to conversations (see :mod:`harness_core.tools`)."""

    @hookspec
    def register_tool_source(self, register: RegisterToolSource) -> None:
        """Offer tools found at run time: call ``register(source)`` with a
        :class:`~harness_core.tools.ToolSource` (an MCP server, ``harness-mcp``). Nothing is
        started here: the source is listed when tools are asked for
        (:meth:`~harness_core.runtime.Harness.select_tools`, ``harness tools``)."""

    @hookspec
    def use_redactor(self, redact: Callable[[str], str]) -> None:
        """Receive the harness's secret masker, once, when the harness starts (before any stream).

        ``redact(text) -> text`` replaces every secret of the configuration (every value taken from
        the environment, every ``Secret`` field, in every representation the
        :class:`~harness_core.secret.Redactor` knows) by ``**********``. A plugin that stores or
        exports data (a ledger, a log, a trace file, telemetry spans) masks every string with it
        before the data leaves the process: route and model names, error text, request and
        response content. An implementation that raises is a plugin failure (a middleware's
        failure stops the start, as a missing masker would leak data). See docs/hooks.md.
        """

    @hookspec
    def use_route_providers(self, provider_of: ProviderLookup) -> None:
        """Receive the harness's route → GenAI provider lookup, once, when the harness starts
        (before any stream), for telemetry that names the provider a stream or embedding call
        goes to (``otel``: ``gen_ai.provider.name``) without importing adapters.

        ``provider_of(route, *, embeddings=False)`` answers from the routes registered when it
        is called (every plugin has registered by the first stream), each resolved once:
        the adapter's :meth:`~harness_core.adapter.LlmAdapter.gen_ai_provider`, by default the
        serving plugin's entry-point name; ``None`` for a route nobody serves or a ``balance``
        pool (the member chosen is ``StreamRecord.served_route``). An implementation that
        raises is a plugin failure, as for ``use_redactor``. See docs/hooks.md.
        """
