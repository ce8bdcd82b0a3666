"""``balance``: one route name (a **pool**) served by several deployments (its **members**).

A pool is a route: ``balance`` registers every pool name with the registry (so ``-p NAME``,
``harness models``, ``harness chain NAME`` and the gateway's ``NAME/model`` find it) and its
middleware serves a stream of a pool from one member, ``route`` or ``route/model`` (a member
without a model keeps the requested model id). Which member:

* ``weighted`` (default): at random in proportion to the members' ``weight``;
* ``least-busy``: the fewest streams in flight (ties by weight);
* ``latency``: the lowest recent time to first content (an exponential moving average of this
  process's streams); a member never measured is tried first, and with probability
  ``explore`` a stream goes to a member picked by weight, so a slow member that recovered is seen;
* ``usage``: the most headroom under its own limits (the smallest of the rpm, tpm and
  in-flight fractions left; a member without limits has all of it).

Members that are cooling down are left out (unless every member is: then all are candidates, as
``fallback`` does), and a member at one of its limits (``rpm``: streams started in the last 60 s,
``tpm``: tokens of streams that ended in the last 60 s, ``max_in_flight``) is skipped. When every
candidate is at a limit the stream waits (up to ``wait`` seconds) for the soonest to free up, then
ends with ``finish{error, RATE_LIMITED}`` whose ``retry_after`` is the soonest time one frees up.

The fallback rule holds (:func:`harness_middleware.fallback.until_content` and
:func:`~harness_middleware.fallback.committed` are its one owner): a member failing with a
retryable failure (``codes``/``statuses``) **before its first content chunk** is cooled down for
``cooldown`` seconds and the stream moves to another member; after content was sent the failure
ends the stream, nothing is replayed. When every member failed, one ``finish{error}`` names every
attempt (``balance attempts: a/m: SERVER HTTP 503 'busy'; …``).

The member that served is reported where the served route is: ``StreamContext.route``/``.model``
and ``Message.route``/``.model`` (the runtime's boundary), and
:class:`~harness_core.record.StreamRecord` ``served_route``/``served_model``/``attempts`` for
outer middleware (the ``usage`` ledger, the prompt log) and the gateway (console, ``/metrics``).

Embedding calls (``llm_embed``, docs/embeddings.md) to a pool are served the same way: the same
strategies, limits (``rpm`` counts calls, ``tpm`` their input tokens), cooldowns and fallback
rule (a call that raises a matching :class:`~harness_core.errors.LlmError` moves to another
member; the final error names every attempt, ``balance attempts: …``); ``latency`` measures the
time to the answer. A pool name is a stream route only: :meth:`Harness.embed_routes` does not
list it (registering it would take the default embedding route away from the one embedding
route a config has), but ``Harness.embed(route="pool")`` reaches this layer and is served.

Counted requests (``llm_count_tokens``, ``Harness.count_tokens``) to a pool go to the member the
pool's strategy picks among those not cooling down, and move to another member on a matching
:class:`~harness_core.errors.LlmError` (the final error names every attempt). Counting is not
generating: it takes no slot, no rpm/tpm and cools no member down.

State: in-flight counts, limit windows and cooldowns live in a :class:`BalanceState`. The default
is one :class:`MemoryState` per process (every ``balance`` instance shares it, exact in the
process). A host that runs several processes (``harness serve`` with workers or hosts) shares
them by registering its own backend with :func:`share_state` (the gateway registers one over its
SQLite/PostgreSQL store). Counts are kept per member target (``route`` or ``route/model``): a
target listed in two pools is one deployment, its counts are shared and each pool's limits are
checked against them. Latency samples stay per process.
"""

from __future__ import annotations

import collections
import logging
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Annotated, Literal, Protocol

import anyio
import msgspec

from harness_core import Attempt, ConfigPath, RouteReference, field_message, open_embed_record, open_record
from harness_core.middleware import (
    CallNext,
    CountCallNext,
    EmbedCallNext,
    Embeddings,
    EmbedOptions,
    ErrorCode,
    Failure,
    GenerateOptions,
    LlmAdapter,
    LlmError,
    ModelInfo,
    RegisterAdapter,
    StreamChunk,
    Usage,
    hookimpl,
)
from harness_middleware._stream import aclose
from harness_middleware.fallback import (
    Failed,
    committed,
    error_finish_naming,
    error_naming,
    parse_target,
    until_content,
)

