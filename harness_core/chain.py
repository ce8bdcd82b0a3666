"""The ``llm_stream`` middleware chain (docs/runtime.md, docs/hooks.md).

The runtime composes the chain once, from ``pm.hook.llm_stream.get_hookimpls()`` sorted
explicitly by (tier, position in plugins.yaml): ``tryfirst`` outermost, ``trylast`` innermost, and
within a tier the plugin listed first is outermost (:func:`order_middleware`). Pluggy is
synchronous, so the hook is never called through ``pm.hook.llm_stream(...)``: each stream builds
``call_next`` functions over the ordered impls (:meth:`Chain.open`) and records every async
generator they create in a :class:`ChainRun`, which closes them all, outermost first.

The innermost layer is the :class:`~harness_core.boundary.AdapterBoundary` (its own module);
closing is :mod:`harness_core.closing`. Both used to live here: ``AdapterBoundary``,
``aclose_all``, ``close_stream``, ``raise_collected`` and ``DEFAULT_CLOSE_BOUND`` stay
importable from this module.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from operator import itemgetter
from typing import Any, Literal

import msgspec
import pluggy

from harness_core.assembler import BlockAssembler
from harness_core.boundary import AdapterBoundary, strip_replay, terminal
from harness_core.closing import DEFAULT_CLOSE_BOUND, aclose_all, close_stream, raise_collected
from harness_core.contract import StreamContract
from harness_core.errors import LlmError
from harness_core.hookspecs import CallNext
from harness_core.record import StreamRecord
from harness_core.types import Finish, GenerateOptions, StreamChunk

__all__ = [
    "DEFAULT_CLOSE_BOUND",
    "AdapterBoundary",
    "Chain",
    "ChainLink",
    "ChainRun",
    "MiddlewareFunction",
    "Tier",
    "aclose_all",
    "close_stream",
    "order_middleware",
    "raise_collected",
    "strip_replay",
    "terminal",
]

logger = logging.getLogger("harness")

Tier = Literal["tryfirst", "normal", "trylast", "adapter"]
"""Where a link sits: a middleware tier (outermost to innermost), or the route's adapter."""

MiddlewareFunction = Callable[[GenerateOptions, CallNext], AsyncGenerator[StreamChunk, None]]
"""An ``llm_stream`` impl: ``(options, call_next)`` → async generator of chunks."""

_TIER_RANK: dict[Tier, int] = {"tryfirst": 0, "normal": 1, "trylast": 2}


class ChainLink(msgspec.Struct, frozen=True):
    """One link of the chain as ``harness.chain()`` describes it.

    ``key`` is the plugins.yaml key of the plugin; ``tier`` is ``"tryfirst"``, ``"normal"`` or
    ``"trylast"`` for middleware, ``"adapter"`` for the plugin owning the route at the end.
    """

    key: str
    tier: Tier


def order_middleware(
    hookimpls: Sequence[pluggy.HookImpl], keys: Sequence[str], hook: str = "llm_stream"
) -> list[tuple[ChainLink, Any]]:
    """Sort the impls of a middleware hook outermost first: by (tier, position of the plugin key in ``keys``).

    ``keys`` lists the plugins.yaml keys in file order; each impl's ``plugin_name`` is its key.
    ``hook`` is ``"llm_stream"`` (impls must be async generator functions), ``"llm_tool_call"`` or
    ``"llm_embed"`` (coroutine functions).

    Raises:
        LlmError: ``CONFIG`` naming the plugin when an impl is a ``wrapper=``/``hookwrapper=``
            impl or not of the kind ``hook`` needs.
    """
    stream = hook == "llm_stream"
    position = {key: i for i, key in enumerate(keys)}
    ordered: list[tuple[int, int, ChainLink, Any]] = []
    for impl in hookimpls:
        key = impl.plugin_name
        if impl.wrapper or impl.hookwrapper:
            raise LlmError(
                "CONFIG",
                f"plugin {key!r}: {hook} may not be a wrapper=/hookwrapper= hookimpl; "
                "a middleware is a plain @hookimpl "
                + ("async generator" if stream else "coroutine function")
                + " that calls call_next",
            )
        if stream and not inspect.isasyncgenfunction(impl.function):
            raise LlmError(
                "CONFIG",
                f"plugin {key!r}: llm_stream must be an async generator function (async def … yield), "
                f"got {impl.function!r}",
            )
        if not stream and not inspect.iscoroutinefunction(impl.function):
            raise LlmError(
                "CONFIG",
                f"plugin {key!r}: {hook} must be a coroutine function (async def … return result), "
                f"got {impl.function!r}",
            )
        tier: Tier = "tryfirst" if impl.tryfirst else "trylast" if impl.trylast else "normal"
        ordered.append((_TIER_RANK[tier], position.get(key, len(keys)), ChainLink(key, tier), impl.function))
    ordered.sort(key=itemgetter(0, 1))
    return [(link, function) for _, _, link, function in ordered]


