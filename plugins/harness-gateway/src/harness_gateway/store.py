"""The gateway's state: keys, spend, rate-limit windows and the usage ledger, in SQL.

Two backends share every statement and every decision (:class:`SqlStore`): :class:`SQLiteStore`
(WAL journal; one host, any number of processes) and
:class:`~harness_gateway.postgres.PostgresStore` (several workers or hosts). Statements are
written with ``?`` placeholders; the PostgreSQL backend numbers them.

Admission is one transaction per request that first locks the key (SQLite ``BEGIN IMMEDIATE``,
PostgreSQL ``SELECT … FOR UPDATE``), so concurrent requests of one key — from any process or
host — are decided one after the other:

* **rpm**: requests started in the last 60 s (the ledger rows) must be fewer than ``rpm``.
* **tpm**: input + output tokens of requests that ended in the last 60 s must be below ``tpm``.
* **budget**: settled spend plus what running requests reserve must stay below ``budget``. A
  request reserves the most any request of this key has cost so far; while that is unknown (no
  request settled yet) only one request runs at a time. Spend can therefore exceed the budget by
  at most one request's worth, and only when a request costs more than every earlier one.

A running ledger row older than :data:`STALE_RUNNING` seconds (its process died) no longer
reserves anything. Every failure of the database is a 503 :class:`GatewayError`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeVar

import anyio
import anyio.from_thread

from harness_core.outfile import private_file
from harness_core.types import TokenUsage
from harness_gateway.errors import GatewayError
from harness_gateway.keys import KeyRecord, KeySpec, hash_key, new_key

__all__ = [
    "KEY_TTL",
    "MIGRATIONS_SQLITE",
    "STALE_RUNNING",
    "WINDOW",
    "SQLiteStore",
    "SqlStore",
    "Status",
    "Tx",
    "decide",
    "unavailable",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
Status = Literal["complete", "aborted", "error"]

WINDOW: Final = 60.0
"""Seconds of the rolling rate-limit window."""

STALE_RUNNING: Final = 3600.0
"""Seconds after which a ``running`` ledger row stops reserving budget (its process is gone)."""

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


def decide(key: KeyRecord, window: Sequence[Any], now: float) -> GatewayError | float:
    """The admission decision for ``key``: a 429 :class:`GatewayError`, or the budget to reserve.

    ``window`` is ``(requests in window, oldest start, tokens in window, oldest end, running
    requests, reserved by them, most a request has cost)`` as :meth:`SqlStore.admit` reads it.
    """
    requests, oldest_start, tokens, oldest_end, running, reserved, max_cost = window
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
    estimate = max_cost or 0.0
    over = key.spent + reserved >= key.budget - _EPSILON
    if over or (estimate <= 0 and running > 0):
        if over and running == 0:
            return GatewayError(
                429, f"key {key.name!r} has spent its budget of ${key.budget:g}", code="budget_exceeded"
            )
        return GatewayError(
            429,
            f"key {key.name!r} is near its budget of ${key.budget:g}: wait for its running requests to finish",
            code="budget_exceeded",
            retry_after=1.0,
        )
    return estimate


def _record(row: Sequence[Any]) -> KeyRecord:
    routes = json.loads(row[2]) if row[2] is not None else None
    return KeyRecord(
        id=row[0], name=row[1], routes=routes, budget=row[3], rpm=row[4], tpm=row[5],
        expires_at=row[6], created_at=row[7], revoked_at=row[8], spent=row[9],
    )  # fmt: skip


class SqlStore:
    """Keys, admission and the ledger over a SQL backend (subclasses provide :meth:`transaction`)."""

    description = "state store"

    def __init__(self) -> None:
        self._key_cache: dict[str, tuple[float, KeyRecord]] = {}

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

        return await self.apply_migrations("gateway_schema", self.migrations)

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
            expires_at=moment + spec.expires_days * 86400 if spec.expires_days is not None else None,
            created_at=moment,
            revoked_at=None,
            spent=0.0,
        )
        routes = json.dumps(record.routes) if record.routes is not None else None

        async def insert(tx: Tx) -> None:
            await tx.run(
                "INSERT INTO gateway_keys"
                " (id, hash, name, routes, budget, rpm, tpm, expires_at, created_at, spent, max_cost)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0)",
                record.id, hash_key(plain), record.name, routes, record.budget, record.rpm, record.tpm,
                record.expires_at, record.created_at,
            )  # fmt: skip

        await self.transaction(insert)
        return plain, record

    async def list_keys(self) -> list[KeyRecord]:
        """Every key, oldest first (revoked ones included)."""
        rows = await self.transaction(
            lambda tx: tx.all(f"SELECT {_KEY_COLUMNS} FROM gateway_keys ORDER BY created_at, id"), write=False
        )
        return [_record(row) for row in rows]

    async def revoke(self, id_or_name: str, *, now: float | None = None) -> int:
        """Revoke the live keys whose id or name is ``id_or_name``; how many were revoked."""
        moment = time.time() if now is None else now
        revoked = await self.transaction(
            lambda tx: tx.run(
                "UPDATE gateway_keys SET revoked_at = ? WHERE (id = ? OR name = ?) AND revoked_at IS NULL",
                moment,
                id_or_name,
                id_or_name,
            )
        )
        self._key_cache.clear()
        return revoked

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
        record = _record(row)
        if len(self._key_cache) >= _KEY_CACHE_MAX:
            self._key_cache.clear()
        self._key_cache[digest] = (now + KEY_TTL, record)
        return record

    async def admit(self, key: KeyRecord | None, route: str, model: str, *, now: float | None = None) -> str:
        """Check ``key``'s limits and budget atomically and open its ledger row; the row's id.

        ``key`` ``None`` (keys not required) records the row without checks.

        Raises:
            GatewayError: 429 (rate or budget, with ``retry_after``), 401 when the key was revoked
                meanwhile, 503 when the database fails.
        """
        ticket = uuid.uuid4().hex
        moment = time.time() if now is None else now

        async def work(tx: Tx) -> None:
            reserve = 0.0
            if key is not None:
                reserve = await self._check(tx, key.id, moment)
            await tx.run(
                "INSERT INTO gateway_ledger (id, key_id, route, model, started_at, status, reserved)"
                " VALUES (?, ?, ?, ?, ?, 'running', ?)",
                ticket, key.id if key is not None else None, route, model, moment, reserve,
            )  # fmt: skip

        await self.transaction(work)
        return ticket

    async def _check(self, tx: Tx, key_id: str, now: float) -> float:
        row = await tx.one(f"SELECT {_KEY_COLUMNS}, max_cost FROM gateway_keys WHERE id = ?{self.lock_clause}", key_id)
        if row is None or _record(row).revoked_at is not None:
            raise GatewayError(401, "this API key has been revoked", code="invalid_api_key")
        key = _record(row)
        since = now - WINDOW
        # only the windows a limit of this key needs are read (decide() reads no other)
        requests: tuple[Any, ...] | None = (0, None)
        if key.rpm is not None:
            requests = await tx.one(
                "SELECT count(*), min(started_at) FROM gateway_ledger WHERE key_id = ? AND started_at > ?",
                key_id, since,
            )  # fmt: skip
        tokens: tuple[Any, ...] | None = (0, None)
        if key.tpm is not None:
            tokens = await tx.one(
                "SELECT coalesce(sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)), 0), min(ended_at)"
                " FROM gateway_ledger WHERE key_id = ? AND ended_at > ?",
                key_id, since,
            )  # fmt: skip
        running: tuple[Any, ...] | None = (0, 0.0)
        if key.budget is not None:
            running = await tx.one(
                "SELECT count(*), coalesce(sum(reserved), 0) FROM gateway_ledger"
                " WHERE key_id = ? AND status = 'running' AND started_at > ?",
                key_id, now - STALE_RUNNING,
            )  # fmt: skip
        assert requests is not None  # an aggregate query always returns one row
        assert tokens is not None
        assert running is not None
        decision = decide(key, (*requests, *tokens, *running, row[10]), now)
        if isinstance(decision, GatewayError):
            raise decision
        return decision

    lock_clause = ""
    """Appended to the key read of an admission (``" FOR UPDATE"`` on PostgreSQL)."""

    async def settle(
        self, ticket: str, status: Status, usage: TokenUsage | None, cost: float, *, now: float | None = None
    ) -> None:
        """Close ledger row ``ticket``: its status, tokens and cost; the key's spend grows by ``cost``."""
        moment = time.time() if now is None else now
        input_tokens = usage.input_tokens if usage is not None else None
        output_tokens = usage.output_tokens if usage is not None else None

        async def work(tx: Tx) -> None:
            row = await tx.one("SELECT key_id FROM gateway_ledger WHERE id = ?", ticket)
            await tx.run(
                "UPDATE gateway_ledger SET status = ?, ended_at = ?, input_tokens = ?, output_tokens = ?, cost = ?,"
                " reserved = 0 WHERE id = ?",
                status, moment, input_tokens, output_tokens, cost, ticket,
            )  # fmt: skip
            if row is not None and row[0] is not None:
                await tx.run(
                    "UPDATE gateway_keys SET spent = spent + ?,"
                    " max_cost = CASE WHEN max_cost < ? THEN ? ELSE max_cost END WHERE id = ?",
                    cost, cost, cost, row[0],
                )  # fmt: skip

        await self.transaction(work)

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


