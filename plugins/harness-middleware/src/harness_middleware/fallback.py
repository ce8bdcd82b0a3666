"""``fallback``: serve a request from the next ``route[/model]`` target when one fails early.

For a request to route ``R``, the targets are ``R`` itself (with the requested model), then the
list configured for ``R`` in ``targets`` (or the ``default`` list). A target is left for the next
one **only before the first content chunk has been yielded**: its stream ended with a
``finish{error}`` (or raised an :class:`~harness_core.errors.LlmError`) whose code is in
``codes`` or whose HTTP status is in ``statuses``. ``block-start`` and ``usage`` chunks that
arrive before the first content chunk are held back until the target commits, as ``retry`` does.

Once content has been yielded the target is committed: a later failure ends the stream as a
``finish{error}`` whose message names every attempt, with the blocks left open closed with
what they hold. Chunks already sent are never replayed from another target (two attempts'
tool-call arguments spliced together are how other tools ran truncated commands).

A target that failed with a matching failure (before or after committing) cools down for
``cooldown`` seconds: streams of the same process skip it (:class:`Cooldowns` is shared by every
``fallback`` instance in the process) unless every target is cooling down, in which case all are
tried in order. The route and model that served the stream reach the consumer through the
runtime (``StreamContext.route``/``.model``, ``Message.route``/``.model``) and outer middleware
through :class:`~harness_core.record.StreamRecord` (``served_route``, ``served_model``,
``attempts``).

With ``retry``: list ``fallback`` first (outer) to retry each target before moving on, or
``retry`` first (outer) to retry the whole fallback sequence; both keep the rule above because
each layer only restarts before it has yielded content.

Embedding calls (``llm_embed``, docs/embeddings.md) follow the same rule with the same targets,
``codes``, ``statuses`` and cooldowns: a target whose call raises a matching
:class:`~harness_core.errors.LlmError` cools down and the call moves to the next target (an
embedding call sends nothing before it returns, so any attempt may be left). Another error, or
the last target's, is raised with every attempt named (``… (fallback attempts: a/m1: SERVER
HTTP 503 'busy'; …)``) when the route has other targets, unchanged when it has none. The
vectors name the route and model that served them (``Embeddings.route``/``.model``); outer
middleware also find the attempts in :func:`~harness_core.record.embed_record`.

Counted requests (``llm_count_tokens``, ``Harness.count_tokens``) go to the target a stream would
start with (the first not cooling down), and move to the next on a matching
:class:`~harness_core.errors.LlmError`, as an embedding call does; counting is not generating, so
a failed count cools no target down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import Annotated

import msgspec

from harness_core import Attempt, ConfigPath, RouteReference, field_message, open_embed_record, open_record
from harness_core.middleware import (
    BlockAssembler,
    BlockEnd,
    CallNext,
    CountCallNext,
    EmbedCallNext,
    Embeddings,
    EmbedOptions,
    ErrorCode,
    Failure,
    Finish,
    GenerateOptions,
    LlmError,
    StreamChunk,
    hookimpl,
    snippet,
)
from harness_middleware._stream import aclose, error_finish, is_content

__all__ = [
    "Cooldowns",
    "Failed",
    "FallbackPlugin",
    "Target",
    "committed",
    "error_finish_naming",
    "error_naming",
    "parse_target",
    "shared_cooldowns",
    "until_content",
]

Target = tuple[str, str | None]
"""``(route, model)``; ``model`` ``None`` = the requested model."""

_DEFAULT_CODES: tuple[ErrorCode, ...] = ("RATE_LIMITED", "OVERLOADED", "SERVER", "TIMEOUT", "NETWORK")


def parse_target(text: str) -> Target:
    """``"route"`` or ``"route/model"`` (the model may itself contain ``/``) as ``(route, model)``.

    Raises:
        ValueError: an empty route or model.
    """
    route, slash, model = text.partition("/")
    if not route or (slash and not model):
        raise ValueError(f"fallback target {text!r} must be 'route' or 'route/model'")
    return route, model or None


def _label(route: str | None, model: str | None) -> str:
    return f"{route}/{model}" if model else str(route)


class Cooldowns:
    """Targets that failed recently, shared by concurrent streams (thread-safe).

    ``clock`` returns seconds (monotonic); tests inject one.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._until: dict[Target, float] = {}
        self._lock = threading.Lock()

    def cool(self, target: Target, seconds: float) -> None:
        """Skip ``target`` for ``seconds`` from now (extends, never shortens, a running cooldown)."""
        with self._lock:
            until = self.clock() + seconds
            self._until[target] = max(until, self._until.get(target, until))

    def cooling(self, target: Target) -> bool:
        """Whether ``target`` is still cooling down."""
        with self._lock:
            until = self._until.get(target)
            if until is None:
                return False
            if until <= self.clock():
                del self._until[target]
                return False
            return True