class ChainRun:
    """The state of one stream through the chain: every generator it created, and its record.

    ``record`` is the stream's :class:`~harness_core.record.StreamRecord` (a new one unless
    given); the boundary writes the route and model it called into it and sets ``source``, the
    plugins.yaml key owning that route (a middleware such as ``fallback`` may rewrite
    ``options.route`` and ``options.model``; the last boundary call wins).
    """

    __slots__ = ("generators", "record", "source")

    def __init__(
        self, route: str | None, source: str | None, model: str | None = None, record: StreamRecord | None = None
    ) -> None:
        self.generators: list[tuple[int, AsyncGenerator[StreamChunk, None]]] = []
        """``(depth, generator)`` in creation order; depth 0 is the outermost layer."""
        self.record = record if record is not None else StreamRecord(requested_route=route, requested_model=model)
        self.source = source

    @property
    def route(self) -> str | None:
        """The route served: the record's served route, else the requested one."""
        return self.record.served()[0]

    @property
    def model(self) -> str | None:
        """The model served: the record's served model, else the requested one."""
        return self.record.served()[1]

    async def aclose(self, bound: float) -> list[Exception]:
        """Close every generator of this stream, outermost first (by depth, then creation order).

        Each close runs shielded from cancellation and bounded by ``bound`` seconds, so a
        cancelled caller still runs every ``finally``. Returns the exceptions the closes raised
        (each already logged), so the caller can re-raise them once everything is closed.
        """
        generators = [generator for _, generator in sorted(self.generators, key=itemgetter(0))]
        self.generators.clear()
        return await aclose_all(generators, bound, "stream generator")


Innermost = Callable[[GenerateOptions, ChainRun], AsyncGenerator[StreamChunk, None]]


