"""The ``llm_stream`` middleware chain and the final adapter boundary (docs/runtime.md, docs/hooks.md).

The runtime composes the chain once, from ``pm.hook.llm_stream.get_hookimpls()`` sorted
explicitly by (tier, position in plugins.yaml): ``tryfirst`` outermost, ``trylast`` innermost, and
within a tier the plugin listed first is outermost (:func:`order_middleware`). Pluggy is
synchronous, so the hook is never called through ``pm.hook.llm_stream(...)``: each stream builds
``call_next`` functions over the ordered impls (:meth:`Chain.open`) and records every async
generator they create in a :class:`ChainRun`, which closes them all, outermost first.

The innermost layer is the :class:`AdapterBoundary`: it looks the route up, turns adapter
exceptions into a legal terminal (open blocks closed, then ``finish{error}`` / ``finish{aborted}``)
and re-raises cancellation, so middleware always sees a legal stream.
"""

from __future__ import annotations

import inspect
import logging
import traceback
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, Final, Literal

import anyio
import msgspec
import pluggy

from harness_core.abort import DEFAULT_ABORT_REASON
from harness_core.assembler import BlockAssembler
from harness_core.contract import StreamContract
from harness_core.errors import ErrorCode, LlmError
from harness_core.hookspecs import CallNext
from harness_core.plugininfo import PluginFailure
from harness_core.registry import RouteRegistry
from harness_core.secret import ChunkScrubber, Redactor
from harness_core.types import Finish, FinishReason, GenerateOptions, Message, StreamChunk

__all__ = [
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
]

logger = logging.getLogger("harness")

Tier = Literal["tryfirst", "normal", "trylast", "adapter"]
"""Where a link sits: a middleware tier (outermost to innermost), or the route's adapter."""

MiddlewareFunction = Callable[[GenerateOptions, CallNext], AsyncGenerator[StreamChunk, None]]
"""An ``llm_stream`` impl: ``(options, call_next)`` → async generator of chunks."""

_TIER_RANK: dict[Tier, int] = {"tryfirst": 0, "normal": 1, "trylast": 2}

DEFAULT_CLOSE_BOUND: Final = 5.0
"""Seconds one close may take before it is abandoned (the runtime uses ``Harness.close_timeout``)."""


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


def strip_replay(options: GenerateOptions, owner: str | None) -> GenerateOptions:
    """``options`` without the ``replay_state`` of history messages not produced by ``owner``.

    ``owner`` is the plugins.yaml key owning the target route (``None`` when no plugin owns it).
    A message keeps its ``replay_state`` only when its ``source`` is that same key
    (docs/stream-obligations.md#9-replay-state);
    ``options`` is returned unchanged (same object) when nothing needs stripping.
    """
    messages = options.messages
    if not any(m.replay_state is not None and (owner is None or m.source != owner) for m in messages):
        return options
    kept = [
        m if m.replay_state is None or (owner is not None and m.source == owner) else _without_replay(m)
        for m in messages
    ]
    return msgspec.structs.replace(options, messages=kept)


def _without_replay(message: Message) -> Message:
    return msgspec.structs.replace(message, replay_state=None)