__all__ = [
    "WINDOW",
    "BalancePlugin",
    "BalanceState",
    "Limits",
    "MemberLoad",
    "MemoryState",
    "PoolAdapter",
    "admission_wait",
    "share_state",
    "shared_state",
]

logger = logging.getLogger(__name__)

Strategy = Literal["weighted", "least-busy", "latency", "usage"]

WINDOW = 60.0
"""Seconds of the rolling window of ``rpm`` and ``tpm``."""

_DEFAULT_CODES: tuple[ErrorCode, ...] = ("RATE_LIMITED", "OVERLOADED", "SERVER", "TIMEOUT", "NETWORK")
_POLL = 0.05
"""Seconds between two looks while every member is at a limit that frees up at an unknown time
(``max_in_flight``: when a stream ends); also the ``retry_after`` reported for it."""
_ALPHA = 0.3  # weight of the newest sample in the latency average


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """A member's own limits (``None`` = none): ``rpm`` streams started per 60 s, ``tpm`` tokens
    (input + output) of streams that ended in the last 60 s, ``max_in_flight`` streams at once."""

    rpm: int | None = None
    tpm: int | None = None
    max_in_flight: int | None = None


class MemberLoad:
    """What a :class:`BalanceState` knows about one member now (mutable; the memory state hands
    out its own live objects, so read them before awaiting anything).

    Attributes:
        in_flight: streams running now. requests: streams started in the last :data:`WINDOW`
        seconds. tokens: tokens of the streams that ended in that window. cooling_until: unix
        time until which the member is cooling down (0 = not cooling).
    """

    __slots__ = ("cooling_until", "in_flight", "requests", "tokens")

    def __init__(self, in_flight: int = 0, requests: int = 0, tokens: int = 0, cooling_until: float = 0.0) -> None:
        self.in_flight = in_flight
        self.requests = requests
        self.tokens = tokens
        self.cooling_until = cooling_until

    def __repr__(self) -> str:
        return (
            f"MemberLoad(in_flight={self.in_flight}, requests={self.requests}, tokens={self.tokens}, "
            f"cooling_until={self.cooling_until})"
        )


class BalanceState(Protocol):
    """Where ``balance`` keeps in-flight counts, limit windows and cooldowns (see the module doc).

    ``member`` is a member's target text (``route`` or ``route/model``); ``now`` is unix seconds
    (the plugin's clock). An implementation shared by several processes must decide
    :meth:`acquire` atomically per member (one after the other), so limits hold exactly.
    """

    async def loads(self, members: Sequence[str], now: float) -> Sequence[MemberLoad]:
        """The load of each of ``members``, in the same order."""

    async def acquire(self, member: str, limits: Limits, now: float) -> str | float:
        """Start a stream on ``member`` if it is under every one of ``limits``
        (:func:`admission_wait`): a ticket (text, to pass to :meth:`release`); else the seconds
        until it may be under them (> 0).

        Every method raises :class:`~harness_core.errors.LlmError` when the state is unreachable
        (the stream then fails with it; a failed :meth:`release` is logged)."""

    async def release(self, member: str, ticket: str, tokens: int, now: float) -> None:
        """The stream of ``ticket`` ended having used ``tokens`` (input + output)."""

    async def cool(self, member: str, until: float) -> None:
        """Leave ``member`` out until ``until`` (unix seconds; extends, never shortens)."""


def admission_wait(
    limits: Limits, load: MemberLoad, oldest_start: float | None, oldest_end: float | None, now: float
) -> float:
    """The one admission rule of every :class:`BalanceState`: 0 when a stream may start on a
    member with ``load`` (requests and tokens counted over the last :data:`WINDOW` seconds), else
    the seconds until it may (> 0): the oldest start (``rpm``) or end (``tpm``) of the window
    leaving it, or :data:`_POLL` for ``max_in_flight`` (a stream's end is not foreseeable).
    ``oldest_start``/``oldest_end`` are unix seconds, ``None`` when the window holds none."""
    wait = 0.0
    if limits.rpm is not None and load.requests >= limits.rpm:
        wait = max(wait, (oldest_start or now) + WINDOW - now)
    if limits.tpm is not None and load.tokens >= limits.tpm:
        wait = max(wait, (oldest_end or now) + WINDOW - now)
    if limits.max_in_flight is not None and load.in_flight >= limits.max_in_flight:
        wait = max(wait, _POLL)
    return wait


