"""Admission state in Redis or Valkey: a key's rpm/tpm windows, spend and running reservations
(with their leases), for one hot key served by many workers and hosts (config ``limits:
redis://…``; docs/gateway.md#admission-in-redis-or-valkey).

The split: **keys and the ledger stay in SQL** (SQLite or PostgreSQL, ``database``: what a key
may do, who revoked it, what every request cost: the record an operator audits and the console
shows); **what admission decides on lives in Redis** (per key, under the hash tag ``{<key id>}``
so a Redis Cluster keeps one key's state on one shard):

* ``hg:{id}:s`` (hash): ``spent``, ``max_cost``, ``running``, ``reserved``: the counters of
  :func:`~harness_gateway.store.decide`, seeded from the SQL key row the first time (or after
  Redis lost its data: the SQL ``spent`` is kept by every settlement);
* ``hg:{id}:r`` / ``hg:{id}:t`` (hashes): requests and tokens per second of the last minute
  (fields older than 60 s are dropped on the next admission or settlement);
* ``hg:{id}:l`` (sorted set): running tickets by lease end; ``hg:{id}:x`` (hash): what each
  reserves.

An admission is one atomic Lua script (:data:`ADMIT_LUA`, run with ``EVALSHA``): reservations whose
lease passed come back (their owner died), the windows slide, the rule of
:func:`~harness_gateway.store.decide` decides (the same comparisons as PostgreSQL's
``gateway_admit``: ``test_gw_pg_functions.py`` checks both against :func:`decide` over
generated keys) and an admitted request's ticket, reservation and lease are written. A refusal
answers what it decided on, and :func:`decide` builds the 429. A settlement is one script too
(:data:`SETTLE_LUA`): release the ticket's reservation (when still held), add the spend, the
tokens enter the window. So every process on one Redis decides one key's requests one after
the other, exactly, without a SQL row lock on the hot path.

SQL per request: the key read (a revoked key is refused at once everywhere), the ledger row's
insert, and at settlement its update plus the key's ``spent`` (one short transaction; the ledger
row is locked before the key row, the order of every statement of this store). The SQL
settlement decides what is charged (a row a reaper settled as ``lost`` gets only the
difference) before Redis is told; a Redis fault after it keeps that charge in memory
(:attr:`RedisAdmission.charges`) and retries it before anything else, so nothing is charged
twice. Redis unreachable: every admission is a 503 (``store_unavailable``), never an admission
without a check.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import anyio
import msgspec

from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord
from harness_gateway.postgres import PostgresStore, numbered
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.store import (
    _KEY_COLUMNS,
    STALE_RUNNING,
    SqlStore,
    Status,
    Tx,
    decide,
    key_record,
    revoked,
    unavailable,
)

__all__ = [
    "ADMIT_LUA",
    "SETTLE_LUA",
    "SETTLE_SQL",
    "RedisAdmission",
    "RedisLimits",
    "RedisPostgresStore",
    "RedisSQLiteStore",
]

T = TypeVar("T")

logger = logging.getLogger(__name__)

_REAP_BATCH: Final = 500  # rows one reaper transaction settles at most (the next tick takes the rest)

_WINDOWS_LUA: Final = """
local function fmt(x) return string.format('%.17g', x) end
-- the live fields of the window hash H at now (seconds from floor(now) - 60 on; older ones are
-- dropped): their sum, the oldest second with a non-zero count and the newest second
local function slide(H, first)
  local all = redis.call('HGETALL', H)
  local total, oldest, newest = 0, nil, nil
  for i = 1, #all, 2 do
    local second, count = tonumber(all[i]), tonumber(all[i + 1])
    if second < first then
      redis.call('HDEL', H, all[i])
    else
      total = total + count
      if count ~= 0 and (oldest == nil or second < oldest) then oldest = second end
      if newest == nil or second > newest then newest = second end
    end
  end
  return total, oldest, newest