MIGRATIONS_SQLITE: Final = (
    (
        1,
        """
        CREATE TABLE gateway_keys (
            id TEXT PRIMARY KEY,
            hash TEXT NOT NULL UNIQUE,          -- SHA-256 hex of the key (the key itself is never stored)
            name TEXT NOT NULL,
            routes TEXT,                        -- JSON list, NULL = every route
            budget REAL,                        -- USD, NULL = unlimited
            rpm INTEGER,
            tpm INTEGER,
            expires_at REAL,                    -- unix seconds
            created_at REAL NOT NULL,
            revoked_at REAL,
            spent REAL NOT NULL,                -- USD settled so far
            max_cost REAL NOT NULL              -- the most one request has cost (budget reservation)
        );
        CREATE TABLE gateway_ledger (
            id TEXT PRIMARY KEY,
            key_id TEXT,
            route TEXT NOT NULL,
            model TEXT NOT NULL,
            started_at REAL NOT NULL,
            ended_at REAL,
            status TEXT NOT NULL,               -- running | complete | aborted | error
            input_tokens INTEGER,
            output_tokens INTEGER,
            cost REAL,
            reserved REAL NOT NULL
        );
        CREATE INDEX gateway_ledger_key_started ON gateway_ledger (key_id, started_at);
        CREATE INDEX gateway_ledger_key_ended ON gateway_ledger (key_id, ended_at);
        """,
    ),
)
"""Versioned schema migrations for SQLite: ``(version, script)``, applied in order, once each."""