class _Window:
    __slots__ = ("ends", "load", "starts")

    def __init__(self) -> None:
        self.load = MemberLoad()
        self.starts: collections.deque[float] = collections.deque()
        self.ends: collections.deque[tuple[float, int]] = collections.deque()

    def prune(self, now: float) -> MemberLoad:
        start, starts, ends, load = now - WINDOW, self.starts, self.ends, self.load
        while starts and starts[0] <= start:
            starts.popleft()
        while ends and ends[0][0] <= start:
            load.tokens -= ends.popleft()[1]
        load.requests = len(starts)
        return load


class MemoryState:
    """:class:`BalanceState` in this process's memory (exact; not shared with other processes).

    Runs on the event loop without awaiting anything, so each call is atomic for the loop.
    """

    def __init__(self) -> None:
        self._windows: dict[str, _Window] = {}

    def _window(self, member: str) -> _Window:
        window = self._windows.get(member)
        if window is None:
            window = self._windows[member] = _Window()
        return window

    async def loads(self, members: Sequence[str], now: float) -> Sequence[MemberLoad]:
        """See :meth:`BalanceState.loads`."""
        return [self._window(member).prune(now) for member in members]

    async def acquire(self, member: str, limits: Limits, now: float) -> str | float:
        """See :meth:`BalanceState.acquire` (the ticket is empty: the memory keeps no rows)."""
        window = self._window(member)
        load = window.prune(now)
        oldest_end = window.ends[0][0] if window.ends else None
        wait = admission_wait(limits, load, window.starts[0] if window.starts else None, oldest_end, now)
        if wait > 0:
            return wait
        window.starts.append(now)
        load.requests += 1
        load.in_flight += 1
        return ""

    async def release(self, member: str, ticket: str, tokens: int, now: float) -> None:
        """See :meth:`BalanceState.release`."""
        window = self._window(member)
        window.load.in_flight -= 1
        if tokens:
            window.ends.append((now, tokens))
            window.load.tokens += tokens

    async def cool(self, member: str, until: float) -> None:
        """See :meth:`BalanceState.cool`."""
        load = self._window(member).load
        load.cooling_until = max(load.cooling_until, until)


_MEMORY = MemoryState()
_SHARED: list[BalanceState] = [_MEMORY]


def shared_state() -> BalanceState:
    """The state every :class:`BalancePlugin` without its own uses: the one :func:`share_state`
    registered last, else the process's :class:`MemoryState`."""
    return _SHARED[-1]


def share_state(state: BalanceState) -> Callable[[], None]:
    """Register ``state`` as the process's balance state (a host sharing counts between its
    processes, e.g. the gateway over its store); returns ``restore()``, which removes exactly
    this registration (idempotent)."""
    _SHARED.append(state)

    def restore() -> None:
        if state in _SHARED[1:]:
            _SHARED.remove(state)

    return restore