end
local function later(a, b) if a == nil then return b elseif b == nil or a > b then return a else return b end end
-- add count at now (to the newest second when another host's clock ran ahead: counted longer, never shorter)
local function add(H, now, newest, count)
  local second = math.floor(now)
  if newest ~= nil and newest >= second then second = newest end
  redis.call('HINCRBY', H, string.format('%d', second), count)
  redis.call('EXPIRE', H, 180)
end
"""

ADMIT_LUA: Final = (
    _WINDOWS_LUA
    + """
-- KEYS: state, requests window, tokens window, leases, reservations
-- ARGV: ticket, now, lease until, rpm, tpm, budget ('' = none), spent and max_cost to seed with,
-- the request's bound ('' = unknown), its floor
local S, R, T, L, X = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now, rpm, tpm, budget = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local bound, floor = tonumber(ARGV[9]), tonumber(ARGV[10])
if redis.call('EXISTS', S) == 0 then
  redis.call('HSET', S, 'spent', ARGV[7], 'max_cost', ARGV[8], 'running', 0, 'reserved', 0)
end
local state = redis.call('HMGET', S, 'spent', 'max_cost', 'running', 'reserved')
local spent, max_cost = tonumber(state[1]), tonumber(state[2])
local running, reserved = tonumber(state[3]), tonumber(state[4])
-- leases that passed: their owners died; their reservations come back now
for _, dead in ipairs(redis.call('ZRANGEBYSCORE', L, '-inf', now)) do
  reserved = reserved - tonumber(redis.call('HGET', X, dead) or '0')
  running = running - 1
  redis.call('HDEL', X, dead)
  redis.call('ZREM', L, dead)
  if running <= 0 then running = 0; reserved = 0 end  -- none left: no float residue
end
local first = math.floor(now) - 60
local requests, oldest_start, newest_r = slide(R, first)
local tokens, oldest_end, newest_t = slide(T, first)
-- the rule of harness_gateway.store.decide
local outcome, reserve = 'admitted', 0
if rpm ~= nil and requests >= rpm then
  outcome = 'refused'
elseif tpm ~= nil and tokens >= tpm then
  outcome = 'refused'
elseif budget ~= nil then
  local estimate = bound
  if estimate == nil then estimate = math.max(max_cost, floor) end
  local left = budget - spent
  local room = left - reserved
  local fits
  if estimate == 0 then fits = left > 1e-9 else fits = room > 1e-9 and estimate <= room + 1e-9 end
  if not fits or (bound == nil and max_cost <= 0 and running > 0) then
    outcome = 'refused'
  else
    reserve = estimate
  end
end
if outcome == 'admitted' then
  running = running + 1
  reserved = reserved + reserve
  redis.call('HSET', X, ARGV[1], fmt(reserve))
  redis.call('ZADD', L, ARGV[3], ARGV[1])
  if rpm ~= nil then add(R, now, later(newest_r, newest_t), 1) end
end
redis.call('HSET', S, 'running', running, 'reserved', fmt(reserved))
local lease = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')
local function opt(x) if x == nil then return '' else return fmt(x + 1) end end
return {outcome, fmt(reserve), tostring(requests), opt(oldest_start), tostring(tokens), opt(oldest_end),
        tostring(running), fmt(reserved), fmt(max_cost), fmt(spent), lease[2] or ''}
"""
)
"""The admission script (see the module docs): answers ``[outcome, reserve, requests, oldest
start, tokens, oldest end, running, reserved, max_cost, spent, earliest lease end]``, numbers as
text (``%.17g``: a double survives the trip; ``''``: none)."""

SETTLE_LUA: Final = (
    _WINDOWS_LUA
    + """
-- KEYS: state, requests window, tokens window, leases, reservations
-- ARGV: ticket, amount charged, the request's cost, tokens, now
local S, R, T, L, X = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if redis.call('EXISTS', S) == 0 then return 0 end  -- Redis lost its state: the next admission seeds it from SQL
local amount, cost, tokens, now = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local state = redis.call('HMGET', S, 'spent', 'max_cost', 'running', 'reserved')
local spent, max_cost = tonumber(state[1]) + amount, tonumber(state[2])
local running, reserved = tonumber(state[3]), tonumber(state[4])
local held = redis.call('HGET', X, ARGV[1])
if held then  -- still reserving (not expired meanwhile): released now
  running = running - 1
  reserved = reserved - tonumber(held)
  redis.call('HDEL', X, ARGV[1])
  redis.call('ZREM', L, ARGV[1])
end
if running <= 0 then running = 0; reserved = 0 end
if max_cost < cost then max_cost = cost end
redis.call('HSET', S, 'spent', fmt(spent), 'max_cost', fmt(max_cost), 'running', running, 'reserved', fmt(reserved))
if tokens ~= 0 then
  local first = math.floor(now) - 60
  local _, _, newest_r = slide(R, first)
  local _, _, newest_t = slide(T, first)
  add(T, now, later(newest_r, newest_t), tokens)
end
return 1
"""
)
"""The settlement script (see the module docs); answers 1, or 0 when Redis holds no state for the key."""


SETTLE_SQL: Final = """
WITH old AS (
    SELECT status, coalesce(cost, 0) AS cost, coalesce(input_tokens, 0) + coalesce(output_tokens, 0) AS tokens,
           coalesce(key_id, '') AS key_id
    FROM gateway_ledger WHERE id = ? FOR UPDATE
), closed AS (
    UPDATE gateway_ledger SET status = ?, ended_at = ?, input_tokens = ?, output_tokens = ?, cost = ?
    WHERE id = $1 RETURNING cost
), spend AS (
    UPDATE gateway_keys g SET
        spent = g.spent + CASE WHEN old.status = 'running' THEN $6 ELSE $6 - old.cost END,
        max_cost = CASE WHEN g.max_cost < $6 THEN $6 ELSE g.max_cost END
    FROM old WHERE g.id = old.key_id AND old.key_id <> '' RETURNING g.id
)
SELECT old.status, old.cost, old.tokens, old.key_id, EXISTS (SELECT 1 FROM spend) FROM old
"""
"""PostgreSQL's settlement of a ledger row in one statement (:class:`RedisPostgresStore`): what
:meth:`RedisAdmission._ledger_settle` does in a transaction (the ledger row locked, then the key
row). Parameters: ticket, status, ended at, input and output tokens, cost."""


def _state_keys(key_id: str) -> list[str]:
    tag = f"hg:{{{key_id}}}"
    return [f"{tag}:s", f"{tag}:r", f"{tag}:t", f"{tag}:l", f"{tag}:x"]


def _number(text: str) -> float | None:
    return float(text) if text else None


class RedisLimits:
    """The Redis (or Valkey) side of admission: one client (redis-py's asyncio, a connection pool,
    created on first use) at ``url`` (a secret: never shown), the two scripts.

    Every Redis fault (unreachable, slower than twice ``timeout`` seconds, a script error) is a
    503 :class:`~harness_gateway.errors.GatewayError` (``store_unavailable``), logged with its cause.
    """

    description = "Redis limits store"

    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        self._url = url
        self.timeout = timeout
        self._client: Any = None
        self._scripts: dict[str, Any] = {}

    def __repr__(self) -> str:
        return "RedisLimits(<url hidden>)"

    def _connect(self) -> Any:
        if self._client is None:
            import redis.asyncio

            client = redis.asyncio.Redis.from_url(
                self._url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout, decode_responses=True
            )
            self._scripts = {"admit": client.register_script(ADMIT_LUA), "settle": client.register_script(SETTLE_LUA)}
            self._client = client
        return self._client

    async def _call(self, use: Callable[[Any], Awaitable[T]]) -> T:
        import redis.exceptions

        try:
            with anyio.fail_after(self.timeout * 2):
                return await use(self._connect())
        except (OSError, TimeoutError, redis.exceptions.RedisError) as exc:
            raise unavailable(self.description, exc) from exc

    async def admit(
        self,
        key: KeyRecord,
        max_cost: float,
        ticket: str,
        now: float,
        lease_until: float,
        bound: float | None = None,
        floor: float = 0.0,
        unpriced: str | None = None,
    ) -> float:
        """Decide the admission of ``ticket`` for ``key`` (as read from SQL: its limits, and
        ``spent`` / ``max_cost`` to seed Redis with) at ``now``, the request's ``bound``, ``floor``
        and ``unpriced`` as :func:`~harness_gateway.store.decide` takes them; the budget reserved.

        Raises:
            GatewayError: the 429 of :func:`~harness_gateway.store.decide`; 503 on a Redis fault.
        """

        def text(value: float | None) -> str:
            return "" if value is None else repr(value)

        args = [ticket, repr(now), repr(lease_until), text(key.rpm), text(key.tpm), text(key.budget)]
        answer = await self._call(
            lambda _: self._scripts["admit"](
                keys=_state_keys(key.id), args=[*args, repr(key.spent), repr(max_cost), text(bound), repr(floor)]
            )
        )
        if answer[0] == "admitted":
            return float(answer[1])
        seen = msgspec.structs.replace(key, spent=float(answer[9]))  # the spend Redis decided on
        window = (
            int(answer[2]), _number(answer[3]), int(answer[4]), _number(answer[5]),
            int(answer[6]), float(answer[7]), float(answer[8]), _number(answer[10]),
        )  # fmt: skip
        decision = decide(seen, window, now, bound, floor, unpriced=unpriced)
        if not isinstance(decision, GatewayError):  # pragma: no cover  # the script and decide() disagree: a bug
            raise RuntimeError(f"the admission script refused what decide() admits: {window}")
        raise decision

    async def settle(self, key_id: str, ticket: str, amount: float, cost: float, tokens: int, now: float) -> None:
        """Release ``ticket``'s reservation (when Redis still holds it), add ``amount`` USD to the
        key's spend, ``cost`` (the request's) may raise its ``max_cost``, ``tokens`` enter its window.

        Raises:
            GatewayError: 503 on a Redis fault.
        """
        args = [ticket, repr(amount), repr(cost), str(tokens), repr(now)]
        await self._call(lambda _: self._scripts["settle"](keys=_state_keys(key_id), args=args))

    async def renew(self, tickets: list[tuple[str, str]], lease_until: float) -> None:
        """Move the lease of every ``(key id, ticket)`` still held to ``lease_until`` (one pipeline;
        an expired ticket stays expired: ``ZADD XX``).

        Raises:
            GatewayError: 503 on a Redis fault.
        """

        async def work(client: Any) -> None:
            pipe = client.pipeline(transaction=False)
            for key_id, ticket in tickets:
                pipe.zadd(_state_keys(key_id)[3], {ticket: lease_until}, xx=True)
            await pipe.execute()

        await self._call(work)

    async def ping(self) -> None:
        """Raise a 503 :class:`GatewayError` unless Redis answers."""
        await self._call(lambda client: client.ping())

    async def aclose(self) -> None:
        """Close the client's connections."""
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout):
                await client.aclose()