_SHARED = Cooldowns()


def shared_cooldowns() -> Cooldowns:
    """The process-wide :class:`Cooldowns` every :class:`FallbackPlugin` uses by default."""
    return _SHARED


class Failed(Exception):
    """The current target failed before committing, with ``failure`` (raised by :func:`until_content`)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _target_lists(config: FallbackPlugin.Config) -> list[tuple[ConfigPath, str, list[str]]]:
    """``(path in the config, the route it is for or "default", targets)`` for every list of
    targets of ``config``: each of ``targets``, then ``default``."""
    lists: list[tuple[ConfigPath, str, list[str]]] = [(("targets", r), r, t) for r, t in config.targets.items()]
    return [*lists, (("default",), "default", config.default)]


class FallbackPlugin:
    """Middleware moving to the next target on an early failure (see module doc).

    Args:
        config: the validated :class:`FallbackPlugin.Config`.
        cooldowns: where failed targets cool down; default the process-wide :func:`shared_cooldowns`.
    """

    class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
        """``fallback:`` in plugins.yaml.

        Fields:
            targets: route → ordered ``"route[/model]"`` targets tried after it. A target without
                a model uses the requested model id.
            default: the targets of routes not listed in ``targets`` (default none: no fallback).
            codes: error codes that move to the next target (default the transient ones:
                ``RATE_LIMITED``, ``OVERLOADED``, ``SERVER``, ``TIMEOUT``, ``NETWORK``).
            statuses: HTTP statuses that move to the next target whatever their code (``[401]``).
            cooldown: seconds a failed target is skipped by every stream of the process (0 = never).
        """

        targets: dict[str, list[str]] = msgspec.field(default_factory=dict)
        default: list[str] = msgspec.field(default_factory=list)
        codes: list[ErrorCode] = msgspec.field(default_factory=lambda: list(_DEFAULT_CODES))
        statuses: list[Annotated[int, msgspec.Meta(ge=100, le=599)]] = msgspec.field(default_factory=list)
        cooldown: Annotated[float, msgspec.Meta(ge=0)] = 30.0

        def __post_init__(self) -> None:
            """Check every target's shape (raises ``ValueError`` located at the target:
            :func:`~harness_core.field_message`, ``targets.ROUTE[i]`` or ``default[i]``)."""
            for where, route, targets in _target_lists(self):
                for index, text in enumerate(targets):
                    try:
                        parse_target(text)
                    except ValueError as exc:
                        raise ValueError(field_message((*where, index), f"{exc} (in the list of {route!r})")) from None

    def __init__(self, config: Config | None = None, *, cooldowns: Cooldowns | None = None) -> None:
        self.config = config if config is not None else self.Config()
        self.cooldowns = cooldowns if cooldowns is not None else shared_cooldowns()
        self._codes = frozenset(self.config.codes)
        self._statuses = frozenset(self.config.statuses)

    def targets_for(self, route: str | None, model: str | None) -> list[Target]:
        """The requested target then the configured ones, without repeats; ``(route, model)`` each."""
        listed = self.config.targets.get(route or "", self.config.default)
        ordered: list[Target] = []
        for target in [(route or "", model), *(parse_target(text) for text in listed)]:
            resolved = (target[0], target[1] if target[1] is not None else model)
            if resolved not in ordered:
                ordered.append(resolved)
        return ordered

    def route_references(self) -> list[RouteReference]:
        """Every route the config names (docs/hooks.md, "Optional plugin methods"): each key of
        ``targets`` and the route of every target of ``targets`` and ``default``; the start
        refuses one that no plugin serves (:func:`harness_core.routing.check_routes`)."""
        references = [
            RouteReference(("targets", route), route, f"`targets` key {route!r}") for route in self.config.targets
        ]
        for where, of, targets in _target_lists(self.config):
            for index, text in enumerate(targets):
                references.append(
                    RouteReference(
                        (*where, index),
                        parse_target(text)[0],
                        f"fallback target {text!r} (in the list of {of!r})",
                        text,
                    )
                )
        return references

    def describe_chain(self, route: str | None) -> str:
        """One line for ``harness chain``: the targets of ``route`` in order, and the cooldown."""
        shown = " -> ".join(_label(*target) for target in self.targets_for(route, None))
        return f"targets {shown}; cooldown {self.config.cooldown:g}s"

    def moves_on(self, failure: Failure) -> bool:
        """Whether ``failure`` sends the request to the next target (its code or status is listed)."""
        return failure.code in self._codes or (failure.status is not None and failure.status in self._statuses)

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Try the targets in order until one commits; see the module doc for the rules."""
        options, record = open_record(options)
        targets = self.targets_for(options.route, options.model)
        # a route without fallback targets keeps its errors as they are: no attempts note
        named = len(targets) > 1
        ready = [target for target in targets if not self.cooldowns.cooling(target)] or targets
        record.attempts.extend(Attempt(*target, skipped=True) for target in targets if target not in ready)
        last: Failure | None = None
        for route, model in ready:
            record.served_route, record.served_model = route, model
            stream = call_next(msgspec.structs.replace(options, route=route, model=model))
            try:
                try:
                    held = await until_content(stream, self.moves_on)
                except Failed as failed:
                    last = failed.failure
                    record.attempts.append(Attempt(route, model, failure=last))
                    self._cool(route, model, last)
                    if options.abort is not None and options.abort.fired:
                        break
                    continue
                served = Attempt(route, model)
                passing = committed(stream, held, served, record.attempts, named=named, failed=self._failed)
                try:
                    async for chunk in passing:
                        yield chunk
                finally:
                    await aclose(passing)
                return
            finally:
                await aclose(stream)
        assert last is not None, "every target failed: the last failure is known"
        yield error_finish_naming(last, record.attempts if named else None)

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """Embed through the targets in order until one answers; see the module doc for the rules.

        Raises:
            LlmError: the error that did not move on, or the last target's, with every attempt
                named when the route has other targets.
        """
        targets = self.targets_for(options.route, options.model)
        named = len(targets) > 1
        ready = [target for target in targets if not self.cooldowns.cooling(target)] or targets
        with open_embed_record(options) as record:
            record.attempts.extend(Attempt(*target, skipped=True) for target in targets if target not in ready)
            index = 0
            while True:  # the last target returns or raises
                route, model = ready[index]
                record.served_route, record.served_model = route, model
                try:
                    return await call_next(msgspec.structs.replace(options, route=route, model=model))
                except LlmError as exc:
                    failure = exc.to_failure()
                    record.attempts.append(Attempt(route, model, failure=failure))
                    self._cool(route, model, failure)
                    if not self.moves_on(failure) or index == len(ready) - 1:
                        if not named:  # a route without other targets keeps its error as it is
                            raise
                        raise error_naming(failure, record.attempts) from exc
                index += 1

    @hookimpl
    async def llm_count_tokens(self, options: GenerateOptions, call_next: CountCallNext) -> int:
        """Count on the target a stream would start with, moving on as an embedding call does
        (module doc); no target is cooled down.

        Raises:
            LlmError: the error that did not move on, or the last target's, with every attempt
                named when the route has other targets.
        """
        targets = self.targets_for(options.route, options.model)
        ready = [target for target in targets if not self.cooldowns.cooling(target)] or targets
        attempts: list[Attempt] = []
        index = 0
        while True:  # the last target returns or raises
            route, model = ready[index]
            try:
                return await call_next(msgspec.structs.replace(options, route=route, model=model))
            except LlmError as exc:
                failure = exc.to_failure()
                attempts.append(Attempt(route, model, failure=failure))
                if not self.moves_on(failure) or index == len(ready) - 1:
                    if len(targets) == 1:  # a route without other targets keeps its error as it is
                        raise
                    raise error_naming(failure, attempts) from exc
            index += 1

    async def _failed(self, attempt: Attempt, failure: Failure) -> None:
        self._cool(attempt.route or "", attempt.model, failure)

    def _cool(self, route: str, model: str | None, failure: Failure) -> None:
        if self.config.cooldown > 0 and self.moves_on(failure):
            self.cooldowns.cool((route, model), self.config.cooldown)


