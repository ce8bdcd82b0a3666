"""The innermost layer of every ``llm_stream`` chain: route lookup, adapter faults → a legal stream (docs/runtime.md).

Split out of :mod:`harness_core.chain` (issue 22 item 4); ``AdapterBoundary``, ``strip_replay``
and ``terminal`` are still importable from :mod:`harness_core.chain`. :func:`strip_replay` is here
because the boundary applies it to every call (the runtime applies it before the chain too).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Protocol

import msgspec

from harness_core.abort import DEFAULT_ABORT_REASON
from harness_core.assembler import BlockAssembler
from harness_core.closing import DEFAULT_CLOSE_BOUND, aclose_all
from harness_core.errors import ErrorCode, LlmError
from harness_core.plugininfo import PluginFailure, adapter_failures, failed_owner, plugin_name
from harness_core.record import StreamRecord
from harness_core.registry import RouteRegistry
from harness_core.routing import route_suggestion
from harness_core.secret import ChunkScrubber, Redactor
from harness_core.types import Finish, FinishReason, GenerateOptions, Message, ReasoningBlock, StreamChunk

__all__ = ["AdapterBoundary", "Served", "strip_replay", "terminal"]

logger = logging.getLogger("harness")


class Served(Protocol):
    """Where the boundary writes what it served (a :class:`harness_core.chain.ChainRun`)."""

    record: StreamRecord
    """The stream's record: the boundary sets ``served_route``/``served_model``/``first_chunk``."""
    source: str | None
    """The plugins.yaml key owning the route served."""


def strip_replay(options: GenerateOptions, owner: str | None) -> GenerateOptions:
    """``options`` without the provider state of history messages that the target cannot use.

    ``owner`` is the plugins.yaml key owning the target route (``None`` when no plugin owns it).
    Two rules (docs/stream-obligations.md#9-replay-state):

    - a message keeps its ``replay_state`` only when its ``source`` is that same key;
    - a reasoning block keeps its :class:`~harness_core.types.ReasoningSignature` only when the
      signature :meth:`binds <harness_core.types.ReasoningSignature.binds>` the target: the
      owner's provider (its entry-point name, the key before ``:``) and ``options.model``. So a
      signature survives a move to another instance or route of the same provider and model, and
      is dropped for another model or provider (Anthropic rejects a foreign signature); the block
      stays, ``signed`` but without signature.

    ``options`` is returned unchanged (same object) when nothing needs stripping.
    """
    provider = plugin_name(owner) if owner is not None else None
    model = options.model
    messages = options.messages
    for position, message in enumerate(messages):  # a plain loop: this runs twice per request
        if _foreign(message, owner, provider, model):
            kept = messages[:position]
            kept += [
                _stripped(m, owner, provider, model) if _foreign(m, owner, provider, model) else m
                for m in messages[position:]
            ]
            return msgspec.structs.replace(options, messages=kept)
    return options


def _foreign(message: Message, owner: str | None, provider: str | None, model: str | None) -> bool:
    """Whether ``message`` holds state the target (``owner``, ``provider``, ``model``) cannot use."""
    if message.replay_state is not None and (owner is None or message.source != owner):
        return True
    if message.role != "assistant":
        return False
    for block in message.content:
        if type(block) is ReasoningBlock:
            signature = block.signature
            if signature is not None and not signature.binds(provider, model):
                return True
    return False


def _stripped(message: Message, owner: str | None, provider: str | None, model: str | None) -> Message:
    """``message`` without what :func:`_foreign` found."""
    replay = message.replay_state if owner is not None and message.source == owner else None
    content = [
        msgspec.structs.replace(block, signature=None)
        if isinstance(block, ReasoningBlock)
        and block.signature is not None
        and not block.signature.binds(provider, model)
        else block
        for block in message.content
    ]
    return msgspec.structs.replace(message, replay_state=replay, content=content)


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

    def __call__(self, options: GenerateOptions, run: Served) -> AsyncGenerator[StreamChunk, None]:
        """The boundary's generator for one stream (scrubbed when there are secrets)."""
        return self._serve(options, run, ChunkScrubber(self._secrets) if self._secrets else None)

    def no_adapter(self, route: str | None) -> LlmError:
        """The ``NO_ADAPTER`` error for ``route``: the closest route when one is close (``did you
        mean``, :func:`~harness_core.routing.route_suggestion`), the known routes, and the adapter
        plugins that failed."""
        routes = self._registry.routes()
        known = ", ".join(repr(r) for r in routes) or "none"
        if route is None:
            given = "options.route; -r/--route on the command line"  # whoever asked: a library or the CLI
            text = f"no route given ({given}) and no default route configured (defaults.route); known routes: {known}"
        else:
            claimed = [name for failure in adapter_failures(self._failures) for name in failure.routes or ()]
            hint = route_suggestion(route, [*routes, *claimed])
            text = f"no adapter serves route {route!r}{hint}; known routes: {known}"
        owner = failed_owner(self._failures, route)
        if owner is not None:  # the plugin that would serve it is known: say only why it cannot
            code: ErrorCode = "CONFIG" if owner.stage == "config" else "NO_ADAPTER"
            return LlmError(code, f"route {route!r} is unavailable: {owner.message}")
        failed = adapter_failures(self._failures)
        if failed:
            causes = "; ".join(f"plugin {f.key!r} failed at {f.stage}: {f.message}" for f in failed)
            text += f". Adapter plugins that failed to start (one may own this route): {causes}"
        return LlmError("NO_ADAPTER", text)

    async def _serve(
        self, options: GenerateOptions, run: Served, scrubber: ChunkScrubber | None
    ) -> AsyncGenerator[StreamChunk, None]:
        """The adapter's chunks, scrubbed in this same generator (no extra hop per chunk)."""
        route = options.route
        registration = self._registry.get(route) if route is not None else None
        if route is None or registration is None:
            finish = Finish(FinishReason(kind="error", failure=self.no_adapter(route).to_failure()))
            for shown in scrubber.feed(finish) if scrubber is not None else (finish,):
                yield shown
            return
        record = run.record
        record.served_route, record.served_model = route, options.model
        run.source = registration.owner
        options = strip_replay(options, registration.owner)
        tracker = BlockAssembler(keep_ended=False)  # holds only the blocks still open
        keep = tracker.feed
        stream: Any = None
        failure: LlmError
        first = True
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
                    if first:
                        first = False
                        record.first_chunk = time.monotonic()
                    keep(chunk)
                    if scrubber is None:
                        yield chunk
                    else:
                        for shown in scrubber.feed(chunk):
                            yield shown
                    if type(chunk) is Finish:
                        return
            for chunk in terminal(tracker, failure, options):
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


def terminal(tracker: BlockAssembler, failure: LlmError, options: GenerateOptions) -> list[StreamChunk]:
    """``block-end`` for every block left open (with what it holds), then the finish:
    ``aborted`` when the abort signal fired, else ``error`` carrying ``failure``."""
    abort = options.abort
    if abort is not None and abort.fired:
        failure = LlmError("ABORTED", abort.reason or DEFAULT_ABORT_REASON, provider=failure.provider)
    return tracker.terminal(failure.to_failure())