class RedisAdmission(SqlStore):
    """A SQL store (mixed in before :class:`~harness_gateway.sqlite.SQLiteStore` or
    :class:`~harness_gateway.postgres.PostgresStore`) whose admission state is in Redis
    (:class:`RedisLimits`, ``limits``); the other arguments are the SQL store's."""

    def __init__(self, *args: Any, limits: RedisLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.description = f"{self.description}, admission in Redis"
        self.charges: dict[str, tuple[str, float, float, int, float]] = {}
        """Charges the SQL ledger made and Redis has not taken yet (a Redis fault), by ticket:
        ``(key id, amount, cost, tokens, at)``; retried by :meth:`settle_deferred` and a retried
        :meth:`settle`, never charged twice."""

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
        """Admit ``ticket`` of ``key_id`` (``bound``, ``floor``: the request's,
        :meth:`SqlStore.admit`; ``unpriced``: :func:`~harness_gateway.store.decide`'s): the key read from SQL,
        the decision in Redis (:meth:`RedisLimits.admit`), then the running ledger row; should
        that insert fail, the reservation is released again (or, Redis failing too, its lease
        returns it).

        Raises:
            GatewayError: 429 (rate or budget), 401 (revoked), 503 (SQL or Redis fault).
        """
        found = await self._statement(f"SELECT {_KEY_COLUMNS}, max_cost FROM gateway_keys WHERE id = ?", key_id)
        row = found[0] if found else None
        if row is None or row[8] is not None:
            raise revoked()
        reserve = await self.limits.admit(
            key_record(row), row[10], ticket, now, now + self.lease, bound, floor, unpriced
        )
        insert = (
            "INSERT INTO gateway_ledger (id, key_id, route, model, started_at, status, reserved, owner, lease_until)"
            " VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)"
        )
        args = (ticket, key_id, route, model, now, reserve, self.owner, now + self.lease)
        try:
            await self._statement(insert, *args)
        except GatewayError:
            # logged by unavailable() either way; should Redis fail too, the lease returns the reservation
            with contextlib.suppress(GatewayError):
                await self.limits.settle(key_id, ticket, 0.0, 0.0, 0, now)
            raise

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
        """Settle ``ticket``: the ledger row and the key's SQL ``spent`` in one transaction (the
        charge decided there: all of ``cost``, or the difference to what a reaper charged), then
        Redis (:meth:`RedisLimits.settle`). A settlement retried after a Redis fault only
        retries Redis.

        Raises:
            GatewayError: 503 on a SQL or Redis fault.
        """
        if ticket not in self.charges:
            charge = await self._ledger_settle(ticket, status, input_tokens, output_tokens, cost, moment)
            if charge is None:
                return
            self.charges[ticket] = charge
        await self._take(ticket)

    async def _statement(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """The rows of one SQL statement (``?`` placeholders), in a transaction of its own
        (:class:`RedisPostgresStore`: outside one, a single round trip).

        Raises:
            GatewayError: 503 on a database fault.
        """
        return await self.transaction(lambda tx: tx.all(sql, *args))

    async def _ledger_settle(
        self,
        ticket: str,
        status: Status,
        input_tokens: int | None,
        output_tokens: int | None,
        cost: float,
        moment: float,
    ) -> tuple[str, float, float, int, float] | None:
        """Close ledger row ``ticket`` and add what it is charged to its key's SQL ``spent``, in one
        transaction: ``(key id, amount, cost, tokens, at)`` for Redis, ``None`` when nothing is
        to be charged there (no such row, an anonymous one, a deleted key). All of ``cost`` for a
        running row; for one a reaper settled as ``lost``, the difference to what it charged.
        :class:`RedisPostgresStore` does it in one statement.

        Raises:
            GatewayError: 503 on a database fault.
        """
        tokens = (input_tokens or 0) + (output_tokens or 0)

        async def work(tx: Tx) -> tuple[str, float, float, int, float] | None:
            old = await tx.one(
                "SELECT status, coalesce(cost, 0), coalesce(input_tokens, 0) + coalesce(output_tokens, 0),"
                " coalesce(key_id, '') FROM gateway_ledger WHERE id = ?",
                ticket,
            )
            if old is None:
                return None
            await tx.run(
                "UPDATE gateway_ledger SET status = ?, ended_at = ?, input_tokens = ?, output_tokens = ?,"
                " cost = ? WHERE id = ?",
                status, moment, input_tokens, output_tokens, cost, ticket,
            )  # fmt: skip
            if old[0] == "running":
                charge = (old[3], cost, cost, tokens, moment)
            else:  # a reaper charged what was recorded: only the difference now
                charge = (old[3], cost - old[1], cost, tokens - old[2], moment)
            return charge if old[3] and await self._spend(tx, *charge[:3]) else None

        return await self.transaction(work)

    async def _spend(self, tx: Tx, key_id: str, amount: float, cost: float) -> bool:
        """Add ``amount`` to the SQL ``spent`` of ``key_id`` (``cost`` may raise its ``max_cost``);
        whether the key still exists."""
        changed = await tx.run(
            "UPDATE gateway_keys SET spent = spent + ?, max_cost = CASE WHEN max_cost < ? THEN ? ELSE max_cost END"
            " WHERE id = ?",
            amount, cost, cost, key_id,
        )  # fmt: skip
        return changed > 0

    async def _take(self, ticket: str) -> None:
        """Hand the pending charge of ``ticket`` to Redis; dropped once taken (503 on a fault, or a
        cancellation: kept for the next retry).

        The charge is claimed before the round trip, so two tasks that take the same ticket at
        once (the maintenance loop's retry and a settlement's own) charge Redis once: the second
        finds nothing pending and returns (Redis's settle adds the amount each time it runs)."""
        charge = self.charges.pop(ticket, None)
        if charge is None:  # taken meanwhile by another task
            return
        key_id, amount, cost, tokens, moment = charge
        try:
            await self.limits.settle(key_id, ticket, amount, cost, tokens, moment)
        except BaseException:
            self.charges.setdefault(ticket, charge)
            raise

    async def settle_deferred(self, *, force: bool = False) -> int:
        """Hand the pending Redis charges over (:attr:`charges`), then retry the deferred settlements
        as :meth:`SqlStore.settle_deferred` does.

        Raises:
            GatewayError: 503 while Redis fails (the rest is retried at the next call).
        """
        for ticket in list(self.charges):
            await self._take(ticket)
        return await super().settle_deferred(force=force)

    async def renew(self, *, now: float | None = None) -> int:
        """Renew this process's leases in SQL (:meth:`SqlStore.renew`) and in Redis."""
        moment = time.time() if now is None else now
        renewed = await super().renew(now=moment)
        held = [(self._key_ids[ticket], ticket) for ticket in self.running if self._key_ids.get(ticket)]
        if held:
            await self.limits.renew(held, moment + self.lease)
        return renewed

    async def reap(self, *, now: float | None = None) -> int:
        """Settle the running rows whose lease passed as ``lost`` (as :meth:`SqlStore.reap`: the
        usage last recorded is charged), in SQL, then in Redis (their reservations there have
        come back already: the admission script returns expired ones).

        Raises:
            GatewayError: 503 on a SQL or Redis fault (a charge SQL made is kept for Redis).
        """
        moment = time.time() if now is None else now
        expired = "status = 'running' AND coalesce(lease_until, started_at + ?) <= ?"
        probe = f"SELECT id FROM gateway_ledger WHERE {expired} LIMIT 1"
        if not await self.transaction(lambda tx: tx.all(probe, STALE_RUNNING, moment), write=False):
            return 0

        async def work(tx: Tx) -> tuple[int, list[tuple[str, str, float, int]]]:
            lost = await tx.all(
                "UPDATE gateway_ledger SET status = 'lost', ended_at = ?"
                f" WHERE id IN (SELECT id FROM gateway_ledger WHERE {expired} ORDER BY id LIMIT {_REAP_BATCH})"
                f" AND {expired}"
                " RETURNING id, coalesce(key_id, ''), coalesce(cost, 0),"
                " coalesce(input_tokens, 0) + coalesce(output_tokens, 0)",
                moment, STALE_RUNNING, moment, STALE_RUNNING, moment,
            )  # fmt: skip
            charged = []
            for ticket, key_id, amount, tokens in sorted(lost, key=lambda row: (row[1], row[0])):  # key order
                if key_id and await self._spend(tx, key_id, amount, amount):
                    charged.append((ticket, key_id, amount, tokens))
            return len(lost), charged

        reaped, charged = await self.transaction(work)
        logger.warning(
            "%s: settled %d ledger row(s) of gateway processes that died (their lease passed) as lost",
            self.description, reaped,
        )  # fmt: skip
        for ticket, key_id, amount, tokens in charged:
            self.charges[ticket] = (key_id, amount, amount, tokens, moment)
        for ticket, *_ in charged:
            await self._take(ticket)
        return reaped

    async def ping(self) -> None:
        """Raise a 503 :class:`GatewayError` unless both SQL and Redis answer."""
        await super().ping()
        await self.limits.ping()

    async def aclose(self) -> None:
        await super().aclose()
        await self.limits.aclose()


class RedisSQLiteStore(RedisAdmission, SQLiteStore):
    """Keys and ledger in a SQLite file, admission state in Redis."""


class RedisPostgresStore(RedisAdmission, PostgresStore):
    """Keys and ledger in PostgreSQL, admission state in Redis: each SQL step of a request is one
    statement, one round trip (the key read, the ledger insert, the settlement: :data:`SETTLE_SQL`)."""

    def __repr__(self) -> str:
        return "RedisPostgresStore(<dsn hidden>)"

    async def _statement(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        rows = await self._connected(lambda conn: conn.fetch(numbered(sql), *args))
        return [tuple(row) for row in rows]

    async def _ledger_settle(
        self,
        ticket: str,
        status: Status,
        input_tokens: int | None,
        output_tokens: int | None,
        cost: float,
        moment: float,
    ) -> tuple[str, float, float, int, float] | None:
        tokens = (input_tokens or 0) + (output_tokens or 0)
        found = await self._statement(SETTLE_SQL, ticket, status, moment, input_tokens, output_tokens, cost)
        if not found or not found[0][4]:  # no such row, an anonymous one, or a deleted key
            return None
        old_status, old_cost, old_tokens, key_id, _ = found[0]
        if old_status == "running":
            return (key_id, cost, cost, tokens, moment)
        return (key_id, cost - old_cost, cost, tokens - old_tokens, moment)  # a reaper charged what was recorded