async def until_content(stream: AsyncIterator[StreamChunk], moves_on: Callable[[Failure], bool]) -> list[StreamChunk]:
    """Read ``stream`` up to and including its first content chunk (or its end) and return what
    was read (the chunks to pass on once the target commits).

    Raises:
        Failed: the stream failed before content (``finish{error}`` or :class:`LlmError`) with a
            failure ``moves_on`` accepts; another failure is returned (or re-raised) as it is.
    """
    held: list[StreamChunk] = []
    try:
        async for chunk in stream:
            if isinstance(chunk, Finish) and chunk.reason.kind == "error":
                failure = chunk.reason.failure or Failure("INTERNAL", "error finish without a failure")
                if moves_on(failure):
                    raise Failed(failure)
            held.append(chunk)
            if is_content(chunk):
                break
    except LlmError as exc:
        if moves_on(exc.to_failure()):
            raise Failed(exc.to_failure()) from exc
        raise
    return held


async def committed(
    stream: AsyncIterator[StreamChunk],
    held: list[StreamChunk],
    served: Attempt,
    attempts: list[Attempt],
    *,
    named: bool,
    failed: Callable[[Attempt, Failure], Awaitable[None]],
    what: str = "fallback",
) -> AsyncIterator[StreamChunk]:
    """Pass on ``held`` and the rest of the committed ``stream`` (the target ``served``, appended
    to ``attempts``); a failure now ends the stream with a ``finish{error}`` naming every attempt
    when ``named`` (``what`` attempts: …; a route without other targets passes its failure on
    unchanged); open blocks are closed first, nothing is replayed, and ``failed(served, failure)``
    is awaited before the error finish (the caller cools the target down). The last attempt then
    carries the failure, marked ``after_content`` only when content was sent.

    After a successful ``finish`` the stream is read to its end like any pass-through layer does
    (a legal stream ends there; whatever a broken one sends after it is passed on for the
    runtime's guard to drop and log), so the inner generators end by themselves and closing them
    costs nothing (:func:`harness_core.chain.aclose_all` skips ended generators)."""
    tracker = BlockAssembler(keep_ended=False)  # only the blocks still open
    attempts.append(served)
    failure: Failure | None = None
    sent_content = False
    finished = False
    source = _chained(held, stream)
    try:
        async for chunk in source:
            if finished:
                yield chunk
                continue
            if isinstance(chunk, Finish):
                if chunk.reason.kind == "error" and chunk.reason.failure is not None:
                    failure = chunk.reason.failure
                    break
                finished = True
                yield chunk
                continue
            tracker.feed(chunk)
            sent_content = sent_content or is_content(chunk)
            yield chunk
        else:
            return  # ended without a finish: the runtime's guard reports it
    except LlmError as exc:
        failure = exc.to_failure()
    finally:
        await source.aclose()
    assert failure is not None
    for index, block in tracker.open_blocks():  # a legal inner stream closed them before its finish
        yield BlockEnd(index, block)
    attempts[-1] = msgspec.structs.replace(served, failure=failure, after_content=sent_content)
    await failed(served, failure)
    yield error_finish_naming(failure, attempts if named else None, what)