def raise_collected(errors: Sequence[Exception], what: str) -> None:
    """Re-raise errors collected while closing: one as is, several as an :class:`ExceptionGroup`."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup(f"{what} failed", list(errors))


async def aclose_all(closables: Iterable[Any], bound: float, what: str) -> list[Exception]:
    """Await ``aclose()`` of each of ``closables`` in order, each shielded from cancellation and
    bounded by ``bound`` seconds, so a cancelled caller still runs every cleanup. An object
    without ``aclose`` (a plain async iterator) has nothing to close and is skipped, and so is an
    async generator that already ended (``ag_frame`` is ``None``: its ``aclose()`` does nothing,
    https://peps.python.org/pep-0525/#asynchronous-generator-object), which spares the usual
    stream, read to its end, the cancel scope and timer of a bounded close (~12 µs per close).

    Returns the exceptions the closes raised, each already logged (``what`` names the kind of
    object in the log lines), so the caller can re-raise them once everything is closed
    (:func:`raise_collected`). A close that takes longer than ``bound`` is abandoned with a warning.
    """
    errors: list[Exception] = []
    for closable in closables:
        close = getattr(closable, "aclose", None)
        if close is None or getattr(closable, "ag_frame", closable) is None:
            continue
        with anyio.move_on_after(bound, shield=True) as scope:
            try:
                await close()
            except Exception as exc:
                logger.error("closing the %s failed (%r)", what, closable, exc_info=exc)
                errors.append(exc)
        if scope.cancelled_caught:
            logger.warning("closing the %s %r took longer than %ss; abandoned", what, closable, bound)
    return errors


async def close_stream(stream: AsyncIterator[Any], bound: float = DEFAULT_CLOSE_BOUND) -> None:
    """Close one stream (an inner stream a middleware opened) as :func:`aclose_all` does, then
    re-raise what its cleanup raised. Safe in every ``finally``: closing an exhausted or closed
    generator does nothing."""
    raise_collected(await aclose_all([stream], bound, "stream"), "closing the stream")


class ChainRun:
    """The state of one stream through the chain: every generator it created, and the route served.

    ``route``/``source``/``model`` start as the requested route, its owner and model; the boundary
    overwrites them with what it actually served (a middleware such as ``fallback`` may rewrite
    ``options.provider`` and ``options.model``; the last boundary call wins).
    """

    __slots__ = ("generators", "model", "route", "source")

    def __init__(self, route: str | None, source: str | None, model: str | None = None) -> None:
        self.generators: list[tuple[int, AsyncGenerator[StreamChunk, None]]] = []
        """``(depth, generator)`` in creation order; depth 0 is the outermost layer."""
        self.route = route
        self.source = source
        self.model = model

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
                generator = _guard(generator, f"the adapter of route {options.provider!r}", options)
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
                for end in _terminal(tracker, failure, options):
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
    for chunk in _terminal(tracker, failure, options):
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


class AdapterBoundary:
    """The innermost layer: route lookup, adapter faults → legal terminal chunks (docs/runtime.md).

    - unknown route → exactly one ``finish{error, NO_ADAPTER}`` naming the route, the known
      routes and any adapter plugin failure that may explain it (only the failure of the plugin
      configured to serve it, when its routes are known: a missing key names its variable, with
      code ``CONFIG`` when its configuration is what failed);
    - the adapter raises :class:`~harness_core.errors.LlmError` → the blocks it left open end
      with what they hold, then ``finish{error}`` carrying the failure;
    - any other exception → the same, with code ``INTERNAL``, logged with its traceback on the
      ``harness`` logger;
    - the adapter's stream ends without a ``finish`` → ``finish{error, PROTOCOL}``;
    - in each of these cases, ``finish{aborted}`` instead when ``options.abort`` has fired;
    - cancellation propagates untouched; nothing after the adapter's ``finish`` is read.

    The adapter's generator is closed (``aclose``) when the boundary's is.

    With ``secrets`` (a :class:`~harness_core.secret.Redactor` of the plugins' keys) everything
    the adapter produces is scrubbed here, before any middleware (cache, trace, telemetry) or
    caller sees it: text and tool-call deltas with hold-back across splits, and every failure
    message (a proxy echoing the ``Authorization`` header in its error body).
    """

    __slots__ = ("_failures", "_registry", "_secrets")

    def __init__(
        self, registry: RouteRegistry, failures: Sequence[PluginFailure], secrets: Redactor | None = None
    ) -> None:
        self._registry = registry
        self._failures = failures
        self._secrets = secrets if secrets is not None else Redactor()

    def scrub(self, error: LlmError) -> LlmError:
        """``error`` itself, or a copy whose message has the secrets masked."""
        message = self._secrets(error.message)
        if message == error.message:
            return error
        return LlmError.from_failure(msgspec.structs.replace(error.to_failure(), message=message))

    def _trace(self, route: str, exc: Exception) -> None:
        """Log the traceback and cause chain of an adapter's :class:`LlmError` (``NETWORK``,
        ``AUTH`` …: the transport's own exception) at INFO level, secrets masked, so
        ``harness -v`` shows where a failure came from; nothing is formatted when INFO is off."""
        if isinstance(exc, LlmError) and logger.isEnabledFor(logging.INFO):
            text = self._secrets("".join(traceback.format_exception(exc)).rstrip("\n"))
            logger.info("route %r failed:\n%s", route, text)

    def __call__(self, options: GenerateOptions, run: ChainRun) -> AsyncGenerator[StreamChunk, None]:
        """The boundary's generator for one stream (scrubbed when there are secrets)."""
        return self._serve(options, run, ChunkScrubber(self._secrets) if self._secrets else None)

    def no_adapter(self, route: str | None) -> LlmError:
        """The ``NO_ADAPTER`` error for ``route``: known routes, and the adapter plugins that failed."""
        known = ", ".join(repr(r) for r in self._registry.routes()) or "none"
        if route is None:
            text = f"no route given (options.provider) and no default provider configured; known routes: {known}"
        else:
            text = f"no adapter serves route {route!r}; known routes: {known}"
        failed = [f for f in self._failures if not f.is_middleware]
        owners = [f for f in failed if route is not None and f.routes is not None and route in f.routes]
        if owners:  # the plugin that would serve it is known: say only why it cannot
            code: ErrorCode = "CONFIG" if owners[0].stage == "config" else "NO_ADAPTER"
            return LlmError(code, f"route {route!r} is unavailable: {owners[0].message}")
        if failed:
            causes = "; ".join(f"plugin {f.key!r} failed at {f.stage}: {f.message}" for f in failed)
            text += f". Adapter plugins that failed to start (one may own this route): {causes}"
        return LlmError("NO_ADAPTER", text)

    async def _serve(
        self, options: GenerateOptions, run: ChainRun, scrubber: ChunkScrubber | None
    ) -> AsyncGenerator[StreamChunk, None]:
        """The adapter's chunks, scrubbed in this same generator (no extra hop per chunk)."""
        route = options.provider
        registration = self._registry.get(route) if route is not None else None
        if route is None or registration is None:
            finish = Finish(FinishReason(kind="error", failure=self.no_adapter(route).to_failure()))
            for shown in scrubber.feed(finish) if scrubber is not None else (finish,):
                yield shown
            return
        run.route = route
        run.source = registration.owner
        run.model = options.model
        options = strip_replay(options, registration.owner)
        tracker = BlockAssembler(keep_ended=False)  # holds only the blocks still open
        keep = tracker.feed
        stream: Any = None
        failure: LlmError
        try:
            try:
                stream = registration.adapter.stream(options)
                pull = stream.__anext__
            except Exception as exc:
                self._trace(route, exc)
                failure = _as_failure(exc, route)
            else:
                while True:
                    try:
                        chunk = await pull()
                    except StopAsyncIteration:
                        failure = LlmError(
                            "PROTOCOL", f"the adapter of route {route!r} ended its stream without a finish"
                        )
                        break
                    except Exception as exc:
                        self._trace(route, exc)
                        failure = _as_failure(exc, route)
                        break
                    keep(chunk)
                    if scrubber is None:
                        yield chunk
                    else:
                        for shown in scrubber.feed(chunk):
                            yield shown
                    if type(chunk) is Finish:
                        return
            for chunk in _terminal(tracker, failure, options):
                for shown in scrubber.feed(chunk) if scrubber is not None else (chunk,):
                    yield shown
        finally:
            if stream is not None:
                await aclose_all([stream], DEFAULT_CLOSE_BOUND, f"adapter stream of route {route!r}")


def _as_failure(exc: Exception, route: str) -> LlmError:
    """``exc`` as the failure a ``finish{error}`` carries; unexpected exceptions are logged as INTERNAL."""
    if isinstance(exc, LlmError):
        return exc
    logger.error("the adapter of route %r raised an unexpected exception", route, exc_info=exc)
    return LlmError("INTERNAL", f"unexpected {type(exc).__name__} in the adapter of route {route!r}: {exc}")


def _terminal(tracker: BlockAssembler, failure: LlmError, options: GenerateOptions) -> list[StreamChunk]:
    """``block-end`` for every block left open (with what it holds), then the finish:
    ``aborted`` when the abort signal fired, else ``error`` carrying ``failure``."""
    abort = options.abort
    if abort is not None and abort.fired:
        failure = LlmError("ABORTED", abort.reason or DEFAULT_ABORT_REASON, provider=failure.provider)
    return tracker.terminal(failure.to_failure())