class Member(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One member of a pool in plugins.yaml.

    Fields:
        target: ``route`` or ``route/model`` serving the pool's streams.
        weight: its share of the traffic under ``weighted`` (and the tie-break of the others).
        rpm / tpm / max_in_flight: its own limits (see :class:`Limits`); none by default.
    """

    target: str
    weight: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    rpm: Annotated[int, msgspec.Meta(ge=1)] | None = None
    tpm: Annotated[int, msgspec.Meta(ge=1)] | None = None
    max_in_flight: Annotated[int, msgspec.Meta(ge=1)] | None = None


class Pool(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A pool with its own strategy: ``{members: [...], strategy: least-busy}``."""

    members: list[Member]
    strategy: Strategy | None = None


def _pool_members(pools: Mapping[str, list[Member] | Pool]) -> Iterator[tuple[str, ConfigPath, list[Member]]]:
    """``(pool name, path of its member list in the config, members)`` for every pool of ``pools``
    (the ``balance:`` config's): ``("pools", name)`` for a plain list, ``("pools", name,
    "members")`` for a :class:`Pool`."""
    for name, pool in pools.items():
        if isinstance(pool, Pool):
            yield name, ("pools", name, "members"), pool.members
        else:
            yield name, ("pools", name), pool


class _Member:
    __slots__ = ("label", "latency", "limits", "model", "route", "weight")

    def __init__(self, spec: Member) -> None:
        self.label = spec.target
        self.route, self.model = parse_target(spec.target)
        self.weight = spec.weight
        self.limits = Limits(rpm=spec.rpm, tpm=spec.tpm, max_in_flight=spec.max_in_flight)
        self.latency: float | None = None  # seconds to first content, moving average (this process)

    def headroom(self, load: MemberLoad) -> float:
        """The smallest fraction left under the member's limits (1.0 without limits)."""
        limits, left = self.limits, 1.0
        if limits.rpm is not None:
            left = min(left, 1 - load.requests / limits.rpm)
        if limits.tpm is not None:
            left = min(left, 1 - load.tokens / limits.tpm)
        if limits.max_in_flight is not None:
            left = min(left, 1 - load.in_flight / limits.max_in_flight)
        return left


class _Pool:
    __slots__ = ("labels", "members", "name", "strategy")

    def __init__(self, name: str, members: list[Member], strategy: Strategy) -> None:
        self.name = name
        self.members = [_Member(spec) for spec in members]
        self.labels = [member.label for member in self.members]
        self.strategy = strategy


class BalancePlugin:
    """Middleware serving each pool's streams from one of its members (see the module doc).

    Args:
        config: the validated :class:`BalancePlugin.Config`.
        state: where counts and cooldowns live; default :func:`shared_state` at each stream.
        clock: unix seconds (limit windows, cooldowns, time to first content); tests inject one.
    """

    class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
        """``balance:`` in plugins.yaml.

        Fields:
            pools: pool name → its members (a list), or ``{members: [...], strategy: ...}``.
            strategy: how a member is picked (``weighted``, ``least-busy``, ``latency``,
                ``usage``), for the pools without their own.
            codes: error codes that move a stream to another member before its first content
                (default the transient ones: ``RATE_LIMITED``, ``OVERLOADED``, ``SERVER``,
                ``TIMEOUT``, ``NETWORK``).
            statuses: HTTP statuses that move on whatever their code.
            cooldown: seconds a member that failed so is left out (0 = never).
            wait: seconds a stream waits while every member is at a limit before it fails
                ``RATE_LIMITED`` (0 = fail at once).
            explore: the share of ``latency`` streams sent to a member picked by weight.
            seed: seed of the random picks (``None`` = unpredictable; set it for reproducible runs).
        """

        pools: dict[str, list[Member] | Pool] = msgspec.field(default_factory=dict)
        strategy: Strategy = "weighted"
        codes: list[ErrorCode] = msgspec.field(default_factory=lambda: list(_DEFAULT_CODES))
        statuses: list[Annotated[int, msgspec.Meta(ge=100, le=599)]] = msgspec.field(default_factory=list)
        cooldown: Annotated[float, msgspec.Meta(ge=0)] = 30.0
        wait: Annotated[float, msgspec.Meta(ge=0)] = 5.0
        explore: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.1
        seed: int | None = None

        def __post_init__(self) -> None:
            """Check every pool (raises ``ValueError`` naming the pool and the member, located at
            the pool or the member's ``target``: :func:`~harness_core.field_message`)."""
            for name, where, members in _pool_members(self.pools):
                if not members:
                    raise ValueError(field_message(where, f"pool {name!r} has no members"))
                seen: set[str] = set()
                for index, member in enumerate(members):
                    at = (*where, index, "target")
                    try:
                        route, _ = parse_target(member.target)
                    except ValueError as exc:
                        raise ValueError(field_message(at, f"{exc} (a member of pool {name!r})")) from None
                    if route in self.pools:
                        problem = f"pool {name!r}: member {member.target!r} is a pool (pools do not nest)"
                        raise ValueError(field_message(at, problem))
                    if member.target in seen:
                        raise ValueError(field_message(at, f"pool {name!r} lists member {member.target!r} twice"))
                    seen.add(member.target)

    def __init__(
        self,
        config: Config | None = None,
        *,
        state: BalanceState | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config if config is not None else self.Config()
        self.state = state
        self.clock = clock
        self.random = random.Random(self.config.seed)
        self._codes = frozenset(self.config.codes)
        self._statuses = frozenset(self.config.statuses)
        self.pools: dict[str, _Pool] = {}
        for name, pool in self.config.pools.items():
            if isinstance(pool, Pool):
                self.pools[name] = _Pool(name, pool.members, pool.strategy or self.config.strategy)
            else:
                self.pools[name] = _Pool(name, pool, self.config.strategy)

    @hookimpl
    def register_adapter(self, register: RegisterAdapter) -> None:
        """Register every pool name as a route (served by :class:`PoolAdapter`)."""
        for pool in self.pools.values():
            register([pool.name], PoolAdapter(pool.name, pool.labels))

    def route_references(self) -> list[RouteReference]:
        """The route of every pool member's ``target`` (docs/hooks.md, "Optional plugin methods"):
        the start refuses a member whose route no plugin serves
        (:func:`harness_core.routing.check_routes`)."""
        return [
            RouteReference(
                (*where, index, "target"),
                parse_target(member.target)[0],
                f"member {member.target!r} of pool {name!r}",
                member.target,
            )
            for name, where, members in _pool_members(self.config.pools)
            for index, member in enumerate(members)
        ]

    def describe_chain(self, route: str | None) -> str:
        """One line for ``harness chain``: the pool's strategy and members, or every pool's name."""
        pool = self.pools.get(route or "")
        if pool is None:
            return "pools " + (", ".join(self.pools) or "none")
        members = ", ".join(f"{m.label} (weight {m.weight:g})" for m in pool.members)
        return f"pool {pool.name}: {pool.strategy} over {members}; cooldown {self.config.cooldown:g}s"

    def moves_on(self, failure: Failure) -> bool:
        """Whether ``failure`` sends the stream to another member (its code or status is listed)."""
        return failure.code in self._codes or (failure.status is not None and failure.status in self._statuses)

    def pick(self, pool: _Pool, candidates: list[_Member], loads: dict[str, MemberLoad]) -> _Member:
        """The member of ``candidates`` (not empty) the pool's strategy picks (see the module doc)."""
        strategy = pool.strategy
        if strategy == "least-busy":
            fewest = min(loads[m.label].in_flight for m in candidates)
            candidates = [m for m in candidates if loads[m.label].in_flight == fewest]
        elif strategy == "usage":
            most = max(m.headroom(loads[m.label]) for m in candidates)
            candidates = [m for m in candidates if m.headroom(loads[m.label]) == most]
        elif strategy == "latency":
            unmeasured = [m for m in candidates if m.latency is None]
            if unmeasured:
                candidates = unmeasured
            elif self.random.random() >= self.config.explore:
                lowest = min(m.latency or 0.0 for m in candidates)
                candidates = [m for m in candidates if m.latency == lowest]
        return self._weighted(candidates)

    def _weighted(self, candidates: list[_Member]) -> _Member:
        if len(candidates) == 1:
            return candidates[0]
        point = self.random.random() * sum(m.weight for m in candidates)
        for member in candidates:
            point -= member.weight
            if point < 0:
                return member
        return candidates[-1]  # pragma: no cover - float rounding: the point fell on the very end

    @hookimpl
    async def llm_stream(self, options: GenerateOptions, call_next: CallNext) -> AsyncIterator[StreamChunk]:
        """Serve a pool's stream from its members; other routes pass through untouched."""
        pool = self.pools.get(options.route or "")
        if pool is None:
            async for chunk in call_next(options):
                yield chunk
            return
        state = self.state if self.state is not None else shared_state()
        options, record = open_record(options)
        attempts = record.attempts
        left = list(pool.members)
        last: Failure | None = None
        deadline = self.clock() + self.config.wait
        while left:
            chosen = await self._choose(pool, left, state, deadline)
            if isinstance(chosen, Failure):
                last = chosen
                break
            member, ticket, now = chosen
            left.remove(member)
            model = member.model if member.model is not None else options.model
            record.served_route, record.served_model = member.route, model
            tokens = 0
            stream = call_next(msgspec.structs.replace(options, route=member.route, model=model))
            try:
                try:
                    held = await until_content(stream, self.moves_on)
                except Failed as failed:
                    last = failed.failure
                    attempts.append(Attempt(member.route, model, failure=last))
                    await self._cool(state, member, last)
                    if options.abort is not None and options.abort.fired:
                        break
                    continue
                self._measured(member, self.clock() - now)

                async def on_failure(attempt: Attempt, failure: Failure, member: _Member = member) -> None:
                    await self._cool(state, member, failure)

                served = Attempt(member.route, model)
                passing = committed(stream, held, served, attempts, named=True, failed=on_failure, what="balance")
                try:
                    async for chunk in passing:
                        if type(chunk) is Usage:
                            tokens = (chunk.usage.input_tokens or 0) + (chunk.usage.output_tokens or 0)
                        yield chunk
                finally:
                    await aclose(passing)
                return
            finally:
                try:
                    await aclose(stream)
                finally:
                    await self._release(state, member, ticket, tokens)
        assert last is not None, "no member left: the last failure is known"
        yield error_finish_naming(last, attempts, "balance")

    @hookimpl
    async def llm_embed(self, options: EmbedOptions, call_next: EmbedCallNext) -> Embeddings:
        """Serve a pool's embedding call from its members (see the module doc); other routes
        pass through untouched.

        Raises:
            LlmError: the member's error that does not move on, the last member's, or
                ``RATE_LIMITED`` when every member stayed at its limits, naming every attempt.
        """
        pool = self.pools.get(options.route or "")
        if pool is None:
            return await call_next(options)
        state = self.state if self.state is not None else shared_state()
        left = list(pool.members)
        last: Failure | None = None
        deadline = self.clock() + self.config.wait
        with open_embed_record(options) as record:
            while left:
                chosen = await self._choose(pool, left, state, deadline)
                if isinstance(chosen, Failure):
                    last = chosen
                    break
                member, ticket, now = chosen
                left.remove(member)
                model = member.model if member.model is not None else options.model
                record.served_route, record.served_model = member.route, model
                tokens = 0
                try:
                    result = await call_next(msgspec.structs.replace(options, route=member.route, model=model))
                    self._measured(member, self.clock() - now)
                    tokens = (result.usage.input_tokens or 0) if result.usage is not None else 0
                    return result
                except LlmError as exc:
                    last = exc.to_failure()
                    record.attempts.append(Attempt(member.route, model, failure=last))
                    await self._cool(state, member, last)
                    if not self.moves_on(last):
                        raise error_naming(last, record.attempts, "balance") from exc
                finally:
                    await self._release(state, member, ticket, tokens)
            assert last is not None, "no member left: the last failure is known"
            raise error_naming(last, record.attempts, "balance")

    @hookimpl
    async def llm_count_tokens(self, options: GenerateOptions, call_next: CountCallNext) -> int:
        """Count a pool's request on the member its strategy picks (module doc); other routes
        pass through untouched.

        Raises:
            LlmError: the member's error that does not move on, or the last member's, naming
                every attempt; the state's error when it is unreachable.
        """
        pool = self.pools.get(options.route or "")
        if pool is None:
            return await call_next(options)
        state = self.state if self.state is not None else shared_state()
        left = list(pool.members)
        attempts: list[Attempt] = []
        while True:  # the last member returns or raises
            now = self.clock()
            loads = dict(zip([m.label for m in left], await state.loads([m.label for m in left], now), strict=True))
            member = self.pick(pool, [m for m in left if loads[m.label].cooling_until <= now] or list(left), loads)
            left.remove(member)
            model = member.model if member.model is not None else options.model
            try:
                return await call_next(msgspec.structs.replace(options, route=member.route, model=model))
            except LlmError as exc:
                failure = exc.to_failure()
                attempts.append(Attempt(member.route, model, failure=failure))
                if not self.moves_on(failure) or not left:
                    raise error_naming(failure, attempts, "balance") from exc

    async def _choose(
        self, pool: _Pool, left: list[_Member], state: BalanceState, deadline: float
    ) -> tuple[_Member, str, float] | Failure:
        """The member of ``left`` the state admits, its ticket and the clock when it was
        admitted; while every candidate is at a limit, wait for the soonest to free up until
        ``deadline`` (unix seconds). Otherwise the failure that ends the request: every member
        stayed at its limits (``RATE_LIMITED``), or the state is unreachable."""
        while True:
            now = self.clock()
            try:
                found = await self._admit(pool, left, state, now)
            except LlmError as exc:  # the shared state is unreachable: the request fails, saying so
                return exc.to_failure()
            if not isinstance(found, float):
                return (*found, now)
            if now + found <= deadline or (now < deadline and found == _POLL):
                await anyio.sleep(min(found, max(deadline - now, 0.0)))
                continue
            return self._limited(pool, left, found)

    async def _release(self, state: BalanceState, member: _Member, ticket: str, tokens: int) -> None:
        """End the stream of ``ticket`` in ``state``, shielded from cancellation (it runs in a
        ``finally``); a failure is logged (the stream itself went well: it is not failed)."""
        try:
            if type(state) is MemoryState:  # never suspends: no cancellation can reach it, no scope needed
                await state.release(member.label, ticket, tokens, self.clock())
            else:
                with anyio.CancelScope(shield=True):
                    await state.release(member.label, ticket, tokens, self.clock())
        except LlmError as exc:
            logger.warning("balance: could not release member %r: %s", member.label, exc)

    async def _admit(
        self, pool: _Pool, left: list[_Member], state: BalanceState, now: float
    ) -> tuple[_Member, str] | float:
        """A member of ``left`` admitted by the state, with its ticket; else the soonest seconds
        until one is under its limits."""
        labels = [m.label for m in left] if len(left) != len(pool.members) else pool.labels
        loads = dict(zip(labels, await state.loads(labels, now), strict=True))
        candidates = [m for m in left if loads[m.label].cooling_until <= now] or list(left)
        soonest = math.inf
        while candidates:
            member = self.pick(pool, candidates, loads)
            admitted = await state.acquire(member.label, member.limits, now)
            if isinstance(admitted, str):
                return member, admitted
            soonest = min(soonest, admitted)
            candidates.remove(member)
        return soonest

    def _limited(self, pool: _Pool, left: list[_Member], retry_after: float) -> Failure:
        names = ", ".join(m.label for m in left)
        message = f"every member of pool {pool.name!r} is at its limits ({names}); retry in {retry_after:.2f}s"
        return LlmError("RATE_LIMITED", message, retry_after=retry_after).to_failure()

    def _measured(self, member: _Member, seconds: float) -> None:
        previous = member.latency
        member.latency = seconds if previous is None else previous + _ALPHA * (seconds - previous)

    async def _cool(self, state: BalanceState, member: _Member, failure: Failure) -> None:
        if self.config.cooldown > 0 and self.moves_on(failure):
            await state.cool(member.label, self.clock() + self.config.cooldown)


class PoolAdapter(LlmAdapter):
    """The adapter registered for a pool's name: the ``balance`` middleware serves the pool's
    streams (it never calls this), so :meth:`stream` only explains a misconfiguration; the models
    listed are the members' fixed ones."""

    def __init__(self, pool: str, members: Sequence[str]) -> None:
        self.pool = pool
        self.members = list(members)

    def gen_ai_provider(self, plugin: str) -> str | None:
        """``None``: a pool calls no provider itself; telemetry names the member that served
        (``StreamRecord.served_route``), known once one is chosen."""
        return None

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Raises ``LlmError("CONFIG")``: a pool's stream reached the adapter without ``balance``."""
        raise LlmError("CONFIG", f"route {self.pool!r} is a balance pool: only the balance middleware serves it")
        yield  # pragma: no cover - makes this an async generator; the raise above always runs

    async def list_models(self) -> list[ModelInfo]:
        """The members' fixed models (of ``route/model`` members), deduplicated, in order.

        Raises:
            LlmError: ``UNSUPPORTED`` when no member names a model (each serves the requested one).
        """
        models = list(dict.fromkeys(model for _, model in map(parse_target, self.members) if model is not None))
        if not models:
            raise LlmError("UNSUPPORTED", f"pool {self.pool!r}: its members serve the requested model id")
        return [ModelInfo(model=model) for model in models]

    def __repr__(self) -> str:
        return f"PoolAdapter(pool={self.pool!r}, members={self.members!r})"