async def _chained(held: list[StreamChunk], stream: AsyncIterator[StreamChunk]) -> AsyncGenerator[StreamChunk, None]:
    """``held`` then the rest of ``stream``."""
    for chunk in held:
        yield chunk
    async for chunk in stream:
        yield chunk


def _summary(attempts: Sequence[Attempt], what: str) -> str:
    """``"fallback attempts: a/m1: skipped (cooling down); b/m2: SERVER HTTP 503 'busy'"``
    (provider messages cut at 200 characters). Made when the stream failed: every target tried
    has a failure by then."""
    parts = []
    for attempt in attempts:
        label = _label(attempt.route, attempt.model)
        failure = attempt.failure
        if attempt.skipped or failure is None:
            parts.append(f"{label}: skipped (cooling down)")
        else:
            status = f" HTTP {failure.status}" if failure.status is not None else ""
            when = "failed after content was sent: " if attempt.after_content else ""
            parts.append(f"{label}: {when}{failure.code}{status} {snippet(failure.message)!r}")
    return f"{what} attempts: " + "; ".join(parts)


def error_naming(failure: Failure, attempts: Sequence[Attempt], what: str = "fallback") -> LlmError:
    """``failure`` as an :class:`LlmError` (code, status, ``retry_after``, provider fields) whose
    message names every attempt, as :func:`error_finish_naming` names them in a
    ``finish{error}``: ``"<message> (<what> attempts: a/m1: SERVER HTTP 503 'busy'; …)"``."""
    named = msgspec.structs.replace(failure, message=f"{failure.message} ({_summary(attempts, what)})")
    return LlmError.from_failure(named)


def error_finish_naming(failure: Failure, attempts: Sequence[Attempt] | None, what: str = "fallback") -> Finish:
    """``finish{error}`` (``aborted`` for ``ABORTED``) carrying ``failure`` with every attempt
    named: ``"<message> (<what> attempts: a/m1: SERVER HTTP 503 'busy'; …)"`` (``attempts``
    ``None``: the route has no other targets, ``failure`` is kept as is)."""
    if attempts is None:
        return error_finish(failure)
    named = msgspec.structs.replace(failure, message=f"{failure.message} ({_summary(attempts, what)})")
    return error_finish(named)