class _SQLiteTx:
    """A transaction's statements, run at once on the calling (worker) thread: awaiting one
    never suspends, so :func:`_run_now` can drive the whole transaction in that thread."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, args).fetchone()
        return row

    async def all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, args).fetchall()

    async def run(self, sql: str, *args: Any) -> int:
        return self.conn.execute(sql, args).rowcount


def _run_now(work: Awaitable[T]) -> T:
    """The result of ``work``, driven to its end on this thread without an event loop.

    Raises:
        RuntimeError: ``work`` awaited something that suspends (only :class:`_SQLiteTx`
            statements may be awaited in a SQLite transaction).
    """
    steps = work.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    steps.close()
    raise RuntimeError("a SQLite transaction may only await its own statements")


SET_UP_RETRY: Final = 0.01
"""Seconds between two attempts to set a SQLite file up while another process holds it."""


class SQLiteStore(SqlStore):
    """The embedded store: one SQLite file in WAL mode, shared by the processes of one host.

    A transaction runs whole (``BEGIN`` … ``COMMIT``, a few microseconds without ``fsync``)
    on the event loop's thread when it can start at once, and in a worker thread, waiting up to
    ``timeout`` seconds, when another process holds the write lock (``SQLITE_BUSY``): the common
    case costs no thread hop and no event-loop turn (not even for a lock: nothing else runs on
    the loop while it does), and the event loop never waits on another process; the worker
    threads' connection serves one transaction at a time. Admissions take the write lock first
    (``BEGIN IMMEDIATE``), which serialises them across processes too. A request cancelled
    while its transaction waited in a worker thread commits nothing.

    Durability: ``synchronous=NORMAL``, SQLite's advice for WAL
    (https://www.sqlite.org/pragma.html#pragma_synchronous): a commit does not wait for
    ``fsync`` (measured here: 4.5 ms per commit with ``FULL``, three commits per request, under
    one lock), the database stays consistent, and a crash of the gateway loses nothing; an
    operating-system crash or power loss may lose the transactions since the last checkpoint
    (the newest ledger rows and their spend). Use PostgreSQL where that matters. Checkpoints
    (which do ``fsync``) run in a worker thread every :attr:`checkpoint_every` write
    transactions, never on the event loop.
    """

    migrations = MIGRATIONS_SQLITE

    checkpoint_every = 1000
    """Write transactions of this process between two WAL checkpoints."""

    def __init__(self, path: Path, *, timeout: float = 5.0) -> None:
        super().__init__()
        self.path = path
        self.timeout = timeout
        self.description = f"SQLite state store {path}"
        self._conns: dict[bool, sqlite3.Connection] = {}
        """``False``: the event loop's connection (never waits for a lock); ``True``: the
        worker threads' (waits up to ``timeout`` seconds)."""
        self._lock = anyio.Lock()
        self._writes = 0

    def _connect(self, wait: bool) -> sqlite3.Connection:
        conn = self._conns.get(wait)
        if conn is None:
            private_file(self.path)  # keys' hashes, spend and request records: the user's only (0600)
            # Opened on a worker thread either way: setting the file up waits for other processes
            # (switching a new file to WAL takes its lock: two workers starting at once would
            # otherwise see "database is locked"); only then does the event loop's connection
            # stop waiting (busy_timeout 0: a busy transaction moves to a worker thread).
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            try:
                self._set_up(conn)
            except BaseException:
                conn.close()
                raise
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000) if wait else 0}")
            self._conns[wait] = conn
        return conn

    def _set_up(self, conn: sqlite3.Connection) -> None:
        """WAL mode and its settings, retried for up to :attr:`timeout` seconds while another
        process holds the file: switching to WAL promotes a read lock to an exclusive one, and
        SQLite answers ``SQLITE_BUSY`` at once rather than wait when that could deadlock with
        another process doing the same (https://www.sqlite.org/c3ref/busy_handler.html)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # no fsync per commit (see the class docs)
                conn.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints run on a worker thread
                return
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(SET_UP_RETRY)  # on a worker thread, never the event loop

    def _whole(
        self, conn: sqlite3.Connection, work: Callable[[Tx], Awaitable[T]], write: bool, threaded: bool = False
    ) -> T:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = _run_now(work(_SQLiteTx(conn)))
            if threaded:  # the request may have been cancelled while this thread waited for the lock
                anyio.from_thread.check_cancelled()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def _waiting(self, work: Callable[[Tx], Awaitable[T]], write: bool) -> T:  # on a worker thread
        return self._whole(self._connect(True), work, write, threaded=True)

    async def transaction(self, work: Callable[[Tx], Awaitable[T]], *, write: bool = True) -> T:
        try:
            conn = self._conns.get(False)
            if conn is None:  # opening the file touches the disk: off the event loop
                async with self._lock:
                    conn = await anyio.to_thread.run_sync(self._connect, False)
            try:  # no await until it has committed or rolled back: no other task can interleave
                result = self._whole(conn, work, write)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                async with self._lock:  # the worker threads' connection: one transaction at a time
                    result = await anyio.to_thread.run_sync(self._waiting, work, write)
        except (sqlite3.Error, OSError) as exc:
            raise unavailable(self.description, exc) from exc
        if write:
            self._writes += 1
            if self._writes % self.checkpoint_every == 0:
                async with self._lock:
                    await anyio.to_thread.run_sync(self._checkpoint)
        return result

    def _checkpoint(self) -> None:  # on a worker thread
        try:
            self._connect(True).execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:  # the next one retries; the WAL only grows meanwhile
            logger.warning("%s: WAL checkpoint failed: %s", self.description, exc)

    async def aclose(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await anyio.to_thread.run_sync(conn.close)


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is SQLite's "another connection holds the lock" (``SQLITE_BUSY`` or
    ``SQLITE_LOCKED``, any extended code), as opposed to a real fault."""
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


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