class Chain:
    """The ordered middleware plus the innermost layer, composed once per runtime.

    ``links`` describe the middleware outermost first; ``functions`` are their ``llm_stream``
    impls in the same order; ``innermost`` is the final adapter boundary.
    """

    __slots__ = ("_codes", "_functions", "_innermost", "links")

    def __init__(self, middleware: Sequence[tuple[ChainLink, MiddlewareFunction]], innermost: Innermost) -> None:
        self.links: tuple[ChainLink, ...] = tuple(link for link, _ in middleware)
        self._functions: tuple[MiddlewareFunction, ...] = tuple(function for _, function in middleware)
        self._innermost = innermost
        self._codes = {function.__code__: link.key for link, function in middleware}

    def raiser(self, exc: BaseException) -> str | None:
        """The plugins.yaml key of the middleware that raised ``exc`` (the innermost middleware
        frame in its traceback), or ``None`` when no middleware frame is in it."""
        key = None
        tb = exc.__traceback__
        while tb is not None:
            key = self._codes.get(tb.tb_frame.f_code, key)
            tb = tb.tb_next
        return key

    def open(
        self, options: GenerateOptions, run: ChainRun, *, strict: bool = False
    ) -> AsyncGenerator[StreamChunk, None]:
        """Create the outermost generator of one stream; every generator is recorded in ``run``.

        With no middleware this is the boundary's generator itself (no layer is added) unless
        ``strict``. With middleware, the outermost layer checks the whole stream contract
        (:class:`~harness_core.contract.StreamContract`): a violation ends the stream there with
        the open blocks closed and ``finish{error, PROTOCOL}`` naming the middleware chain.
        ``strict`` checks the output of every layer instead (the adapter's and each
        middleware's), so the error names exactly the layer that broke the contract.
        """
        generators = run.generators
        innermost = self._innermost
        depth = len(self._functions)

        def call_boundary(options: GenerateOptions) -> AsyncGenerator[StreamChunk, None]:
            generator = innermost(options, run)
            generators.append((depth, generator))
            if strict:
                generator = _guard(generator, f"the adapter of route {options.route!r}", options)
                generators.append((depth, generator))
            return generator

        call_next: Callable[[GenerateOptions], AsyncGenerator[StreamChunk, None]] = call_boundary
        for layer in range(depth - 1, -1, -1):
            culprit = f"middleware {self.links[layer].key!r}" if strict else None
            call_next = _layer(layer, self._functions[layer], call_next, generators, culprit)
        if not depth:
            return call_next(options)
        names = ", ".join(repr(link.key) for link in self.links)
        guard = _guard(call_next(options), f"the middleware chain ({names})", options, self.raiser)
        generators.append((-1, guard))
        return guard


async def _guard(
    source: AsyncIterator[StreamChunk],
    culprit: str,
    options: GenerateOptions,
    raiser: Callable[[BaseException], str | None] | None = None,
) -> AsyncGenerator[StreamChunk, None]:
    """A contract check over ``source`` (the output of ``culprit``): consumers get a legal stream.

    A layer that breaks the stream contract (docs/stream-obligations.md) must not break every consumer: at the first
    violation the stream ends (open blocks closed with what they hold, then
    ``finish{error, PROTOCOL}`` naming ``culprit`` and the rule); chunks after the first
    ``finish`` are dropped (and logged; the source still runs to its end, so code after a
    middleware's loop runs); a source that ends without a finish gets the same terminal.
    An exception raised through it gets a note naming the middleware that raised it (found by
    ``raiser``): ``raised by middleware plugin 'key'``.
    """
    tracker = BlockAssembler(keep_ended=False)
    feed = tracker.feed
    check = StreamContract().check
    try:
        async for chunk in source:
            problem = check(chunk)
            if problem is not None:
                failure = LlmError("PROTOCOL", f"{culprit} broke the stream contract: {problem}")
                logger.error("%s; the stream ends here", failure.message)
                for end in terminal(tracker, failure, options):
                    yield end
                return
            yield chunk
            if type(chunk) is Finish:
                async for extra in source:
                    logger.error("dropped a %s chunk that %s yielded after finish", type(extra).__name__, culprit)
                return
            feed(chunk)
    except Exception as exc:
        key = raiser(exc) if raiser is not None else None
        if key is not None:
            exc.add_note(f"raised by middleware plugin {key!r}")
        raise
    failure = LlmError("PROTOCOL", f"{culprit} ended the stream without a finish")
    for chunk in terminal(tracker, failure, options):
        yield chunk


def _layer(
    depth: int,
    function: MiddlewareFunction,
    inner: Callable[[GenerateOptions], AsyncIterator[StreamChunk]],
    generators: list[tuple[int, AsyncGenerator[StreamChunk, None]]],
    culprit: str | None = None,
) -> Callable[[GenerateOptions], AsyncGenerator[StreamChunk, None]]:
    """The ``call_next`` that starts middleware ``function`` at ``depth`` over ``inner``
    (its output contract-checked, naming ``culprit``, when one is given)."""

    def call_next(options: GenerateOptions) -> AsyncGenerator[StreamChunk, None]:
        generator = function(options, inner)
        generators.append((depth, generator))
        if culprit is not None:
            generator = _guard(generator, culprit, options)
            generators.append((depth, generator))
        return generator

    return call_next
