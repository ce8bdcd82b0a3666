"""The gateway's state policy: keys, spend, rate-limit windows and the usage ledger, in SQL.

This module owns the store's interface and its rules (:class:`SqlStore`, :func:`decide`, the
rate-limit windows); the backends only run its transactions. Two backends share every statement
and every decision: :class:`~harness_gateway.sqlite.SQLiteStore` (WAL journal; one host, any
number of processes; :mod:`harness_gateway.sqlite`) and
:class:`~harness_gateway.postgres.PostgresStore` (several workers or hosts). Statements are
written with ``?`` placeholders; the PostgreSQL backend numbers them.

Admission is one transaction per request that first locks the key row (SQLite ``BEGIN
IMMEDIATE``, PostgreSQL ``SELECT … FOR UPDATE``), so concurrent requests of one key — from any
process or host — are decided one after the other, on **counters kept on the key row** (no ledger
scan, docs/gateway.md#admission-counters-not-scans): ``running`` and ``reserved`` (the running
requests and what they reserve) and ``windows``, the key's requests and tokens per second of the
last minute (at most 60 entries). One read and one write of that row decide:

* **rpm**: requests started in the last 60 s must be fewer than ``rpm``.
* **tpm**: input + output tokens of requests that ended in the last 60 s must be below ``tpm``.
* **budget**: a request is admitted only when what it may cost, its **estimate**, fits in the
  room settled spend and running reservations leave (``estimate <= budget - spent - reserved``),
  and reserves it. The estimate is its **bound** when known, the most it can cost as priced
  before it runs (:func:`harness_gateway.spend.request_bound`: its estimated input tokens plus
  its ``max_tokens`` at the price book's rates; 0 for a route/model the book prices at 0);
  without a bound (no ``max_tokens``, or no price at all: a ``balance`` pool or ``fallback`` may
  serve it at a price) the larger of ``max_cost`` (the most any request of this key has cost so
  far) and its **floor**, the cost of its estimated input alone
  (:func:`harness_gateway.spend.generation_floor`: what it costs at least), and while the key's
  cost is unknown (no request of the key settled yet) such requests run one at a time. A
  request that fits once the running ones end waits (``budget_exceeded``, retryable); one that
  never fits (its estimate above what the spend leaves) is not retryable (``insufficient_quota``).
  So spend exceeds the budget only by what running requests cost beyond their reservations (no
  bound and an output costing more than the key's costliest request; an input estimate short
  of the real count; a ``fallback`` target or ``balance`` member priced above the route asked
  for). Near the budget (rare) the running rows are recounted, a dead process's settled first.

A settlement the database refuses (an outage) is kept in memory and retried with backoff, and
once more on shutdown (:meth:`SqlStore.drain`); its row's lease is no longer renewed, so should
this process die meanwhile, the reaper of another settles it.

Leases: every running ledger row carries its **owner** (``host:pid:nonce`` of the gateway process
that admitted it, :attr:`SqlStore.owner`) and a **lease** (``lease_until``, unix seconds) that the
owner renews every :attr:`SqlStore.lease` / 5 seconds while it has rows running
(:meth:`SqlStore.maintain`), and that :meth:`SqlStore.record` moves on whenever it records a
stream's usage so far (at most once a second per stream). A row whose lease has passed belongs
to a dead process (``kill -9``, OOM kill, host loss): it stops reserving at once, and the next
admission of its key or the next :meth:`SqlStore.reap` of any process of the store (at start and
every ``lease / 5`` seconds) settles it as ``lost``, charging the usage last recorded. A late
settlement of the same row (its owner was only stalled) charges the difference, never twice.
Rows without a lease (written by a gateway before schema version 2) expire
:data:`STALE_RUNNING` seconds after they started.

On PostgreSQL admission and settlement are each one statement: server-side functions doing what
:meth:`SqlStore._open` and :meth:`SqlStore._close` do (:data:`harness_gateway.postgres.FUNCTIONS_POSTGRES`,
decided by the same rule as :func:`decide`); near the budget the admission falls back to
:meth:`SqlStore._open`.

Lock order (PostgreSQL): a transaction that changes a key's spend locks the key row before its
ledger rows, so admission, settlement and the reaper cannot deadlock. Every failure of the
database is a 503 :class:`GatewayError`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shlex
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Literal, Protocol, TypeVar
from urllib.parse import quote

import anyio
import msgspec
from anyio.abc import TaskStatus

from harness_core import TokenUsage, moved_names
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyChange, KeyRecord, KeySpec, hash_key, new_key

__all__ = [
    "DEFERRED_MAX",
    "ENDED_ROW",
    "KEY_TTL",
    "LEASE",
    "STALE_RUNNING",
    "WINDOW",
    "SqlStore",
    "Status",
    "Tx",
    "decide",
    "key_record",
    "revoked",
    "unavailable",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
Status = Literal["complete", "aborted", "error"]

WINDOW: Final = 60.0
"""Seconds of the rolling rate-limit window."""

STALE_RUNNING: Final = 3600.0
"""Seconds after which a ``running`` ledger row without a lease (written by a gateway before
schema version 2) stops reserving budget and is settled as ``lost``."""

LEASE: Final = 5.0
"""Default seconds a running ledger row stays reserved without its owner renewing the lease (the
gateway config's ``lease``)."""

DEFERRED_MAX: Final = 10_000
"""Settlements a process keeps at most while the store fails them (:meth:`SqlStore.defer`)."""

_REAP_BATCH: Final = 500  # rows one reaper transaction settles at most (the next tick takes the rest)

KEY_TTL: Final = 2.0
"""Seconds :meth:`SqlStore.authenticate` reuses a key record it read (per process, by the key's
hash). Admission re-reads the key in its transaction, so a revoked key's next generation is
refused at once everywhere; only the other endpoints (``GET /v1/models``) may accept a key revoked
by another process for up to this long. A revocation through this store clears the cache."""

_KEY_CACHE_MAX: Final = 10_000  # records kept at most (only issued keys are cached)

_EPSILON: Final = 1e-9  # spend is summed in floats: a budget of N x cost admits exactly N

_KEY_COLUMNS: Final = "id, name, routes, budget, rpm, tpm, expires_at, created_at, revoked_at, spent"


class Tx(Protocol):
    """One open transaction: statements with ``?`` placeholders."""

    async def one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        """The first row of ``sql`` (``None`` when there is none)."""

    async def all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """Every row of ``sql``."""

    async def run(self, sql: str, *args: Any) -> int:
        """Execute ``sql``; the number of rows it changed."""


def decide(
    key: KeyRecord,
    window: Sequence[Any],
    now: float,
    bound: float | None = None,
    floor: float = 0.0,
    *,
    unpriced: str | None = None,
) -> GatewayError | float:
    """The admission decision for ``key``: a 429 :class:`GatewayError`, or the budget to reserve (USD).

    ``window`` is ``(requests in window, oldest start, tokens in window, oldest end, running
    requests, reserved by them, most a request has cost, earliest lease end of the running
    requests)`` as :meth:`SqlStore.admit` reads it (times in unix seconds). ``bound`` is the most
    the request can cost (:func:`harness_gateway.spend.request_bound`; ``None``: unknown),
    ``floor`` the least (:func:`harness_gateway.spend.generation_floor`, USD; 0 when unknown);
    ``unpriced`` the ``route/model`` the request asked for when the price book has no price for
    it (``None``: priced), named in the cure of its refusals (its price, not ``max_tokens``,
    which bounds no unpriced request).

    A budgeted key's request reserves its **estimate**: its bound when known (``0`` for a
    route/model priced at 0), else the larger of the most a request of the key has cost and its
    floor. It is admitted only when its estimate fits in the room the key's spend and running
    reservations leave (``estimate <= budget - spent - reserved``, to :data:`_EPSILON`); an
    estimate of 0 needs only an unspent budget (a spent budget admits nothing, not even a free
    request), whatever the running requests reserve, so a request with a bound never takes spend
    past the budget as priced. A request without a bound also waits for another while the key's
    cost is unknown (0: none settled yet), whatever its floor. The one rule; PostgreSQL's
    ``gateway_admit`` and Redis's :data:`~harness_gateway.redis_limits.ADMIT_LUA` implement it
    too, with the same floating-point operations in the same order.

    Every 429 names the real wait in ``retry_after``: until the oldest request (rpm) or the oldest
    tokens (tpm) leave the window, or, near the budget, until the earliest running reservation
    expires (its lease: a live owner settles or renews it before then, a dead one's is settled
    then). A request that cannot fit even once the running requests end (a spent budget, or an
    estimate above what the spend leaves: spend only grows) is not retryable (``retryable=False``:
    no ``retry-after``, OpenAI's ``insufficient_quota`` / Anthropic's ``billing_error``), its
    message naming what is left, the estimate and the cure, raising the key's budget among them
    (:func:`raise_budget`: the command and the admin endpoint, by the key's name).
    """
    requests, oldest_start, tokens, oldest_end, running, reserved, max_cost, lease_ends = window
    if key.rpm is not None and requests >= key.rpm:
        wait = oldest_start + WINDOW - now
        return GatewayError(
            429,
            f"key {key.name!r} is over its limit of {key.rpm} requests per minute",
            code="rate_limit_exceeded",
            retry_after=wait,
        )
    if key.tpm is not None and tokens >= key.tpm:
        wait = oldest_end + WINDOW - now
        return GatewayError(
            429,
            f"key {key.name!r} is over its limit of {key.tpm} tokens per minute",
            code="rate_limit_exceeded",
            retry_after=wait,
        )
    if key.budget is None:
        return 0.0
    learnt = max_cost or 0.0
    estimate = bound if bound is not None else max(learnt, floor)
    left = key.budget - key.spent  # what the running requests leave when they end: spend only grows
    room = left - reserved
    # a request that costs nothing needs only an unspent budget, whatever the running ones reserve
    fits = left > _EPSILON if estimate == 0 else room > _EPSILON and estimate <= room + _EPSILON
    unknown = bound is None and learnt <= 0 and running > 0
    if fits and not unknown:
        return estimate
    if left <= _EPSILON:
        return GatewayError(
            429,
            f"key {key.name!r} has spent its budget of ${key.budget:g} (${key.spent:g} spent): "
            f"not retryable with this key until an admin raises its budget {raise_budget(key)}",
            code="insufficient_quota",
            retryable=False,
        )
    what, cure = _estimate_reason(bound, learnt, floor, unpriced)
    if estimate > left + _EPSILON:
        return GatewayError(
            429,
            f"key {key.name!r} has ${left:g} left of its budget of ${key.budget:g} and this request may cost "
            f"${estimate:g} ({what}): not retryable as sent; {cure}, or have an admin raise the key's budget "
            f"{raise_budget(key)}",
            code="insufficient_quota",
            retryable=False,
        )
    cured = (
        _price_it(unpriced)
        if unpriced is not None
        else "a request that sets `max_tokens` (`max_output_tokens` on /v1/responses) has its cost known before "
        "it runs and need not wait"
    )
    why = (
        f"key {key.name!r} runs one request at a time while the cost of its requests is unknown (its "
        f"budget of ${key.budget:g} reserves what a request may cost): retry when the running one ends; {cured}"
        if fits
        else f"key {key.name!r} is near its budget of ${key.budget:g}: ${left:g} is unspent, its running requests "
        f"reserve ${reserved:g} and this request may cost ${estimate:g} ({what}): wait for them to finish"
    )
    return GatewayError(
        429,
        why,
        code="budget_exceeded",
        retry_after=None if lease_ends is None else lease_ends - now,  # None: not learnt yet (admission recounts)
    )


def raise_budget(key: KeyRecord) -> str:
    """How an admin raises ``key``'s budget, by its name (never its value: a key's name is not a
    secret), in parentheses: the ``harness keys update`` command and the admin endpoint."""
    name = key.name
    return (
        f"(`harness keys update {shlex.quote(name)} --budget <USD>`, or `PATCH /admin/keys/{quote(name, safe='')}`"
        ' with `{"budget": <USD>}`)'
    )


def _price_it(unpriced: str) -> str:
    """The cure of a request to a route/model without a price: configure one (the gateway's ``prices``)."""
    return (
        f"{unpriced} has no price, so no request to it has a cost known before it runs (`max_tokens` cannot "
        f"bound it): give it one in the gateway's `prices` (plugins.yaml `gateway: {{prices: {{{unpriced}: "
        "{input: <USD>, output: <USD>}}}`, per million tokens; 0 for a self-hosted model)"
    )


def _estimate_reason(bound: float | None, learnt: float, floor: float, unpriced: str | None) -> tuple[str, str]:
    """What a request's estimate in :func:`decide` is, and how a client makes it fit: ``(what, cure)``
    for its 429 messages (``unpriced``: :func:`decide`'s)."""
    if bound is not None:
        return (
            "its bound: its estimated input plus its output limit at its route's prices",
            "lower the output limit or shorten the input",
        )
    if unpriced is not None:
        return "the most a request of this key has cost, reserved for a request of unknown cost", _price_it(unpriced)
    if learnt >= floor:
        return (
            "the most a request of this key has cost, reserved for a request without `max_tokens`",
            "set `max_tokens` (`max_output_tokens` on /v1/responses) so its cost is known before it runs",
        )
    return "its estimated input alone at its route's prices", "shorten the input"


def _slide(windows: str | None, now: float) -> list[list[int]]:
    """The entries of a key's ``windows`` column (JSON ``[[second, requests, tokens], …]``, oldest
    first) still inside the window at ``now``: seconds from ``floor(now) - 60`` on. A request is so
    counted for 60 to 61 s (never less than the rolling minute: the limit is never exceeded)."""
    if not windows:
        return []
    first = math.floor(now) - int(WINDOW)
    return [entry for entry in msgspec.json.decode(windows, type=list[list[int]]) if entry[0] >= first]


def _totals(entries: Sequence[Sequence[int]]) -> tuple[int, float | None, int, float | None]:
    """``(requests, oldest start, tokens, oldest end)`` of the live ``entries`` as :func:`decide`
    reads them: a second's entry leaves the window 61 s after that second began, so its
    "oldest" time is that second + 1."""
    requests = sum(entry[1] for entry in entries)
    tokens = sum(entry[2] for entry in entries)
    oldest_start = next((entry[0] + 1.0 for entry in entries if entry[1]), None)
    oldest_end = next((entry[0] + 1.0 for entry in entries if entry[2]), None)
    return requests, oldest_start, tokens, oldest_end


def _add(entries: list[list[int]], now: float, requests: int, tokens: int) -> str:
    """The ``windows`` column with ``requests`` and ``tokens`` added at ``now`` (to the newest
    second when another host's clock ran ahead: counted longer, never shorter)."""
    second = math.floor(now)
    if entries and entries[-1][0] >= second:
        entries[-1][1] += requests
        entries[-1][2] += tokens
    else:
        entries.append([second, requests, tokens])
    return msgspec.json.encode(entries).decode()


def _name_taken(name: str, which: str) -> GatewayError:
    """The 409 of a key name another live key has (``which``: `` (id …)`` when known)."""
    return GatewayError(
        409,
        f"a live key named {name!r} exists{which}: key names are unique per gateway; "
        "choose another name or revoke that key first",
        code="key_name_taken",
        param="name",
    )


async def _check_name_free(tx: Tx, name: str) -> None:
    """Raise :func:`_name_taken` when a live key is named ``name`` (the unique index of live names
    refuses one committed concurrently: each caller maps that to the same 409), or when ``name`` is
    a live key's id: a key is addressed by its id or its name (:func:`_live_key`, id first), so
    that name would address the other key."""
    taken = await tx.one("SELECT id FROM gateway_keys WHERE name = ? AND revoked_at IS NULL", name)
    if taken is not None:
        raise _name_taken(name, f" (id {taken[0]})")
    if await tx.one("SELECT id FROM gateway_keys WHERE id = ? AND revoked_at IS NULL", name) is not None:
        raise GatewayError(
            409,
            f"{name!r} is the id of a live key: a key is addressed by its id or its name, so choose another name",
            code="key_name_taken",
            param="name",
        )


async def _live_key(tx: Tx, id_or_name: str, verb: str) -> KeyRecord | None:
    """The live key whose id is ``id_or_name``, else the one live key of that name; ``None`` when
    none is.

    Raises:
        GatewayError: 409 ``key_name_ambiguous`` when several live keys have that name (a store
            written before names were unique): ``verb`` one by its id.
    """
    live = " AND revoked_at IS NULL"
    row = await tx.one(f"SELECT {_KEY_COLUMNS} FROM gateway_keys WHERE id = ?{live}", id_or_name)
    if row is not None:
        return key_record(row)
    named = await tx.all(f"SELECT {_KEY_COLUMNS} FROM gateway_keys WHERE name = ?{live} ORDER BY id", id_or_name)
    if len(named) > 1:
        ids = ", ".join(row[0] for row in named)
        raise GatewayError(
            409,
            f"{len(named)} live keys are named {id_or_name!r} (ids {ids}): {verb} one by its id",
            code="key_name_ambiguous",
        )
    return key_record(named[0]) if named else None


def key_record(row: Sequence[Any]) -> KeyRecord:
    """The :class:`KeyRecord` of a ``gateway_keys`` row read as ``_KEY_COLUMNS`` (its first ten values)."""
    routes = json.loads(row[2]) if row[2] is not None else None
    return KeyRecord(
        id=row[0], name=row[1], routes=routes, budget=row[3], rpm=row[4], tpm=row[5],
        expires_at=row[6], created_at=row[7], revoked_at=row[8], spent=row[9],
    )  # fmt: skip


ENDED_ROW: Final = (
    "INSERT INTO gateway_ledger (id, key_id, route, model, started_at, ended_at, status, input_tokens,"
    " output_tokens, cost, reserved, owner) VALUES (?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)"
    " ON CONFLICT (id) DO NOTHING"
)
"""The ledger row of a request without a key, written once when it ended (:meth:`SqlStore.settle`):
``(id, route, model, started_at, ended_at, status, input_tokens, output_tokens, cost, owner)``."""

LIVE_NAME_INDEX: Final = "gateway_keys_live_name"
"""The unique partial index on the names of live keys (schema 5 of both backends): two concurrent
creates of one name cannot both commit. Its migration first renames the newer of any live keys
already sharing a name to ``<name> #<key id>`` (the oldest keeps the name; the keys keep working)."""


class SqlStore:
    """Keys, admission and the ledger over a SQL backend (subclasses provide :meth:`transaction`)."""

    description = "state store"

    def __init__(self, *, lease: float = LEASE) -> None:
        self._key_cache: dict[str, tuple[float, KeyRecord]] = {}
        self.lease = lease
        """Seconds a running row of this process stays reserved without a renewal (:meth:`maintain`)."""
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This process's name on its running ledger rows: host, process id and a nonce (a restarted
        process, in a container often the same pid, is a new owner)."""
        self.running: set[str] = set()
        """Tickets this process admitted and has not settled yet (their leases are renewed)."""
        self._key_ids: dict[str, str] = {}
        """The key id of each running ticket of a key, so settling needs no read first."""
        self._anonymous: dict[str, tuple[str, str, float]] = {}
        """The ``(route, model, started at)`` of each request without a key not settled yet: its
        ledger row is written once, when it ends (:meth:`settle`)."""
        self.deferred: dict[str, tuple[Status, TokenUsage | None, float, float]] = {}
        """Settlements that failed with a store fault, by ticket: ``(status, usage, cost, ended at)``
        (:meth:`defer`)."""
        self._retry_at = 0.0  # monotonic time of the next retry of the deferred settlements
        self._failures = 0  # retries of them that failed in a row
        self.schema = 0
        """The schema version :meth:`migrate` found or made (0 before it ran: :meth:`maintain` waits)."""

    async def transaction(self, work: Callable[[Tx], Awaitable[T]], *, write: bool = True) -> T:
        """Run ``work`` in one transaction (locking for writes); raise a 503 on database faults."""
        raise NotImplementedError

    migrations: tuple[tuple[int, str], ...] = ()
    """``(version, script)`` schema migrations of this backend, applied in order, once each."""

    time_type = "REAL"
    """The SQL type of unix times in the schema table."""

    migration_lock: str | None = None
    """A statement run first in the migration transaction, so one process migrates at a time."""

    async def migrate(self) -> int:
        """Apply missing schema migrations; the schema version now in place."""

        self.schema = await self.apply_migrations("gateway_schema", self.migrations)
        return self.schema

    async def apply_migrations(self, table: str, migrations: Sequence[tuple[int, str]]) -> int:
        """Apply the ``(version, script)`` ``migrations`` newer than the version recorded in
        ``table`` (created when missing), in one transaction under :attr:`migration_lock`; the
        version now in place. Also used by the console for its own tables."""

        async def work(tx: Tx) -> int:
            if self.migration_lock is not None:
                await tx.one(self.migration_lock)
            columns = f"version INTEGER PRIMARY KEY, applied_at {self.time_type} NOT NULL"
            await tx.run(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")
            row = await tx.one(f"SELECT coalesce(max(version), 0) FROM {table}")
            current = int(row[0]) if row is not None else 0
            for version, script in migrations:
                if version > current:
                    for statement in filter(str.strip, script.split(";")):
                        await tx.run(statement)
                    await tx.run(f"INSERT INTO {table} (version, applied_at) VALUES (?, ?)", version, time.time())
                    current = version
            return current

        return await self.transaction(work)

    def violates_live_name(self, exc: BaseException) -> bool:
        """Whether ``exc`` (raised by an ``INSERT`` into ``gateway_keys``) is the unique index on
        live key names (``gateway_keys_live_name``, schema 5) refusing a name taken meanwhile.
        Each backend (:class:`~harness_gateway.sqlite.SQLiteStore`,
        :class:`~harness_gateway.postgres.PostgresStore`) reads its own driver's error."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release connections."""

    async def ping(self) -> None:
        """Raise a 503 :class:`GatewayError` unless the database answers."""
        await self.transaction(lambda tx: tx.one("SELECT 1"), write=False)

    async def create_key(self, spec: KeySpec, *, now: float | None = None) -> tuple[str, KeyRecord]:
        """Store a new key; ``(the key itself, shown once, its record)``."""
        plain = new_key()
        moment = time.time() if now is None else now
        record = KeyRecord(
            id=uuid.uuid4().hex[:12],
            name=spec.name,
            routes=spec.routes,
            budget=spec.budget,
            rpm=spec.rpm,
            tpm=spec.tpm,
            expires_at=spec.expiry(moment),
            created_at=moment,
            revoked_at=None,
            spent=0.0,
        )
        routes = json.dumps(record.routes) if record.routes is not None else None

        async def insert(tx: Tx) -> None:
            await _check_name_free(tx, record.name)
            await self._write_named(
                tx,
                record.name,
                "INSERT INTO gateway_keys"
                " (id, hash, name, routes, budget, rpm, tpm, expires_at, created_at, spent, max_cost)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0)",
                record.id, hash_key(plain), record.name, routes, record.budget, record.rpm, record.tpm,
                record.expires_at, record.created_at,
            )  # fmt: skip

        await self.transaction(insert)
        return plain, record

    async def _write_named(self, tx: Tx, name: str, sql: str, *args: Any) -> None:
        """Run ``sql`` (an ``INSERT`` or ``UPDATE`` of a key that gives it the live name ``name``,
        checked free before in ``tx``: :func:`_check_name_free`); the unique index of live names
        refusing it (a create or change of that name committed after the check) is the same 409
        (:func:`_name_taken`), any other fault what it is."""
        try:
            await tx.run(sql, *args)
        except Exception as exc:
            if not self.violates_live_name(exc):
                raise
            raise _name_taken(name, "") from None

    async def list_keys(self) -> list[KeyRecord]:
        """Every key, oldest first (revoked ones included)."""
        rows = await self.transaction(
            lambda tx: tx.all(f"SELECT {_KEY_COLUMNS} FROM gateway_keys ORDER BY created_at, id"), write=False
        )
        return [key_record(row) for row in rows]

    async def revoke(self, id_or_name: str, *, now: float | None = None) -> int:
        """Revoke the live key whose id is ``id_or_name``, else the one live key of that name; how
        many were revoked (0 or 1).

        Raises:
            GatewayError: 409 (``key_name_ambiguous``) when several live keys have that name (a
                store written before names were unique): revoke them by id.
        """
        moment = time.time() if now is None else now

        async def revoke(tx: Tx) -> int:
            key = await _live_key(tx, id_or_name, "revoke")
            if key is None:
                return 0
            return await tx.run(
                "UPDATE gateway_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", moment, key.id
            )

        revoked = await self.transaction(revoke)
        self._key_cache.clear()
        return revoked

    async def update_key(self, id_or_name: str, change: KeyChange, *, now: float | None = None) -> KeyRecord | None:
        """Apply ``change`` to the live key whose id is ``id_or_name``, else to the one live key of
        that name; its record as changed, or ``None`` when no live key matches. The key's value,
        id, creation time and spend are kept. A change of budget, rpm or tpm is seen by the next
        admission of every process (admission reads the key's row in its transaction); one of
        routes or expiry, checked when a request authenticates, at once in this process (its cache
        of key records is cleared) and within :data:`KEY_TTL` seconds in another (which reuses a
        record it read that long).

        Raises:
            KeySpecError: the changed key breaks a rule of :class:`~harness_gateway.keys.KeySpec`
                (naming the field; :meth:`~harness_gateway.keys.KeyChange.applied`).
            GatewayError: 409 ``key_name_taken`` for a new name another live key has;
                409 ``key_name_ambiguous`` as :meth:`revoke` raises it.
        """
        moment = time.time() if now is None else now

        async def update(tx: Tx) -> KeyRecord | None:
            key = await _live_key(tx, id_or_name, "update")
            if key is None:
                return None
            changed = change.applied(key, moment)
            if changed.name != key.name:
                await _check_name_free(tx, changed.name)
            routes = json.dumps(changed.routes) if changed.routes is not None else None
            await self._write_named(
                tx,
                changed.name,
                "UPDATE gateway_keys SET name = ?, routes = ?, budget = ?, rpm = ?, tpm = ?, expires_at = ?"
                " WHERE id = ? AND revoked_at IS NULL",
                changed.name, routes, changed.budget, changed.rpm, changed.tpm, changed.expires_at, key.id,
            )  # fmt: skip
            return changed

        changed = await self.transaction(update)
        self._key_cache.clear()
        return changed

    async def authenticate(self, key: str) -> KeyRecord | None:
        """The record of ``key`` (by its hash), or ``None`` when no such key was ever issued.

        A record read is reused for :data:`KEY_TTL` seconds (its ``spent`` may be that old;
        admission reads the key again); an unknown key is looked up every time, so a key
        created in another process works at once.
        """
        digest = hash_key(key)
        now = time.monotonic()
        cached = self._key_cache.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        row = await self.transaction(
            lambda tx: tx.one(f"SELECT {_KEY_COLUMNS} FROM gateway_keys WHERE hash = ?", digest), write=False
        )
        if row is None:
            return None
        record = key_record(row)
        if len(self._key_cache) >= _KEY_CACHE_MAX:
            self._key_cache.clear()
        self._key_cache[digest] = (now + KEY_TTL, record)
        return record

    async def admit(
        self,
        key: KeyRecord | None,
        route: str,
        model: str,
        *,
        now: float | None = None,
        bound: float | None = None,
        floor: float = 0.0,
        priced: bool = True,
    ) -> str:
        """Check ``key``'s limits and budget atomically and open its ledger row; the row's id.

        ``key`` ``None`` (keys not required, or the master key) checks nothing and writes nothing
        now: such a request reserves and charges nothing, so its ledger row is written once, when
        it ends (:meth:`settle`; a process dying meanwhile loses only that row, as it loses the
        console's record of the request). ``bound``: the most
        the request can cost in USD as priced before it runs (:func:`harness_gateway.spend.request_bound`:
        ``0.0`` for a route/model priced at 0, ``None`` when unknown), what a budgeted key
        reserves for it (:func:`decide`); ``floor``: the least it costs (USD, 0 when unknown), what
        a request without a bound reserves at least; ``priced``: the price book has a price for
        ``route/model`` (a refusal of one without names its price as the cure, :func:`decide`).

        Raises:
            GatewayError: 429 (rate or budget, with ``retry_after``), 401 when the key was revoked
                meanwhile, 503 when the database fails.
        """
        ticket = uuid.uuid4().hex
        moment = time.time() if now is None else now
        if key is None:  # nothing to check, reserve or charge: its row is written when it ends
            self._anonymous[ticket] = (route, model, moment)
            return ticket
        try:
            await self._open(ticket, key.id, route, model, moment, bound, floor, None if priced else f"{route}/{model}")
        except GatewayError:
            raise  # refused, or the store failed: nothing was committed
        except BaseException:  # cancelled while its transaction was in flight: it may have committed
            self.defer(ticket, "aborted", None, 0.0, now=moment)  # settles the row if it exists, else nothing
            raise
        self.running.add(ticket)
        self._key_ids[ticket] = key.id
        return ticket

    async def _open(
        self,
        ticket: str,
        key_id: str,
        route: str,
        model: str,
        now: float,
        bound: float | None,
        floor: float = 0.0,
        unpriced: str | None = None,
    ) -> None:
        """Decide the admission of ``key_id`` and open its running ledger row ``ticket``, in one
        transaction (:meth:`_check`; ``bound`` and ``floor`` as :meth:`admit` takes them,
        ``unpriced`` as :func:`decide` does); raises
        as :meth:`admit` does. :class:`~harness_gateway.postgres.PostgresStore` does it in one
        statement instead, and falls back to this near the budget."""

        async def work(tx: Tx) -> None:
            reserve = await self._check(tx, key_id, now, bound, floor, unpriced)
            await tx.run(
                "INSERT INTO gateway_ledger"
                " (id, key_id, route, model, started_at, status, reserved, owner, lease_until)"
                " VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
                ticket, key_id, route, model, now, reserve, self.owner, now + self.lease,
            )  # fmt: skip

        await self.transaction(work)

    async def _check(
        self, tx: Tx, key_id: str, now: float, bound: float | None, floor: float = 0.0, unpriced: str | None = None
    ) -> float:
        """Decide an admission of ``key_id`` (``bound``, ``floor``: :meth:`admit`'s; ``unpriced``:
        :func:`decide`'s) on its counters (one key-row read, one key-row write); the budget reserved."""
        row = await tx.one(
            f"SELECT {_KEY_COLUMNS}, max_cost, running, reserved, windows"
            f" FROM gateway_keys WHERE id = ?{self.lock_clause}",
            key_id,
        )
        if row is None or row[8] is not None:
            raise revoked()
        key, max_cost, running, reserved, windows = key_record(row), row[10], row[11], row[12], row[13]
        entries = _slide(windows, now)
        window: tuple[Any, ...] = (*_totals(entries), running, reserved, max_cost, None)
        decision = decide(key, window, now, bound, floor, unpriced=unpriced)
        if isinstance(decision, GatewayError) and decision.code == "budget_exceeded":
            # near the budget (rare): a running reservation may be a dead process's; those are
            # settled first, the counters recounted from the running rows, the real wait learnt
            spent, windows, running, reserved, lease_ends = await self._recount(tx, key_id, now)
            key = msgspec.structs.replace(key, spent=spent)
            entries = _slide(windows, now)
            window = (*_totals(entries), running, reserved, max_cost, lease_ends)
            decision = decide(key, window, now, bound, floor, unpriced=unpriced)
        if isinstance(decision, GatewayError):
            raise decision
        await tx.run(
            "UPDATE gateway_keys SET running = running + 1, reserved = reserved + ?, windows = ? WHERE id = ?",
            decision, _add(entries, now, 1, 0) if key.rpm is not None else windows, key_id,
        )  # fmt: skip
        return decision

    async def _recount(self, tx: Tx, key_id: str, now: float) -> tuple[float, str | None, int, float, float | None]:
        """Settle the dead running rows of ``key_id`` (locked by the caller) and reset its counters
        from its live running rows; ``(spent, windows, running, reserved, earliest lease end)``."""
        rows = await tx.all(
            "SELECT id, reserved, coalesce(lease_until, started_at + ?) FROM gateway_ledger"
            " WHERE key_id = ? AND status = 'running'",
            STALE_RUNNING, key_id,
        )  # fmt: skip
        dead = [ticket for ticket, _, ends in rows if ends <= now]
        live = [(reserved, ends) for _, reserved, ends in rows if ends > now]
        if dead:  # their owner died: settled first, so the spend counts what they used
            await self._lose(tx, key_id, dead, now)
        running, reserved = len(live), sum(reserved for reserved, _ in live)
        await tx.run("UPDATE gateway_keys SET running = ?, reserved = ? WHERE id = ?", running, reserved, key_id)
        found = await tx.one("SELECT spent, windows FROM gateway_keys WHERE id = ?", key_id)
        assert found is not None  # the caller read (and locked) this key
        return found[0], found[1], running, reserved, min((end for _, end in live), default=None)

    lock_clause = ""
    """Appended to the key read of an admission (``" FOR UPDATE"`` on PostgreSQL)."""

    async def settle(
        self, ticket: str, status: Status, usage: TokenUsage | None, cost: float, *, now: float | None = None
    ) -> None:
        """Close ledger row ``ticket``: its status, tokens and cost; the key's spend grows by ``cost``,
        its reservation is released and (with a ``tpm``) its tokens enter the window.

        A row a reaper settled meanwhile as ``lost`` (this process was stalled past its lease) gets
        its final values and the key only the difference to what the reaper charged.
        """
        moment = time.time() if now is None else now
        input_tokens = usage.input_tokens if usage is not None else None
        output_tokens = usage.output_tokens if usage is not None else None
        anonymous = self._anonymous.get(ticket)
        if anonymous is not None:  # kept until written: a deferred retry writes it then
            route, model, began = anonymous
            await self._write_ended(
                (ticket, route, model, began, moment, status, input_tokens, output_tokens, cost, self.owner)
            )
            del self._anonymous[ticket]
            return
        try:
            await self._close(ticket, self._key_ids.get(ticket), status, input_tokens, output_tokens, cost, moment)
        finally:
            self.running.discard(ticket)
            self._key_ids.pop(ticket, None)

    async def _write_ended(self, values: tuple[Any, ...]) -> None:
        """Write the ledger row of a request without a key that ended (``values``: :data:`ENDED_ROW`'s),
        in one statement; a retry after a fault whose transaction had committed writes nothing more
        (``ON CONFLICT DO NOTHING``). :class:`~harness_gateway.postgres.PostgresStore` does it in
        one round trip."""
        await self.transaction(lambda tx: tx.run(ENDED_ROW, *values))

    async def _close(
        self,
        ticket: str,
        known: str | None,
        status: Status,
        input_tokens: int | None,
        output_tokens: int | None,
        cost: float,
        moment: float,
    ) -> None:
        """Settle ledger row ``ticket`` (``known``: its key id as admitted here, ``""`` anonymous,
        ``None`` unknown: read from the row) in one transaction, as :meth:`settle` describes;
        :class:`~harness_gateway.postgres.PostgresStore` does it in one statement."""
        tokens = (input_tokens or 0) + (output_tokens or 0)

        async def work(tx: Tx) -> None:
            key_id = known
            if key_id is None:  # a row this process did not admit
                found = await tx.one("SELECT coalesce(key_id, '') FROM gateway_ledger WHERE id = ?", ticket)
                key_id = found[0] if found is not None else ""
            key = None
            if key_id:
                key = await tx.one(f"SELECT tpm, windows FROM gateway_keys WHERE id = ?{self.lock_clause}", key_id)
            old = await tx.one(
                "SELECT status, coalesce(cost, 0), reserved, coalesce(input_tokens, 0) + coalesce(output_tokens, 0)"
                " FROM gateway_ledger WHERE id = ?",
                ticket,
            )
            await tx.run(
                "UPDATE gateway_ledger SET status = ?, ended_at = ?, input_tokens = ?, output_tokens = ?, cost = ?"
                " WHERE id = ?",
                status, moment, input_tokens, output_tokens, cost, ticket,
            )  # fmt: skip
            if key is not None and old is not None:
                if old[0] == "running":
                    await self._charge(tx, key_id, key, cost, cost, old[2], tokens, moment)
                else:  # a reaper charged what was recorded: only the difference now
                    await self._charge(tx, key_id, key, cost - old[1], cost, None, tokens - old[3], moment)

        await self.transaction(work)

    def defer(
        self, ticket: str, status: Status, usage: TokenUsage | None, cost: float, *, now: float | None = None
    ) -> None:
        """Keep the settlement of ``ticket`` that failed with a store fault (or of an admission
        cancelled while its transaction was in flight, which may have committed), to be retried by
        :meth:`settle_deferred` (every :meth:`maintain` tick, with backoff) and :meth:`drain`
        (graceful shutdown). Its lease is no longer renewed (:meth:`settle` dropped it from
        :attr:`running`): should this process die first, a reaper settles the row as ``lost``
        after one lease, charging the usage recorded, and a later retry charges the difference.
        At most :data:`DEFERRED_MAX` are kept: beyond, the oldest is dropped (logged as an error,
        the reaper settles its row)."""
        if len(self.deferred) >= DEFERRED_MAX:
            dropped = next(iter(self.deferred))
            del self.deferred[dropped]
            self._anonymous.pop(dropped, None)
            logger.error(
                "%s: %d settlements wait for the store: dropped ledger row %s's (the lease reaper settles it as lost)",
                self.description, DEFERRED_MAX, dropped,
            )  # fmt: skip
        self.deferred[ticket] = (status, usage, cost, time.time() if now is None else now)

    async def settle_deferred(self, *, force: bool = False) -> int:
        """Retry the deferred settlements (:meth:`defer`), oldest first, until the first store fault;
        how many were settled. After a fault the next retry waits 0.1 s, doubling up to
        :attr:`lease` seconds (``force``: retry now, as :meth:`drain` does)."""
        if not self.deferred or (not force and time.monotonic() < self._retry_at):
            return 0
        done = 0
        for ticket, (status, usage, cost, moment) in list(self.deferred.items()):
            try:
                await self.settle(ticket, status, usage, cost, now=moment)
            except GatewayError:  # logged with its cause by unavailable(); kept for the next retry
                self._failures += 1
                self._retry_at = time.monotonic() + min(self.lease, 0.1 * 2 ** (self._failures - 1))
                break
            del self.deferred[ticket]
            done += 1
        else:
            self._failures = 0
        if done:
            logger.warning("%s: settled %d deferred ledger row(s)", self.description, done)
        return done

    async def drain(self) -> None:
        """On graceful shutdown: one last retry of the deferred settlements; those still failing are
        logged (their rows are settled as ``lost`` by a reaper once their lease passes)."""
        await self.settle_deferred(force=True)
        for ticket in self.deferred:
            logger.error(
                "%s: ledger row %s could not be settled before shutdown (a reaper settles it as lost)",
                self.description, ticket,
            )  # fmt: skip

    async def _charge(
        self,
        tx: Tx,
        key_id: str,
        key: Sequence[Any],
        amount: float,
        cost: float,
        released: float | None,
        tokens: int,
        now: float,
    ) -> None:
        """Add ``amount`` USD to the spend of ``key_id`` (``key``: its ``(tpm, windows)`` as read
        under its lock); ``cost`` (one request's) may raise its ``max_cost``; ``released``: the
        reservation of a running row that ends (``None``: it had ended already); ``tokens`` enter
        the tpm window at ``now`` when the key has a tpm."""
        windows = key[1]
        if key[0] is not None and tokens:
            windows = _add(_slide(windows, now), now, 0, tokens)
        ends = 0 if released is None else 1
        await tx.run(
            "UPDATE gateway_keys SET spent = spent + ?, max_cost = CASE WHEN max_cost < ? THEN ? ELSE max_cost END,"
            " reserved = CASE WHEN running > ? THEN reserved - ? ELSE 0 END,"
            " running = CASE WHEN running > ? THEN running - ? ELSE 0 END, windows = ? WHERE id = ?",
            amount, cost, cost, ends, released or 0.0, ends, ends, windows, key_id,
        )  # fmt: skip

    async def record(self, ticket: str, usage: TokenUsage, cost: float, *, now: float | None = None) -> bool:
        """Record the usage so far of running row ``ticket`` (what a reaper charges should its owner
        die) and renew its lease; whether the row was still running.

        Called at most once a second per stream (:mod:`harness_gateway.relay`,
        :mod:`harness_gateway.embedding`); charges nothing.
        """
        if ticket in self._anonymous:  # no row yet, and nothing a reaper would charge
            return True
        moment = time.time() if now is None else now
        changed = await self.transaction(
            lambda tx: tx.run(
                "UPDATE gateway_ledger SET input_tokens = ?, output_tokens = ?, cost = ?, lease_until = ?"
                " WHERE id = ? AND status = 'running'",
                usage.input_tokens,
                usage.output_tokens,
                cost,
                moment + self.lease,
                ticket,
            )
        )
        return changed > 0

    async def renew(self, *, now: float | None = None) -> int:
        """Move the lease of every running row of this process :attr:`lease` seconds on; how many
        rows it renewed (no statement at all while none runs)."""
        if not self.running:
            return 0
        moment = time.time() if now is None else now
        return await self.transaction(
            lambda tx: tx.run(
                "UPDATE gateway_ledger SET lease_until = ? WHERE status = 'running' AND owner = ?",
                moment + self.lease,
                self.owner,
            )
        )

    async def reap(self, *, now: float | None = None) -> int:
        """Settle the running rows whose lease has passed (their owner died) as ``lost``, charging
        each key the usage last recorded; how many rows it settled.

        A read finds them first, so the common case (none) takes no write lock. At most
        :data:`_REAP_BATCH` rows per call; keys are locked one by one in id order (lock order).
        """
        moment = time.time() if now is None else now
        expired = (
            "SELECT id, key_id, cost FROM gateway_ledger"
            " WHERE status = 'running' AND coalesce(lease_until, started_at + ?) <= ?"
        )
        probe = expired + " LIMIT 1"
        if not await self.transaction(lambda tx: tx.all(probe, STALE_RUNNING, moment), write=False):
            return 0

        async def work(tx: Tx) -> int:
            rows = await tx.all(expired + f" ORDER BY key_id, id LIMIT {_REAP_BATCH}", STALE_RUNNING, moment)
            by_key: dict[str | None, list[str]] = {}
            for ticket, key_id, _ in rows:
                by_key.setdefault(key_id, []).append(ticket)
            settled = 0
            for key_id, dead in by_key.items():  # keys one by one in id order (lock order)
                settled += await self._lose(tx, key_id, dead, moment)
            return settled

        reaped = await self.transaction(work)
        logger.warning(
            "%s: settled %d ledger row(s) of gateway processes that died (their lease passed) as lost",
            self.description, reaped,
        )  # fmt: skip
        return reaped

    async def _lose(self, tx: Tx, key_id: str | None, dead: Sequence[str], now: float) -> int:
        """Settle the rows ``dead`` of ``key_id`` (its row locked first: lock order) as ``lost``, each
        only while it still runs with its lease passed, charging the usage recorded; how many."""
        key = None
        if key_id is not None:
            key = await tx.one(f"SELECT tpm, windows FROM gateway_keys WHERE id = ?{self.lock_clause}", key_id)
        settled = 0
        for ticket in dead:
            changed = await tx.all(
                "UPDATE gateway_ledger SET status = 'lost', ended_at = ?"
                " WHERE id = ? AND status = 'running' AND coalesce(lease_until, started_at + ?) <= ?"
                " RETURNING coalesce(cost, 0), reserved, coalesce(input_tokens, 0) + coalesce(output_tokens, 0)",
                now, ticket, STALE_RUNNING, now,
            )  # fmt: skip
            for amount, reserved, tokens in changed:  # nothing recorded (it died within its first second): 0
                settled += 1
                if key is not None:  # a key's row (an anonymous row charges nobody)
                    await self._charge(tx, str(key_id), key, amount, amount, reserved, tokens, now)
                    key = await tx.one("SELECT tpm, windows FROM gateway_keys WHERE id = ?", key_id)
        return settled

    async def maintain(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Forever: retry deferred settlements (:meth:`settle_deferred`), renew this process's leases
        and reap the rows of dead owners, at start and
        then every :attr:`lease` / 5 seconds (started with ``TaskGroup.start`` by ``harness serve``).
        Nothing is done before :meth:`migrate` succeeded; a database fault is logged (by
        :func:`unavailable`) and retried at the next tick. Any other exception (a bug) is logged
        with its traceback and the loop goes on: the leases of the requests in flight must keep
        being renewed, and the lifespan that runs this loop must not end with it."""
        task_status.started()
        while True:
            if self.schema:
                try:
                    await self.settle_deferred()
                    await self.renew()
                    await self.reap()
                except GatewayError:
                    pass  # already logged with its cause by unavailable(); the next tick retries
                except Exception:
                    logger.exception(
                        "%s: the maintenance of leases and settlements failed; retried at the next tick",
                        self.description,
                    )
            await anyio.sleep(self.lease / 5)

    async def ledger(self, key_id: str | None = None) -> list[dict[str, Any]]:
        """Ledger rows (of one key, or all), oldest first, as dicts."""
        columns = (
            "id",
            "key_id",
            "route",
            "model",
            "started_at",
            "ended_at",
            "status",
            "input_tokens",
            "output_tokens",
            "cost",
        )
        where = " WHERE key_id = ?" if key_id is not None else ""
        args = (key_id,) if key_id is not None else ()
        rows = await self.transaction(
            lambda tx: tx.all(f"SELECT {', '.join(columns)} FROM gateway_ledger{where} ORDER BY started_at, id", *args),
            write=False,
        )
        return [dict(zip(columns, row, strict=True)) for row in rows]


def revoked() -> GatewayError:
    """The 401 of an admission whose key was revoked (or deleted) since it authenticated."""
    return GatewayError(401, "this API key has been revoked", code="invalid_api_key")


def unavailable(description: str, exc: BaseException) -> GatewayError:
    """The 503 answered while the database cannot be reached (logged with its cause)."""
    logger.error("%s unavailable: %s: %s", description, type(exc).__name__, exc)
    return GatewayError(
        503,
        f"the gateway's {description.split(' ')[0]} state store is unavailable ({type(exc).__name__}); "
        "no request is served unaccounted: retry shortly",
        code="store_unavailable",
        retry_after=1.0,
    )


_MOVED: Final = {"SQLiteStore": "harness_gateway.sqlite", "MIGRATIONS_SQLITE": "harness_gateway.sqlite",
                 "SET_UP_RETRY": "harness_gateway.sqlite"}  # fmt: skip


__getattr__ = moved_names(__name__, _MOVED)
"""A moved name still reads from here, with a ``DeprecationWarning`` naming its module now
(the core's one rule for old import paths)."""
