"""The runtime: :class:`Harness`, the async entry point of applications (docs/runtime.md).

::

    async with Harness.from_config() as harness:
        async with harness.stream(GenerateOptions(messages=[Message.user("hi")])) as chunks:
            async for chunk in chunks:
                ...
        result = await harness.generate(options)

On enter the runtime registers the plugins with a pluggy ``PluginManager`` (project ``harness``),
hands each plugin that implements ``use_redactor`` the harness's secret masker (plugins that
store or export data mask every string with it), calls each plugin's ``register_adapter`` and
then ``register_tools`` on its own with a ``register`` bound to that plugin's plugins.yaml key
(tools land in :attr:`Harness.tools`), and
composes the ``llm_stream`` chain once (:mod:`harness_core.chain`). On exit it
closes every adapter and every plugin that has an ``aclose`` coroutine.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import pluggy

from harness_core.adapter import LlmAdapter
from harness_core.assembler import BlockAssembler
from harness_core.boundary import AdapterBoundary
from harness_core.callchain import CallChain
from harness_core.chain import Chain, ChainLink, ChainRun, order_middleware, strip_replay
from harness_core.closing import aclose_all, raise_collected
from harness_core.embedding import EmbedBoundary, EmbedChain, EmbeddingAdapter, Embeddings, EmbedOptions
from harness_core.errors import LlmError
from harness_core.fields import FieldTarget
from harness_core.hookspecs import PROJECT_NAME, HarnessSpec, ProviderLookup
from harness_core.plugininfo import (
    MIDDLEWARE_HOOKS,
    REPORTED,
    Defaults,
    LoadedPlugin,
    PluginFailure,
    plugin_name,
    stopping_failures,
)
from harness_core.record import StreamRecord, open_embed_record, open_record
from harness_core.registry import DuplicateRoute, Registration, RouteRegistry
from harness_core.routing import (
    check_routes,
    default_embed_route,
    default_model,
    default_route,
    duplicate_route_places,
    route_suggestion,
)
from harness_core.secret import RedactFilter, Redactor, secrets_of
from harness_core.structured import decode_output, response_format_for
from harness_core.tools import Tool, ToolRegistry
from harness_core.types import (
    FinishReason,
    GenerateOptions,
    Message,
    ModelInfo,
    StreamChunk,
    TokenUsage,
    ToolCallBlock,
    ToolResultBlock,
    _fold_provider,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from harness_core.loader import LoadedConfig

__all__ = ["GenerateResult", "Harness", "StreamContext"]

T = TypeVar("T")

logger = logging.getLogger("harness")


class GenerateResult(msgspec.Struct, frozen=True):
    """The outcome of :meth:`Harness.generate`.

    ``message`` is the assistant message (with ``route``, ``source``, ``model`` and
    ``replay_state`` set: the route and model that served it, which a ``fallback`` may change),
    ``usage`` the reported token usage (``None`` when the provider reported none), ``finish`` why
    the generation ended (never ``error``/``aborted``: those raise).
    """

    message: Message
    usage: TokenUsage | None
    finish: FinishReason

    @property
    def replay_state(self) -> Any:
        """The provider-native state of this turn (``message.replay_state``), opaque JSON."""
        return self.message.replay_state

    @property
    def text(self) -> str:
        """The concatenated text of the reply (reasoning excluded)."""
        return self.message.text


_KNOWN_HOOKS = frozenset(name for name in vars(HarnessSpec) if not name.startswith("_"))


def _unknown_hooks(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    """Names of non-optional hook impls of ``plugin`` that match no hookspec (typos)."""
    return sorted(
        caller.name
        for caller in pm.get_hookcallers(plugin) or ()
        if not caller.has_spec() and any(not i.optionalhook for i in caller.get_hookimpls() if i.plugin is plugin)
    )


def _both(first: Callable[[str], str], second: Callable[[str], str]) -> Callable[[str], str]:
    return lambda text: second(first(text))


def _failure_lines(failures: Sequence[PluginFailure]) -> str:
    return "; ".join(f"plugin {f.key!r} failed at {f.stage}: {f.message}" for f in failures)


class StreamContext:
    """``async with harness.stream(options) as chunks`` — owns closing the stream (docs/runtime.md).

    ``chunks`` is an async iterator of :data:`~harness_core.types.StreamChunk`. On exit (after
    success, ``break``, an exception or cancellation) every generator the chain created is
    closed, outermost first, shielded from cancellation and bounded by
    :attr:`Harness.close_timeout` seconds each. Errors raised while closing are logged; when
    the body itself succeeded they are re-raised after everything was closed (one as is,
    several as an :class:`ExceptionGroup`).
    """

    __slots__ = ("_chain", "_options", "_run", "_strict", "_timeout")

    def __init__(
        self, chain: Chain, options: GenerateOptions, run: ChainRun, timeout: float, *, strict: bool = False
    ) -> None:
        self._chain = chain
        self._options = options
        self._run = run
        self._timeout = timeout
        self._strict = strict

    @property
    def route(self) -> str | None:
        """The route served (the requested one until the boundary runs)."""
        return self._run.route

    @property
    def source(self) -> str | None:
        """The plugins.yaml key owning :attr:`route`, or ``None`` when no plugin owns it."""
        return self._run.source

    @property
    def model(self) -> str | None:
        """The model served (the requested one until the boundary runs)."""
        return self._run.model

    @property
    def record(self) -> StreamRecord:
        """The stream's :class:`~harness_core.record.StreamRecord` (what served it, attempts,
        timings); complete once the ``async with`` block has ended."""
        return self._run.record

    async def __aenter__(self) -> AsyncGenerator[StreamChunk, None]:
        return self._chain.open(self._options, self._run, strict=self._strict)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        run = self._run
        errors = await run.aclose(self._timeout)
        run.record.ended = time.monotonic()
        if exc is None:
            raise_collected(errors, "closing the stream")


class Harness:
    """The plugin host: routes, middleware chain, streams (docs/runtime.md).

    Args:
        plugins: the plugin instances in plugins.yaml order (first = outermost middleware within
            a tier), each a ``(key, instance)`` pair or a
            :class:`~harness_core.plugininfo.LoadedPlugin`; keys must be unique.
        defaults: the route and model used when options leave ``route``/``model`` as ``None``.
            The default model applies only to the default route (never sent to another provider).
        failures: plugins the loader could not build (shown by :attr:`failures` and named by
            ``NO_ADAPTER`` errors).
        redact: masks secrets in text (a :class:`~harness_core.secret.Redactor`, or any
            ``str -> str``; :meth:`from_config` passes the config's): applied to the messages of
            plugins that fail to start. Independently of it, the harness collects the
            :class:`~harness_core.secret.Secret` values of every plugin's ``config`` (and every
            secret of a ``Redactor`` given here) and masks them in everything adapters produce —
            streamed text, failures, errors raised by :meth:`list_models` and
            :meth:`resolve_model` — before middleware or callers see it. Log records carry tracebacks
            too: attach :class:`harness_core.config.RedactFilter` to your log handlers.
        mask: a further ``str -> str`` masker for secrets no list of values names (an
            application's own credential format, e.g. the gateway's ``hk-…`` keys), applied after
            the secrets in what :attr:`redact` returns: what ``use_redactor`` hands to plugins
            (prompt log, ledgers, traces), plugin failure messages and the HTTP loggers' records.
            Streamed output is not rewritten by it.

    A ``Harness`` is used once: ``async with harness:`` starts it (raises ``LlmError("CONFIG")``
    when a middleware plugin fails to start, or an ``llm_stream`` impl is a wrapper or not an
    async generator; :class:`~harness_core.config.ConfigError` when the config names a route no
    plugin serves, :func:`~harness_core.routing.check_routes`); an adapter plugin whose
    ``register_adapter`` or ``register_tools`` raises (a duplicate tool name is
    ``LlmError("CONFIG")`` naming both owners) becomes a
    :class:`~harness_core.plugininfo.PluginFailure`: none of its routes or tools stay, the other
    plugins are unaffected.
    """

    close_timeout: float = 5.0
    """Seconds each close (a stream generator, an adapter, a plugin) may take while shielded."""

    strict: bool = False
    """Check the stream contract after every layer (the adapter and each middleware), so a
    violation names exactly the layer that broke it. Off, only the outermost layer checks (when
    there is middleware) and the error names the chain. ``harness run --json`` and the testing
    kit turn it on."""

    def __init__(
        self,
        plugins: Sequence[tuple[str, object] | LoadedPlugin] = (),
        *,
        defaults: Defaults | None = None,
        failures: Sequence[PluginFailure] = (),
        redact: Callable[[str], str] | None = None,
        mask: Callable[[str], str] | None = None,
    ) -> None:
        loaded: list[LoadedPlugin] = []
        for entry in plugins:
            if not isinstance(entry, LoadedPlugin):
                key, instance = entry
                entry = LoadedPlugin(key=key, name=plugin_name(key), instance=instance)
            if any(p.key == entry.key for p in loaded):
                raise ValueError(f"plugin key {entry.key!r} is listed twice")
            loaded.append(entry)
        self._plugins = tuple(loaded)
        self.defaults: Defaults = defaults if defaults is not None else Defaults()
        """The ``defaults:`` of plugins.yaml."""
        self._failures = list(failures)
        secrets = Redactor()
        if isinstance(redact, Redactor):
            secrets.update(redact)
        for plugin in loaded:
            secrets_of(plugin.instance, secrets)
        self._redact: Callable[[str], str] = secrets if redact is None or redact is secrets else _both(redact, secrets)
        if mask is not None:
            self._redact = _both(self._redact, mask)
        self._registry = RouteRegistry()
        self._embedders = RouteRegistry(EmbeddingAdapter)
        self._embed_chain: EmbedChain | None = None
        self._embed_links: tuple[ChainLink, ...] = ()
        self._count_chain: CallChain[GenerateOptions, int] | None = None
        self._count_links: tuple[ChainLink, ...] = ()
        self._tools = ToolRegistry()
        self._boundary = AdapterBoundary(self._registry, self._failures, secrets)
        self._embed_boundary = EmbedBoundary(self._embedder, self._no_embedder, self._boundary.scrub)
        self._chain: Chain | None = None
        self._tool_middleware: list[tuple[str, Any, tuple[str, ...]]] = []
        self._used = False
        self._log_filter = RedactFilter(self._redact)
        self._loaded: LoadedConfig | None = None  # set by from_loaded: the aliases and YAML lines check_routes reads

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_config(cls, path: str | Path | None = None) -> Harness:
        """Build a harness from plugins.yaml via :func:`harness_core.loader.load_config`.

        ``path`` ``None`` searches as :func:`harness_core.loader.find_config` does
        (``HARNESS_CONFIG``, ``./plugins.yaml`` …); with no file found the loader's built-in
        default (the mock provider) is used.

        Raises:
            ConfigError: (an :class:`LlmError` with code ``CONFIG``) when the configuration is
                invalid (from the loader) or when a plugin that fails closed failed to load
                (:meth:`LoadedConfig.require_complete`: dropping, say, a redaction layer silently
                would leak data); the message lists every such plugin, located.
        """
        from harness_core.loader import find_config, load_config

        return cls.from_loaded(load_config(find_config(path)).require_complete())

    @classmethod
    def from_loaded(
        cls,
        config: LoadedConfig,
        *,
        failures: Sequence[PluginFailure] | None = None,
        mask: Callable[[str], str] | None = None,
    ) -> Harness:
        """A harness over an already loaded configuration: its plugins in order, its defaults, its
        load ``failures`` (or the ``failures`` given) and its secret masker
        (:attr:`LoadedConfig.redactor`: every ``Secret`` field and every value taken from the
        environment), which the adapter boundary applies and ``use_redactor`` hands to plugins,
        followed by ``mask`` when given (see the constructor).
        Every harness built from a :class:`LoadedConfig` is built here, so none starts without it.
        """
        harness = cls(
            config.plugins,
            defaults=config.defaults,
            failures=config.failures if failures is None else failures,
            redact=config.redactor,
            mask=mask,
        )
        harness._loaded = config
        return harness

    @property
    def plugins(self) -> tuple[LoadedPlugin, ...]:
        """The plugins in plugins.yaml order."""
        return self._plugins

    @property
    def tools(self) -> ToolRegistry:
        """The tools plugins offered through ``register_tools`` (filled when the harness starts)."""
        return self._tools

    async def select_tools(self, patterns: Sequence[str]) -> list[Tool]:
        """The tools ``patterns`` name (exact names or globs such as ``time_*``), in pattern
        order; the tool sources some pattern could match are listed first (an MCP server starts
        here, not before). No pattern, no tool: nothing runs unless named.

        Raises:
            LlmError: ``CONFIG`` for a pattern matching no tool (listing the known ones), or the
                error of a source that could have offered it (naming its plugin).
            RuntimeError: the harness is not running.
        """
        self._started_chain()
        if not patterns:
            return []
        await self._tools.load(patterns)
        return self._tools.match(patterns)

    async def list_tools(self) -> tuple[list[tuple[Tool, str]], dict[str, LlmError]]:
        """Every tool the configuration offers, with its owner (plugins.yaml key), after listing
        every tool source (starting each); and the sources that failed, by owner.

        Raises:
            RuntimeError: the harness is not running.
        """
        self._started_chain()
        failures = await self._tools.load()
        return [(item, self._tools.owner(item.name) or "") for item in self._tools], failures

    @property
    def failures(self) -> tuple[PluginFailure, ...]:
        """Plugins that failed to load (from the loader) or to register their adapters."""
        return tuple(self._failures)

    def no_adapter(self, route: str | None) -> LlmError:
        """The error a stream for ``route`` gets when no adapter serves it (what ``harness run``
        reports): ``CONFIG`` (or ``NO_ADAPTER`` for a failure at start) ``route 'R' is unavailable:
        <the plugin's located failure>`` when the adapter plugin that would serve ``route`` failed;
        else ``NO_ADAPTER`` naming the known routes and any adapter plugins that failed. Returned,
        not raised; for a served route it is the ``NO_ADAPTER`` text all the same."""
        return self._boundary.no_adapter(route)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Harness:
        if self._used:
            raise RuntimeError("a Harness can be started only once; build a new one")
        self._used = True
        self._log_filter.attach()  # httpx/httpcore DEBUG records quote headers: scrub them while running
        try:
            self._start()
        except BaseException:
            with contextlib.suppress(Exception):  # close errors were logged; the start error matters
                await self._close()
            raise
        return self

    def _start(self) -> None:
        pm = pluggy.PluginManager(PROJECT_NAME)
        pm.add_hookspecs(HarnessSpec)
        broken: list[PluginFailure] = []
        registered: list[LoadedPlugin] = []
        for plugin in self._plugins:
            is_middleware = any(pm.parse_hookimpl_opts(plugin.instance, hook) is not None for hook in MIDDLEWARE_HOOKS)
            try:
                pm.register(plugin.instance, name=plugin.key)
            except Exception as exc:
                broken.append(self._fail(plugin, exc, is_middleware))
                continue
            unknown = _unknown_hooks(pm, plugin.instance)
            if unknown:  # a misspelt llm_stream would silently drop a layer: fail closed, as middleware
                pm.unregister(plugin.instance)
                error = TypeError(f"implements unknown hooks {unknown} (known: {sorted(_KNOWN_HOOKS)})")
                broken.append(self._fail(plugin, error, True))
            else:
                registered.append(plugin)
        redactor_impls = {impl.plugin_name: impl for impl in pm.hook.use_redactor.get_hookimpls()}
        provider_impls = {impl.plugin_name: impl for impl in pm.hook.use_route_providers.get_hookimpls()}
        adapter_impls = {impl.plugin_name: impl for impl in pm.hook.register_adapter.get_hookimpls()}
        tool_impls = {impl.plugin_name: impl for impl in pm.hook.register_tools.get_hookimpls()}
        source_impls = {impl.plugin_name: impl for impl in pm.hook.register_tool_source.get_hookimpls()}
        embedder_impls = {impl.plugin_name: impl for impl in pm.hook.register_embedder.get_hookimpls()}
        middleware_keys = {
            impl.plugin_name for hook in MIDDLEWARE_HOOKS for impl in getattr(pm.hook, hook).get_hookimpls()
        }
        for plugin in registered:
            hooks: tuple[tuple[str, dict[str, pluggy.HookImpl], Callable[[str], object]], ...] = (
                ("use_redactor", redactor_impls, self._masker),
                ("use_route_providers", provider_impls, self._provider_lookup),
                ("register_adapter", adapter_impls, self._registry.bind),
                ("register_embedder", embedder_impls, self._embedders.bind),
                ("register_tools", tool_impls, self._tools.bind),
                ("register_tool_source", source_impls, self._tools.bind_source),
            )
            for hook_name, impls, bind in hooks:
                impl = impls.get(plugin.key)
                if impl is None:
                    continue
                try:
                    returned = impl.function(bind(plugin.key))
                    if inspect.iscoroutine(returned):  # an `async def` impl: its body never ran
                        returned.close()
                        raise TypeError(f"{hook_name} must be a plain `def`, not `async def`")
                except Exception as exc:  # the plugin is out: none of its routes or tools stay
                    self._registry.remove_owner(plugin.key)
                    self._embedders.remove_owner(plugin.key)
                    self._tools.remove_owner(plugin.key)
                    broken.append(self._fail(plugin, exc, plugin.key in middleware_keys))
                    break
        stopping = stopping_failures(broken)  # the start policy's one owner (docs/loader.md)
        if stopping:
            raise LlmError("CONFIG", f"middleware plugins failed to start: {_failure_lines(stopping)}")
        check_routes(self, self._loaded)  # a route the config names that nothing serves: ConfigError
        keys = [p.key for p in self._plugins]
        middleware = order_middleware(pm.hook.llm_stream.get_hookimpls(), keys)
        call_impls = pm.hook.llm_tool_call.get_hookimpls()
        argnames = {impl.plugin_name: impl.argnames for impl in call_impls}  # an impl may take fewer arguments
        tool_middleware = order_middleware(call_impls, keys, "llm_tool_call")
        self._tool_middleware = [(link.key, function, argnames[link.key]) for link, function in tool_middleware]
        embed_middleware = order_middleware(pm.hook.llm_embed.get_hookimpls(), keys, "llm_embed")
        self._chain = Chain(middleware, self._boundary)
        self._embed_links = tuple(link for link, _ in embed_middleware)
        self._embed_chain = EmbedChain([function for _, function in embed_middleware], self._embed_boundary)
        count_middleware = order_middleware(pm.hook.llm_count_tokens.get_hookimpls(), keys, "llm_count_tokens")
        self._count_links = tuple(link for link, _ in count_middleware)
        self._count_chain = CallChain([function for _, function in count_middleware], self._count_boundary)

    def _masker(self, key: str) -> Callable[[str], str]:
        """What ``use_redactor`` receives (the same masker for every plugin)."""
        return self._redact

    def _provider_lookup(self, key: str) -> ProviderLookup:
        """What ``use_route_providers`` receives (the same lookup for every plugin)."""
        return self.route_provider

    @property
    def redact(self) -> Callable[[str], str]:
        """The harness's secret masker, ``str -> str``: the ``redact`` given to the constructor
        combined with every :class:`~harness_core.secret.Secret` of the plugins' configs (what
        plugins receive through the ``use_redactor`` hook)."""
        return self._redact

    def _fail(self, plugin: LoadedPlugin, exc: Exception, is_middleware: bool) -> PluginFailure:
        text = str(exc) if isinstance(exc, LlmError) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, DuplicateRoute):  # where plugins.yaml declares the route twice
            text += duplicate_route_places(self._loaded, exc)
        message = self._redact(text)
        logger.error(  # the failure is also in self.failures, which callers show
            "plugin %r failed to start: %s", plugin.key, message, exc_info=exc, extra={REPORTED: True}
        )
        failure = PluginFailure(
            key=plugin.key, name=plugin.name, message=message, stage="register", is_middleware=is_middleware
        )
        self._failures.append(failure)
        return failure

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._close()

    async def _close(self) -> None:
        """Close every adapter, then every plugin with an ``aclose`` coroutine; raise afterwards.

        Each close is shielded and bounded by :attr:`close_timeout`; every error is logged. One
        error is re-raised as is; several as an :class:`ExceptionGroup`.
        """
        self._chain = None
        self._embed_chain = None
        self._count_chain = None
        closers: dict[int, Any] = {}
        for adapter in [*self._registry.adapters(), *self._embedders.adapters()]:
            closers.setdefault(id(adapter), adapter)
        for plugin in self._plugins:
            if inspect.iscoroutinefunction(getattr(plugin.instance, "aclose", None)):
                closers.setdefault(id(plugin.instance), plugin.instance)
        try:
            errors = await aclose_all(closers.values(), self.close_timeout, "adapter or plugin")
        finally:
            self._log_filter.detach()
        raise_collected(errors, "closing the harness")

    # ------------------------------------------------------------------ streams

    def _started_chain(self) -> Chain:
        if self._chain is None:
            raise RuntimeError("the Harness is not running: use `async with harness:` first")
        return self._chain

    def default_route(self) -> str | None:
        """The route used when a request names none (:func:`harness_core.routing.default_route`):
        ``defaults.route``; without it, the only route served when exactly one is (a config with
        one route needs no ``defaults:``); else ``None`` (such a request ends with ``NO_ADAPTER``)."""
        return default_route(self.defaults, self._registry.routes())

    def apply_defaults(self, options: GenerateOptions) -> GenerateOptions:
        """``options`` with the route and model a request would be served by: ``route`` ``None``
        becomes :meth:`default_route`; ``model`` ``None`` becomes ``defaults.model`` when it
        applies to the route (:func:`harness_core.routing.default_model`: the default route, or
        every route when no default route is configured), else the route adapter's
        :attr:`~harness_core.adapter.LlmAdapter.default_model`. :meth:`stream`,
        :meth:`resolve_model`, :meth:`count_tokens` and the CLI use it. Returns ``options`` itself
        when nothing changes; never raises (an unknown route stays as given)."""
        route, model = options.route, options.model
        if route is None:
            route = self.default_route()
        if model is None:
            model = default_model(self.defaults, route)
        registration = self._registry.get(route) if model is None and route is not None else None
        if registration is not None:  # the adapter's own default (LlmAdapter.default_model)
            model = registration.adapter.default_model
        if route is options.route and model is options.model:
            return options
        return msgspec.structs.replace(options, route=route, model=model)

    def stream(self, options: GenerateOptions) -> StreamContext:
        """Start a generation: ``async with harness.stream(options) as chunks: async for chunk in chunks``.

        Defaults fill ``provider``/``model`` when ``None`` (then the route adapter's
        :attr:`~harness_core.adapter.LlmAdapter.default_model`); history messages whose ``source`` is
        not the plugin owning the target route lose their ``replay_state``, and reasoning blocks a
        signature made by another provider or model, before the chain sees them
        (:func:`strip_replay`). Provider failures never raise here: they arrive as ``finish{error}``.

        Raises:
            RuntimeError: the harness is not running.
        """
        chain = self._started_chain()
        options = self.apply_defaults(options)
        route = options.route
        registration = self._registry.get(route) if route is not None else None
        owner = registration.owner if registration is not None else None
        options, record = open_record(strip_replay(options, owner))
        record.requested_route, record.requested_model = route, options.model  # after the defaults
        return StreamContext(
            chain, options, ChainRun(route, owner, options.model, record), self.close_timeout, strict=self.strict
        )

    async def run_tool(self, tool: Tool, call: ToolCallBlock) -> ToolResultBlock:
        """Execute ``call`` with ``tool`` through every ``llm_tool_call`` middleware (outermost
        first; the innermost calls :meth:`Tool.run`): what the tool loop of
        :class:`~harness_core.conversation.Conversation` does for each call it runs.

        Raises:
            RuntimeError: the harness is not running.
            LlmError: ``PROTOCOL`` naming the plugin when a middleware returns something other
                than a ``ToolResultBlock``; what a middleware raises propagates.
        """
        self._started_chain()
        links = list(self._tool_middleware)

        def below(depth: int) -> Callable[[ToolCallBlock], Awaitable[ToolResultBlock]]:
            if depth == len(links):
                return tool.run
            key, function, names = links[depth]
            inner = below(depth + 1)

            async def call_next(current: ToolCallBlock) -> ToolResultBlock:
                given = {"call": current, "tool": tool, "call_next": inner}
                result = await function(**{name: given[name] for name in names})
                if not isinstance(result, ToolResultBlock):
                    raise LlmError(
                        "PROTOCOL",
                        f"plugin {key!r}: llm_tool_call returned {type(result).__name__}, not a ToolResultBlock",
                    )
                return result

            return call_next

        return await below(0)(call)

    async def generate(self, options: GenerateOptions) -> GenerateResult:
        """Run :meth:`stream` to the end and assemble the reply (the same code path).

        Returns:
            the assistant message (``route``, ``source``, ``replay_state`` set), usage and finish.

        Raises:
            LlmError: the failure of a ``finish{error}``; ``ABORTED`` for ``finish{aborted}``;
                ``PROTOCOL`` when a middleware ended the stream without a finish.
            RuntimeError: the harness is not running.
        """
        assembler = BlockAssembler()
        feed = assembler.feed
        context = self.stream(options)
        async with context as chunks:
            async for chunk in chunks:
                feed(chunk)
        finish = assembler.finish
        assert finish is not None, "the boundary and the guard always end a stream with one finish"
        if finish.kind == "error":
            if finish.failure is None:
                raise LlmError("INTERNAL", "the stream finished with an error but no failure")
            raise LlmError.from_failure(finish.failure)
        if finish.kind == "aborted":
            message = finish.failure.message if finish.failure is not None else "aborted"
            raise LlmError("ABORTED", message)
        reply = assembler.message(route=context.route, source=context.source, model=context.model)
        return GenerateResult(message=reply, usage=assembler.usage, finish=finish)

    async def generate_object(
        self, options: GenerateOptions, type_: type[T], *, name: str | None = None, strict: bool = False
    ) -> T:
        """Generate a reply constrained to the JSON schema of ``type_`` and decode it.

        The schema comes from :func:`msgspec.json.schema` (a ``msgspec.Struct``, dataclass,
        ``TypedDict`` … see :mod:`harness_core.structured`) and is sent as
        ``options.response_format`` (replacing any there); the reply text is decoded with msgspec.

        Args:
            options: the request (its ``response_format`` is replaced).
            type_: the type to decode the reply into.
            name: the schema name sent to the provider (default: the type's name).
            strict: ask for constrained decoding (OpenAI's strict mode restricts the schema:
                every property required, ``additionalProperties: false``).

        Returns:
            the decoded value, an instance of ``type_``.

        Raises:
            InvalidOutputError: ``INVALID_OUTPUT``: the reply is not JSON or does not match
                ``type_``; names the JSON path of the first mismatch and keeps the raw text.
            LlmError: as :meth:`generate` (``UNSUPPORTED`` where the route has no structured
                output).
            TypeError: msgspec cannot describe ``type_``.
        """
        fmt = response_format_for(type_, name=name, strict=strict)
        result = await self.generate(msgspec.structs.replace(options, response_format=fmt))
        return decode_output(result.text, type_, provider=result.message.source)

    # ------------------------------------------------------------------ introspection

    def routes(self) -> dict[str, str]:
        """Route → the plugins.yaml key of the plugin owning it, in registration order."""
        return self._registry.routes()

    def route_owner(self, route: str, *, embeddings: bool = False) -> str | None:
        """The plugins.yaml key of the plugin owning ``route`` (``None`` for a route nobody
        serves), looked up without building :meth:`routes`; with ``embeddings``, the owner of
        its embedder first (:meth:`embed_routes`), else of its stream adapter."""
        registration = self._embedders.get(route) if embeddings else None
        if registration is None:
            registration = self._registry.get(route)
        return registration.owner if registration is not None else None

    def route_provider(self, route: str, *, embeddings: bool = False) -> str | None:
        """The GenAI provider serving ``route``, as the OpenTelemetry GenAI conventions name it
        (``gen_ai.provider.name``): what its adapter declares
        (:meth:`~harness_core.adapter.LlmAdapter.gen_ai_provider`), by default the entry-point
        name of its plugin (``openai`` for ``openai:eu``); ``None`` for a route nobody serves or
        an adapter that calls no provider itself (a ``balance`` pool). Resolved once per
        registration, then a dictionary lookup. With ``embeddings``, the provider of its
        embedder first, else of its stream adapter (as :meth:`route_owner`). Middleware
        receive this method through the ``use_route_providers`` hook."""
        registration = self._embedders.get(route) if embeddings else None
        if registration is None:
            registration = self._registry.get(route)
        return registration.gen_ai_provider() if registration is not None else None

    def chain(self, route: str | None = None) -> list[ChainLink]:
        """The middleware a stream passes through, outermost first.

        With ``route``, the plugin owning that route is appended as the last link (tier
        ``"adapter"``). Raises ``LlmError("NO_ADAPTER")`` for an unknown route and
        ``RuntimeError`` when the harness is not running.
        """
        links = list(self._started_chain().links)
        if route is not None:
            registration = self._registry.get(route)
            if registration is None:
                raise self._boundary.no_adapter(route)
            links.append(ChainLink(registration.owner, "adapter"))
        return links

    def _adapter(self, route: str | None) -> Any:
        return self._registration(route).adapter

    def _registration(self, route: str | None) -> Registration:
        self._started_chain()
        registration = self._registry.get(route) if route is not None else None
        if registration is None:
            raise self._boundary.no_adapter(route)
        return registration

    def resolve_model(self, route: str | None = None, model: str | None = None) -> ModelInfo:
        """What the adapter of ``route`` knows about ``model`` (defaults fill ``None``), with ``route`` set.

        Raises:
            LlmError: ``NO_ADAPTER`` for an unknown route; ``BAD_REQUEST`` when no model is given
                and none is configured; whatever the adapter raises (``NOT_FOUND`` …).
        """
        options = self.apply_defaults(GenerateOptions(route=route, model=model))
        adapter = self._adapter(options.route)
        if options.model is None:
            raise LlmError("BAD_REQUEST", f"no model given for route {options.route!r} and no default model")
        try:
            info: ModelInfo = adapter.resolve_model(options.model)
        except LlmError as exc:
            raise self._boundary.scrub(exc) from None
        return msgspec.structs.replace(info, route=options.route)

    def route_wire(self, route: str) -> str | None:
        """The request wire the adapter of ``route`` speaks (:attr:`LlmAdapter.wire`; ``None``
        for none in particular). Raises ``LlmError("NO_ADAPTER")`` for an unknown route."""
        wire: str | None = self._adapter(route).wire
        return wire

    def route_target(self, route: str | None) -> FieldTarget:
        """``route`` as the field rule needs it (:mod:`harness_core.fields`): its adapter's wire,
        whether the adapter takes provider options (:attr:`LlmAdapter.takes_provider_options`)
        and the ``provider_options`` key (the entry-point name of its plugin: ``openai:work`` →
        ``openai``). Raises ``LlmError("NO_ADAPTER")`` for an unknown route (or ``None``)."""
        registration = self._registration(route)
        adapter = registration.adapter
        key = plugin_name(registration.owner)
        served = str(route)  # not None: an unknown route raised
        return FieldTarget(served, adapter.wire, key, bool(adapter.takes_provider_options))

    async def count_tokens(self, options: GenerateOptions) -> int:
        """The input tokens ``options`` would take on its route, counted by the provider
        (:meth:`LlmAdapter.count_tokens`) through the ``llm_count_tokens`` middleware, so the
        request counted is the one a stream would send (``redact`` masks it; ``balance`` and
        ``fallback`` pick the member or target); defaults fill ``provider``/``model`` and foreign
        ``replay_state`` and signatures are dropped for the route finally counted, as for :meth:`stream`. Nothing
        is generated, logged or billed.

        Raises:
            LlmError: ``NO_ADAPTER`` for an unknown route; ``UNSUPPORTED`` when the adapter cannot
                count; whatever the adapter raises (``BAD_REQUEST``, HTTP errors …), scrubbed.
            RuntimeError: the harness is not running.
        """
        self._started_chain()
        chain = self._count_chain
        assert chain is not None, "started with the stream chain"
        return await chain(self.apply_defaults(options))

    async def _count_boundary(self, options: GenerateOptions) -> int:
        """The innermost counting layer: the route's adapter counts ``options`` (replay state of
        other plugins dropped); its ``LlmError`` is scrubbed of secrets. An adapter that keeps
        :meth:`LlmAdapter.count_tokens`'s default is refused here, ``UNSUPPORTED`` naming the
        route, the model and the plugin the caller can act on (not the adapter's class)."""
        registration = self._registration(options.route)
        adapter = registration.adapter
        if type(adapter).count_tokens is LlmAdapter.count_tokens:  # the default: no counter
            model = f" (model {options.model!r})" if options.model is not None else ""
            raise LlmError(
                "UNSUPPORTED",
                f"route {options.route!r} cannot count tokens{model}: its adapter, of plugin "
                f"{registration.owner!r}, has no token counter",
            )
        options = strip_replay(options, registration.owner)
        try:
            counted: int = await adapter.count_tokens(options)
        except LlmError as exc:
            raise self._boundary.scrub(exc) from None
        return counted

    def count_chain(self) -> list[ChainLink]:
        """The ``llm_count_tokens`` middleware a count passes through, outermost first.

        Raises:
            RuntimeError: the harness is not running.
        """
        self._started_chain()
        return list(self._count_links)

    async def list_models(self, route: str | None = None) -> list[ModelInfo]:
        """The models the adapter of ``route`` (default route when ``None``) can serve, ``route`` set.

        Model ids come from the provider (a proxy may echo anything, a key included), so every
        id passes the harness's secret masker (:attr:`redact`) before it reaches a caller (the
        CLI's ``harness models``, the gateway's ``GET /v1/models``).

        Raises:
            LlmError: ``NO_ADAPTER`` for an unknown route; ``UNSUPPORTED`` when the adapter
                cannot list models.
        """
        route = route if route is not None else self.default_route()
        adapter = self._adapter(route)
        try:
            models: list[ModelInfo] = await adapter.list_models()
        except LlmError as exc:
            raise self._boundary.scrub(exc) from None
        redact = self._redact
        return [msgspec.structs.replace(info, route=route, model=redact(info.model)) for info in models]

    # ------------------------------------------------------------------ embeddings

    def embed_routes(self) -> dict[str, str]:
        """Route → the plugins.yaml key of the plugin embedding for it, in registration order."""
        return self._embedders.routes()

    def embed_chain(self) -> list[ChainLink]:
        """The ``llm_embed`` middleware an embedding call passes through, outermost first.

        Raises:
            RuntimeError: the harness is not running.
        """
        self._started_chain()
        return list(self._embed_links)

    def default_embed_route(self) -> str | None:
        """The route an embedding request naming none uses (:func:`harness_core.routing.default_embed_route`):
        ``defaults.route`` when it embeds, else the only embedding route when exactly one is
        registered, else ``None``."""
        return default_embed_route(self.defaults, self._embedders.routes())

    async def list_embedding_models(self, route: str | None = None) -> list[ModelInfo]:
        """The embedding models the embedder of ``route`` (:meth:`default_embed_route` when
        ``None``) lists (:meth:`EmbeddingAdapter.list_embedding_models`; an embedder that lists
        none gives ``[]``), each with ``route`` set and its id through the secret masker (as
        :meth:`list_models`). ``harness models`` marks them.

        Raises:
            LlmError: ``NO_ADAPTER`` for a route nothing embeds, ``UNSUPPORTED`` naming a route
                that streams but does not embed; whatever the embedder raises (scrubbed).
            RuntimeError: the harness is not running.
        """
        self._started_chain()
        route = route if route is not None else self.default_embed_route()
        found = self._embedder(route) if route is not None else None
        if found is None:
            raise self._no_embedder(route)
        try:
            models = await found[0].list_embedding_models()
        except LlmError as exc:
            raise self._boundary.scrub(exc) from None
        redact = self._redact
        return [msgspec.structs.replace(info, route=route, model=redact(info.model)) for info in models]

    def _embedder(self, route: str) -> tuple[EmbeddingAdapter, str] | None:
        registration = self._embedders.get(route)
        return None if registration is None else (registration.adapter, registration.owner)

    def _no_embedder(self, route: str | None) -> LlmError:
        """``UNSUPPORTED`` for a route that streams but does not embed, else ``NO_ADAPTER`` (the
        closest embedding route when one is close: ``did you mean``,
        :func:`~harness_core.routing.route_suggestion`)."""
        known = ", ".join(repr(r) for r in self._embedders.routes()) or "none"
        if route is not None and self._registry.get(route) is not None:
            return LlmError("UNSUPPORTED", f"route {route!r} does not serve embeddings; embedding routes: {known}")
        if route is None:
            return LlmError("NO_ADAPTER", f"no route given and no default embedding route; embedding routes: {known}")
        error = self._boundary.no_adapter(route)
        if error.code != "NO_ADAPTER":  # the plugin that would serve it failed: say why
            return error
        hint = route_suggestion(route, self._embedders.routes())  # the one "did you mean" of a route
        return LlmError("NO_ADAPTER", f"no embedder serves route {route!r}{hint}; embedding routes: {known}")

    async def embed(self, options: EmbedOptions | Sequence[str], **fields: Any) -> Embeddings:
        """Embed texts through the ``llm_embed`` chain and the route's embedder (docs/embeddings.md).

        ``options`` is an :class:`~harness_core.embedding.EmbedOptions`, or the list of inputs
        with the other fields as keywords (``route=``, ``model=``, ``dimensions=``,
        ``input_type=``; ``provider=`` is the deprecated old name of ``route=`` and warns).
        ``route`` ``None`` uses :meth:`default_embed_route`. Inputs beyond
        the adapter's batch limit are sent in several requests and joined.

        Returns:
            one float32 vector per input, with ``model``, ``usage``, ``route`` and ``source``.

        Raises:
            LlmError: ``NO_ADAPTER`` for an unknown route, ``UNSUPPORTED`` for a route that does
                not embed, and whatever the provider answers (secrets masked).
            RuntimeError: the harness is not running.
        """
        self._started_chain()
        chain = self._embed_chain
        assert chain is not None, "started with the stream chain"
        _fold_provider("Harness.embed", fields)
        if not isinstance(options, EmbedOptions):
            options = EmbedOptions(inputs=list(options), **fields)
        elif fields:
            options = msgspec.structs.replace(options, **fields)
        if options.route is None:
            options = msgspec.structs.replace(options, route=self.default_embed_route())
        with open_embed_record(options):  # the core opens the call's record, the middleware write it
            return await chain(options)
